import { describe, expect, it } from 'vitest';
import type { BulkRunSpec } from '../contracts/bulk.ts';
import { manifestHead } from './run-manifest.ts';
import { type RunRecord, viewOf } from './run-store.ts';

const spec: BulkRunSpec = {
  id: 'nightly',
  tenant: 't',
  model: 'm',
  version: '1',
  input: { bucket: 'in-bucket', prefix: 'day/' },
  output: { bucket: 'out-bucket', prefix: 'day/' },
  chunkRows: 10_000,
  createdAt: 0,
};

/** A run of a million rows over 88.817 s whose last drive's window saw ten times that rate (a resume counting parts done meanwhile). */
function record(status: RunRecord['status']): RunRecord {
  const rows = 1_000_000;
  return {
    ref: 't/nightly',
    spec,
    status,
    priority: 'bulk',
    samples: [],
    badRows: 0,
    rowsDone: rows,
    chunksDone: 100,
    progress: { rowsDone: rows, rowsTotal: rows, rowsTotalExact: true, chunksDone: 100, badRows: 0, rowsPerSecond: 106_561 },
    startedAt: 1_000,
    finishedAt: 89_817,
  };
}

describe('viewOf: rows/s', () => {
  it("a succeeded run's is rows ÷ its duration, the figure its manifest gives, not the last window's", () => {
    const done = record('succeeded');
    const manifest = manifestHead({
      spec,
      model: { sha256: 'x' },
      listing: [],
      chunks: done.chunksDone,
      parts: async () => [],
      rows: done.rowsDone,
      badRows: 0,
      samples: [],
      startedAt: done.startedAt as number,
      finishedAt: done.finishedAt as number,
    });
    expect(manifest.timings.rowsPerSecond).toBe(11_259.1);
    expect(viewOf(done).progress.rowsPerSecond).toBe(manifest.timings.rowsPerSecond);
  });

  it("a running run's is its driver's recent rate; a failed or canceled one's is 0", () => {
    const { finishedAt: _, ...running } = record('running');
    expect(viewOf(running).progress.rowsPerSecond).toBe(106_561);
    expect(viewOf(record('failed')).progress.rowsPerSecond).toBe(0);
    expect(viewOf(record('canceled')).progress.rowsPerSecond).toBe(0);
  });
});
