/**
 * `npm run bench:pool-load [-- --quick] [--placement controller|bench]`: the shared pool's rows
 * alone (pool-load.ts), where `warmpool bench` takes many minutes: the bench's own Redis and S3,
 * models of its own published, an API child and `warmpool worker --pool` children. The same rows
 * `warmpool bench` prints once. `--placement bench` places the Zipf run's misses with the bench's
 * plain router instead of the pool controller (pool-load-run.ts), to tell the two apart.
 */
import { parseArgs } from 'node:util';
import { benchPoolLoad } from './pool-load-run.ts';
import { runStandalone } from './standalone.ts';
import { benchSizes } from './suite.ts';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { quick: { type: 'boolean', default: false }, placement: { type: 'string', default: 'controller' } },
    strict: true,
  });
  const placement = values.placement;
  if (placement !== 'controller' && placement !== 'bench') {
    process.stderr.write(`bench:pool-load: --placement is 'controller' or 'bench' (got '${placement}')\n`);
    return 2;
  }
  return runStandalone({
    name: 'bench:pool-load',
    quick: values.quick,
    describe: `placement ${placement}`,
    rows: (ctx) => benchPoolLoad(ctx, benchSizes(values.quick).pool, placement),
  });
}

process.exitCode = await main();
