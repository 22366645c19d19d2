/**
 * `warmpool deploy M [--version V | --split V1=90,V2=10] [--min N] [--max N] [--standby N]
 * [--backlog-max N|off] [--policy FILE] [--pool NAME|none]`, `warmpool rollback M` and
 * `warmpool deployments`.
 *
 * `deploy` changes only what it is told: flags left out keep the deployment's current values; a
 * first deployment gets min 1, max max(min, 1), standby 0 and the registry's latest version.
 * Every version named must exist in the registry, and a `--pool` must exist (`warmpool pool
 * set`); `--pool none` goes back to a pool of the deployment's own. The record lands in Redis, where the pool
 * (and later the scaler) picks it up. The rules are the API's own (api/use-cases/deployments.ts).
 */
import { readFileSync } from 'node:fs';
import { putDeployment, rollbackDeployment } from '../../api/use-cases/deployments.ts';
import {
  createDeploymentStore,
  type Deployment,
  type DeploymentChange,
  type VersionWeight,
} from '../../infra/deployments/deployment-store.ts';
import { createSharedPoolStore, type SharedPoolStore } from '../../infra/deployments/pool-store.ts';
import type { Config } from '../../infra/kernel/config.ts';
import { errorMessage, InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createModelRegistry, type ModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { notFoundHint, withNearestName } from './cli-errors.ts';
import { DEPLOY, DEPLOYMENTS, ROLLBACK } from './cli-options.ts';
import { parseCommand, UsageError } from './cli-spec.ts';

/** Where a command writes; the process's streams unless a test captures them. */
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
}

export const processIo: CliIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

type Stores = { deployments: ReturnType<typeof createDeploymentStore>; registry: ModelRegistry; pools: SharedPoolStore };

export function deployMain(command: 'deploy' | 'deployments', args: string[], config: Config, io: CliIo = processIo): Promise<number> {
  return withStores(config, io, command, async ({ deployments, registry, pools }) => {
    if (command === 'deployments') {
      parseCommand(DEPLOYMENTS, args);
      const all = await deployments.list();
      for (const d of all) io.out(`${describe(d)}\n`);
      if (all.length === 0) io.err('no deployments yet: `warmpool deploy M` deploys a published model\n');
      return 0;
    }
    const { model, change } = parseDeployArgs(args);
    const d = await putDeployment({ deployments, catalog: registry }, { model, change }).catch(async (err: unknown) => {
      if (change.pool && err instanceof InvalidInputError && err.code === 'pool_not_found') {
        throw await withNearestName(err, change.pool, async () => (await pools.list()).map((p) => p.name));
      }
      throw await withNearestName(err, model, async () => (await registry.list()).map((m) => m.name));
    });
    io.out(`deployed ${d.model}@${d.version}${splitText(d)} (revision ${d.revision}; ${boundsText(d)})\n`);
    return 0;
  });
}

/** `warmpool rollback M`: the previous revision's config, as a new revision. */
export function rollbackMain(args: string[], config: Config, io: CliIo = processIo): Promise<number> {
  return withStores(config, io, 'rollback', async ({ deployments, registry }) => {
    const model = oneModel(args, ROLLBACK, 'warmpool rollback demo-scorer');
    const d = await rollbackDeployment({ deployments, catalog: registry }, model).catch(async (err: unknown) => {
      throw await withNearestName(err, model, async () => (await deployments.list()).map((x) => x.model));
    });
    io.out(
      `rolled back ${d.model} to revision ${d.restoredFrom}'s config, now revision ${d.revision}: ` +
        `${d.model}@${d.version}${splitText(d)} (${boundsText(d)})\n`,
    );
    return 0;
  });
}

async function withStores(config: Config, io: CliIo, command: string, run: (stores: Stores) => Promise<number>): Promise<number> {
  const redis = createRedis(config.redisUrl, { maxRetriesPerRequest: 2 });
  const store = createS3ObjectStore(config.s3);
  try {
    return await run({
      deployments: createDeploymentStore(redis, config.queuePrefix),
      registry: createModelRegistry({ store, prefix: config.s3.prefix }),
      pools: createSharedPoolStore(redis, config.queuePrefix),
    });
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`${err.message}\n`);
      return 2;
    }
    if (err instanceof InvalidInputError || err instanceof NotFoundError) {
      io.err(`warmpool ${command}: ${err.message}\n`);
      if (err instanceof NotFoundError) for (const hint of notFoundHint(err.code)) io.err(`${hint}\n`);
      return 2;
    }
    throw err;
  } finally {
    await closeRedis(redis);
    store.close();
  }
}

function parseDeployArgs(args: string[]): { model: string; change: DeploymentChange } {
  const { values } = parseCommand(DEPLOY, args);
  const model = oneModel(args, DEPLOY, 'warmpool deploy demo-scorer --version 1 --min 1 --max 4');
  if (values.version !== undefined && values.split !== undefined) throw badArgument('give --version or --split, not both');
  const change: DeploymentChange = {};
  if (values.version !== undefined) change.version = values.version;
  if (values.split !== undefined) change.versions = parseSplit(values.split);
  if (values.min !== undefined) change.min = toInt('--min', values.min);
  if (values.max !== undefined) change.max = toInt('--max', values.max);
  if (values.standby !== undefined) change.standby = toInt('--standby', values.standby);
  const backlog = values['backlog-max'];
  if (backlog !== undefined) change.backlogMax = backlog === 'off' ? null : toInt('--backlog-max', backlog);
  if (values.policy !== undefined) change.policy = readPolicy(values.policy);
  if (values.pool !== undefined) change.pool = values.pool === 'none' ? null : values.pool;
  return { model, change };
}

/** The one model the command line names (its table allows one positional; none, or more, is a usage error). */
function oneModel(args: string[], spec: typeof DEPLOY | typeof ROLLBACK, example: string): string {
  const { positionals } = parseCommand(spec, args);
  const model = positionals[0];
  if (!model) throw badArgument(`name one model, e.g. ${example}`);
  return model;
}

/** `1=90,2=10` → [{version: '1', weight: 90}, {version: '2', weight: 10}]; the sum is checked with the rest. */
function parseSplit(raw: string): VersionWeight[] {
  return raw.split(',').map((part) => {
    const m = /^\s*([^=\s]+)\s*=\s*(\d+)\s*$/.exec(part);
    if (!m) throw badArgument(`--split takes VERSION=PERCENT pairs separated by commas, e.g. 1=90,2=10 (got "${part}")`);
    return { version: m[1] as string, weight: Number(m[2]) };
  });
}

function readPolicy(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw badArgument(`cannot read --policy ${file}: ${errorMessage(err)}`);
  }
  try {
    return JSON.parse(text) as Record<string, unknown>; // an object or not: validateDeployment says
  } catch (err) {
    throw badArgument(`--policy ${file} is not valid JSON: ${errorMessage(err)}`);
  }
}

function toInt(flag: string, raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(n) || n < 0) throw badArgument(`${flag} must be a non-negative integer (got "${raw}")`);
  return n;
}

function badArgument(message: string): InvalidInputError {
  return new InvalidInputError('invalid_argument', message);
}

/** One line of `warmpool deployments`: model, versions (with the split when there is one), bounds, revision, time. */
function describe(d: Deployment): string {
  const versions = d.versions.length === 1 ? d.version : d.versions.map((v) => `${v.version}=${v.weight}`).join(',');
  const backlog = d.backlogMax === undefined ? '' : ` backlog-max=${d.backlogMax}`;
  const pool = d.pool === undefined ? '' : ` pool=${d.pool}`;
  return `${d.model}\t${versions}\tmin=${d.min} max=${d.max} standby=${d.standby}${backlog}${pool}\trevision ${d.revision}\t${d.updatedAt}`;
}

function splitText(d: Deployment): string {
  return d.versions.length === 1 ? '' : ` split ${d.versions.map((v) => `${v.version}=${v.weight}%`).join(', ')}`;
}

function boundsText(d: Deployment): string {
  const backlog = d.backlogMax === undefined ? '' : `, backlog-max ${d.backlogMax}`;
  // In a shared pool the pool's bounds size the workers; the deployment's own wait for it to leave.
  if (d.pool !== undefined) return `shared pool ${d.pool}${backlog}`;
  return `min ${d.min}, max ${d.max}, standby ${d.standby}${backlog}`;
}
