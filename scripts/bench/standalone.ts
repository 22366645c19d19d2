/**
 * One section of `warmpool bench` run alone (`npm run bench:edge-hop`, `bench:pool-load`): a
 * folder of its own, the bench's own Redis and S3 (services.ts), a header naming the machine, the
 * section's rows as a table, how long it took; everything started is closed and the folder
 * removed, whatever happens. Exit 0 when every row has a figure, 1 when one is n/a.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Closer, closeAll } from '../../infra/kernel/lifecycle.ts';
import { type BenchRow, formatTable } from './report.ts';
import { type BenchContext, startBenchContext } from './services.ts';

export interface StandaloneBench {
  /** `bench:pool-load`: the header's and the folder's name. */
  name: string;
  quick: boolean;
  /** What the header says after the machine, e.g. `model cnn`. */
  describe: string;
  /** The section's rows; whatever it starts it closes itself or pushes onto `closers`. */
  rows(ctx: BenchContext, closers: Closer[]): Promise<BenchRow[]>;
}

export async function runStandalone(b: StandaloneBench): Promise<number> {
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const dir = mkdtempSync(path.join(os.tmpdir(), `warmpool-${b.name.replace(/^bench:/, '')}-`));
  const closers: Closer[] = [];
  const started = Date.now();
  try {
    const ctx = await startBenchContext(dir, b.quick, out, closers);
    out(`${b.name}${b.quick ? ' --quick' : ''}: ${os.availableParallelism()} cpus, node ${process.version}, ${b.describe}`);
    const rows = await b.rows(ctx, closers);
    out('');
    out(formatTable(rows));
    out(`took ${Math.round((Date.now() - started) / 1000)} s`);
    return rows.every((r) => Number.isFinite(r.value)) ? 0 : 1;
  } finally {
    await closeAll([...closers].reverse()).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}
