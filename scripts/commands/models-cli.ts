/** `warmpool models …`: wires the registry from config and hands over to the command. */
import type { Config } from '../../infra/kernel/config.ts';
import { createModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { modelsCommand } from './models.ts';

export async function modelsMain(args: string[], config: Config): Promise<number> {
  const store = createS3ObjectStore(config.s3);
  try {
    const registry = createModelRegistry({ store, prefix: config.s3.prefix });
    return await modelsCommand(args, {
      registry,
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`${line}\n`),
      prefix: 'warmpool models',
    });
  } finally {
    store.close();
  }
}
