/**
 * `npm run bench:pool-load [-- --quick] [--placement controller|bench]`: the shared pool's rows
 * alone (pool-load.ts), where `warmpool bench` takes many minutes: the bench's own Redis and S3,
 * models of its own published, an API child and `warmpool worker --pool` children. The same rows
 * `warmpool bench` prints once. `--placement bench` places the Zipf run's misses with the bench's
 * plain router instead of the pool controller (pool-load-run.ts), to tell the two apart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { type Closer, closeAll } from '../../infra/kernel/lifecycle.ts';
import { benchPoolLoad } from './pool-load-run.ts';
import { formatTable } from './report.ts';
import { startBenchContext } from './services.ts';
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
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-pool-load-'));
  const closers: Closer[] = [];
  const started = Date.now();
  try {
    const ctx = await startBenchContext(dir, values.quick, out, closers);
    out(
      `bench:pool-load${values.quick ? ' --quick' : ''}: ${os.availableParallelism()} cpus, node ${process.version}, placement ${placement}`,
    );
    const rows = await benchPoolLoad(ctx, benchSizes(values.quick).pool, placement);
    out('');
    out(formatTable(rows));
    out(`took ${Math.round((Date.now() - started) / 1000)} s`);
    return rows.every((r) => Number.isFinite(r.value)) ? 0 : 1;
  } finally {
    await closeAll([...closers].reverse()).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
