/**
 * `warmpool deploy M [--version V] [--min N] [--max N] [--standby N]` and `warmpool deployments`.
 * The version must exist in the registry (latest when omitted); the deployment is stored in
 * Redis where the pool (and later the scaler) picks it up.
 */
import { parseArgs } from 'node:util';
import type { Config } from '../../infra/config.ts';
import { createDeploymentStore } from '../../infra/deployments.ts';
import { closeRedis, createRedis } from '../../infra/redis.ts';
import { createModelRegistry } from '../../infra/registry.ts';
import { createS3ObjectStore } from '../../infra/s3-object-store.ts';
import { InvalidInputError, NotFoundError } from '../../infra/errors.ts';

export async function deployMain(command: 'deploy' | 'deployments', args: string[], config: Config): Promise<number> {
  const redis = createRedis(config.redisUrl, { maxRetriesPerRequest: 2 });
  const store = createS3ObjectStore(config.s3);
  try {
    const deployments = createDeploymentStore(redis, config.queuePrefix);
    if (command === 'deployments') {
      for (const d of await deployments.list()) {
        process.stdout.write(`${d.model}\t${d.version}\tmin=${d.min} max=${d.max} standby=${d.standby}\t${d.updatedAt}\n`);
      }
      return 0;
    }
    const { values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: {
        version: { type: 'string' },
        min: { type: 'string', default: '1' },
        max: { type: 'string' },
        standby: { type: 'string', default: '0' },
      },
    });
    const model = positionals[0];
    if (!model || positionals.length > 1) {
      process.stderr.write('warmpool deploy: name one model, e.g. warmpool deploy demo-scorer --version 1 --min 1 --max 4\n');
      return 2;
    }
    const manifest = await createModelRegistry({ store, prefix: config.s3.prefix }).getManifest(model, values.version);
    const min = toInt('--min', values.min);
    const deployment = await deployments.put({
      model,
      version: manifest.version,
      min,
      max: values.max === undefined ? Math.max(min, 1) : toInt('--max', values.max),
      standby: toInt('--standby', values.standby),
    });
    process.stdout.write(
      `deployed ${deployment.model}@${deployment.version} (min ${deployment.min}, max ${deployment.max}, standby ${deployment.standby})\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof InvalidInputError || err instanceof NotFoundError) {
      process.stderr.write(`warmpool deploy: ${err.message}\n`);
      return 2;
    }
    throw err;
  } finally {
    await closeRedis(redis);
    store.close();
  }
}

function toInt(flag: string, raw: string | undefined): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0)
    throw new InvalidInputError('invalid_argument', `${flag} must be a non-negative integer (got "${raw}")`);
  return n;
}
