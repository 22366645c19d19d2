import { describe, expect, it } from 'vitest';
import type { BulkProgress, BulkRunView } from '../../infra/contracts/bulk.ts';
import {
  allRowsBad,
  displayRate,
  endedBadly,
  formatBadRows,
  formatProgressBar,
  formatProgressLine,
  formatSummary,
  fractionDone,
} from './bulk-progress.ts';

function run(progress: Partial<BulkProgress> = {}, extra: Partial<BulkRunView> = {}): BulkRunView {
  return {
    id: 'nightly',
    tenant: 't',
    model: 'm',
    version: '1',
    status: 'running',
    input: 's3://in-bucket/day/',
    output: 's3://out-bucket/day/',
    chunkRows: 100,
    priority: 'bulk',
    progress: { rowsDone: 0, rowsTotal: 0, rowsTotalExact: false, chunksDone: 0, badRows: 0, rowsPerSecond: 0, ...progress },
    badRowSamples: [],
    createdAt: 0,
    ...extra,
  };
}

describe('fractionDone', () => {
  it('is 0 while the total is unknown and 1 only once the run succeeded', () => {
    expect(fractionDone(run())).toBe(0);
    expect(fractionDone(run({ rowsDone: 250, rowsTotal: 1000 }))).toBe(0.25);
    // An estimate that fell short of the rows done does not claim completion.
    expect(fractionDone(run({ rowsDone: 1200, rowsTotal: 1000 }))).toBe(0.999);
    expect(fractionDone(run({ rowsDone: 1000, rowsTotal: 1000, rowsTotalExact: true }, { status: 'succeeded' }))).toBe(1);
  });
});

describe('formatProgressBar', () => {
  it('shows the bar, percentage, rows, rate, ETA and bad rows, and marks a late run', () => {
    const line = formatProgressBar(
      run({ rowsDone: 5230, rowsTotal: 10_000, rowsTotalExact: true, rowsPerSecond: 812.4, etaSeconds: 5.8, badRows: 2, onTrack: false }),
      100,
    );
    expect(line).toMatch(/^\[█+░+\] 52\.3% 5,230\/10,000 rows 812 rows\/s ETA 6s 2 bad late$/);
    const bar = /^\[([█░]+)\]/.exec(line)?.[1] ?? '';
    expect([...bar].filter((c) => c === '█').length / [...bar].length).toBeCloseTo(0.523, 1);
  });

  it('marks an estimated total with ~ and an unknown ETA with ?', () => {
    const line = formatProgressBar(run({ rowsDone: 10, rowsTotal: 400, rowsPerSecond: 2.25 }), 100);
    expect(line).toContain('10/~400 rows 2.3 rows/s ETA ?');
    expect(line).not.toContain('late');
    expect(line).not.toContain('bad');
  });

  it('fits the terminal width', () => {
    const view = run({
      rowsDone: 123_456_789,
      rowsTotal: 987_654_321,
      rowsPerSecond: 123_456,
      etaSeconds: 7000,
      badRows: 99_999,
      onTrack: false,
    });
    for (const width of [40, 60, 80, 120]) expect(formatProgressBar(view, width).length).toBeLessThanOrEqual(width);
  });
});

describe('formatProgressLine and formatSummary', () => {
  it('a plain progress line names the run', () => {
    expect(formatProgressLine(run({ rowsDone: 50, rowsTotal: 200, rowsTotalExact: true, rowsPerSecond: 10, etaSeconds: 15 }))).toBe(
      'bulk nightly: 50/200 rows (25.0%), 10.0 rows/s, ETA 15s',
    );
  });

  it('a succeeded run names its manifest and duration', () => {
    const done = run(
      // rowsPerSecond as viewOf gives a succeeded run: 200 rows ÷ 125 s.
      { rowsDone: 200, rowsTotal: 200, rowsTotalExact: true, rowsPerSecond: 1.6, badRows: 3 },
      { status: 'succeeded', startedAt: 1000, finishedAt: 126_000, manifest: 's3://out-bucket/day/_manifest.json' },
    );
    expect(formatSummary(done)).toBe(
      'bulk nightly succeeded: 200 rows, 3 bad rows in 2m05s (1.6 rows/s); manifest s3://out-bucket/day/_manifest.json',
    );
  });

  it('a failed run gives how far it got, its code and message, and its input when the message names none; a canceled one its rows done', () => {
    const failed = run({}, { status: 'failed', error: { code: 'too_many_bad_rows', message: '11 bad rows, more than 10' } });
    expect(formatSummary(failed)).toBe(
      'bulk nightly failed after 0 rows: too_many_bad_rows: 11 bad rows, more than 10 (input s3://in-bucket/day/)',
    );
    const named = run(
      { rowsDone: 2990, rowsTotal: 3000, rowsTotalExact: true, badRows: 31 },
      {
        status: 'failed',
        startedAt: 0,
        finishedAt: 4000,
        error: {
          code: 'too_many_bad_rows',
          message: '31 bad rows, more than maxBadRows 30; the first: s3://in-bucket/day/a.jsonl line 4: not JSON',
        },
      },
    );
    expect(formatSummary(named)).toBe(
      'bulk nightly failed after 2,990 of 3,000 rows in 4s: too_many_bad_rows: 31 bad rows, more than maxBadRows 30; the first: s3://in-bucket/day/a.jsonl line 4: not JSON',
    );
    expect(formatSummary(run({ rowsDone: 40 }, { status: 'canceled' }))).toBe('bulk nightly canceled after 40 rows');
  });

  it('a run that stopped short shows where it stopped, never a share done', () => {
    const failed = run({ rowsDone: 2990, rowsTotal: 3000, rowsTotalExact: true, badRows: 31 }, { status: 'failed' });
    expect(formatProgressLine(failed)).toBe('bulk nightly: failed at 2,990 of 3,000 rows, 31 bad');
    expect(formatProgressBar(failed, 100)).toMatch(/^\[█+░*\] failed at 2,990 of 3,000 rows 31 bad$/);
    const canceled = run({ rowsDone: 40, rowsTotal: 400 }, { status: 'canceled' });
    expect(formatProgressLine(canceled)).toBe('bulk nightly: canceled at 40 of ~400 rows');
    for (const line of [formatProgressLine(failed), formatProgressBar(failed), formatProgressLine(canceled)]) expect(line).not.toMatch(/%/);
  });

  it('bad row samples read as s3 URLs with line numbers', () => {
    const view = run({ badRows: 1 }, { badRowSamples: [{ object: 'day/a.jsonl', line: 7, message: 'missing "id"' }] });
    expect(formatBadRows(view)).toEqual(['  s3://in-bucket/day/a.jsonl line 7: missing "id"']);
  });
});

describe('displayRate: the rate a user can check against the clock', () => {
  const now = 1_000_000;

  it('in its first minute, a run shows rows done ÷ time since it started, and the ETA that rate gives', () => {
    // The driver's rate starts at its first progress save, after the first chunks finished: here
    // twice what the run has done per second of its life.
    const young = run(
      { rowsDone: 1000, rowsTotal: 3000, rowsTotalExact: true, rowsPerSecond: 200, etaSeconds: 10 },
      { startedAt: now - 10_000 },
    );
    expect(displayRate(young, now)).toBe(100);
    expect(formatProgressLine(young, now)).toBe('bulk nightly: 1,000/3,000 rows (33.3%), 100 rows/s, ETA 20s');
  });

  it("later, the recent rate (a resumed run's earlier drives do not count in it)", () => {
    const old = run({ rowsDone: 50_000, rowsTotal: 60_000, rowsPerSecond: 812, etaSeconds: 13 }, { startedAt: now - 600_000 });
    expect(displayRate(old, now)).toBe(812);
    expect(formatProgressLine(old, now)).toContain('812 rows/s, ETA 13s');
  });

  it("a finished run: its view's rate (rows ÷ its duration, as infra/bulk gives it to the API and the manifest), not one of its own", () => {
    const done = run({ rowsDone: 9000, rowsTotal: 9000, rowsPerSecond: 1000.5 }, { status: 'succeeded', startedAt: 0, finishedAt: 5000 });
    expect(displayRate(done, now)).toBe(1000.5);
  });

  it("without a start time, the run's own rate", () => {
    expect(displayRate(run({ rowsPerSecond: 7.5 }), now)).toBe(7.5);
  });
});

describe('a run whose every row was bad', () => {
  const allBad = run(
    { rowsDone: 0, rowsTotal: 0, rowsTotalExact: true, badRows: 3 },
    {
      status: 'succeeded',
      startedAt: 0,
      finishedAt: 2000,
      badRowSamples: [{ object: 'day/a.jsonl', line: 1, message: 'missing "features"' }],
    },
  );

  it('is a failure whatever its status says', () => {
    expect(allRowsBad(allBad)).toBe(true);
    expect(endedBadly(allBad)).toBe(true);
    expect(formatSummary(allBad)).toBe(
      'bulk nightly failed: all 3 rows were bad (first: s3://in-bucket/day/a.jsonl line 1: missing "features"); nothing was written',
    );
  });

  it('reads the same when the run failed on its bad-row budget with no good row', () => {
    const failed = { ...allBad, status: 'failed' as const, error: { code: 'too_many_bad_rows', message: 'every row was bad (3)' } };
    expect(allRowsBad(failed)).toBe(true);
    expect(formatSummary(failed)).toMatch(/^bulk nightly failed: all 3 rows were bad \(first: /);
    expect(allRowsBad({ ...failed, error: { code: 'chunk_failed', message: 'x' } })).toBe(false);
  });

  it('but a run with one good row, or one still running, is not', () => {
    expect(allRowsBad({ ...allBad, progress: { ...allBad.progress, rowsDone: 1 } })).toBe(false);
    expect(allRowsBad({ ...allBad, status: 'running' })).toBe(false);
    expect(endedBadly(run({ rowsDone: 5 }, { status: 'succeeded' }))).toBe(false);
    expect(endedBadly(run({}, { status: 'canceled' }))).toBe(true);
  });
});
