import { describe, expect, it } from 'vitest';
import type { BulkRunView } from '../../infra/contracts/bulk.ts';
import { type BulkIo, createBulkDisplay } from './bulk-display.ts';

function fakeIo(isTTY: boolean) {
  let now = 0;
  const written: string[] = [];
  const io: BulkIo = {
    out: (text) => written.push(text),
    err: (text) => written.push(text),
    isTTY,
    columns: () => 80,
    now: () => now,
    onInterrupt: () => () => undefined,
  };
  return { io, written, advance: (ms: number) => (now += ms) };
}

function view(rowsDone: number, status: BulkRunView['status'] = 'running'): BulkRunView {
  return {
    id: 'r1',
    tenant: 't',
    model: 'm',
    version: '1',
    status,
    input: 's3://b/in/',
    output: 's3://b/out/',
    chunkRows: 10,
    priority: 'bulk',
    progress: { rowsDone, rowsTotal: 100, rowsTotalExact: true, chunksDone: rowsDone / 10, badRows: 0, rowsPerSecond: 10 },
    badRowSamples: [],
    createdAt: 0,
  };
}

/** The escape sequence that clears the terminal line before a redraw. */
const CLEAR = '\r\x1b[2K';
const startsWithBar = (text: string | undefined, rest: RegExp) => text?.startsWith(`${CLEAR}[`) === true && rest.test(text);

describe('createBulkDisplay', () => {
  it('not a terminal: a line at once, then one per interval, and always the final state', () => {
    const { io, written, advance } = fakeIo(false);
    const display = createBulkDisplay(io, { lineIntervalMs: 5_000 });
    display.update(view(10));
    advance(1_000);
    display.update(view(20)); // within the interval
    advance(4_000);
    display.update(view(30));
    advance(10);
    display.update(view(100, 'succeeded'));
    display.close();
    expect(written).toEqual([
      'bulk r1: 10/100 rows (10.0%), 10.0 rows/s, ETA ?\n',
      'bulk r1: 30/100 rows (30.0%), 10.0 rows/s, ETA ?\n',
      'bulk r1: 100/100 rows (100.0%), 10.0 rows/s\n',
    ]);
  });

  it('a terminal: the bar is redrawn in place, notes get their own line, close ends the line', () => {
    const { io, written, advance } = fakeIo(true);
    const display = createBulkDisplay(io, { redrawMs: 100 });
    display.update(view(10));
    display.update(view(20)); // too soon to redraw
    advance(100);
    display.update(view(30));
    display.note('watching');
    display.update(view(100, 'succeeded')); // the end is drawn whatever the time
    display.close();
    display.close();
    expect(written).toHaveLength(6);
    expect(startsWithBar(written[0], / 10\/100 rows/)).toBe(true);
    expect(startsWithBar(written[1], / 30\/100 rows/)).toBe(true);
    expect(written.slice(2, 4)).toEqual([CLEAR, 'watching\n']);
    expect(startsWithBar(written[4], /\[█+\] 100\.0% 100\/100 rows/)).toBe(true);
    expect(written[5]).toBe('\n');
  });

  it('a log line clears the bar and goes to stderr on a line of its own; the bar comes back at the next update', () => {
    const { io, written, advance } = fakeIo(true);
    const errors: string[] = [];
    const display = createBulkDisplay({ ...io, err: (text) => errors.push(text) }, { redrawMs: 100 });
    display.update(view(10));
    display.log('warning: bulk lease renewal failed (runId t/r1, err connect ECONNREFUSED)');
    advance(100);
    display.update(view(20));
    expect(written.length).toBe(3);
    expect(written[1]).toBe(CLEAR);
    expect(errors).toEqual(['warning: bulk lease renewal failed (runId t/r1, err connect ECONNREFUSED)\n']);
    expect(startsWithBar(written[2], / 20\/100 rows/)).toBe(true);
  });

  it('a failed run ends on where it stopped, not on a share done', () => {
    const { io, written } = fakeIo(false);
    const display = createBulkDisplay(io);
    display.update(view(90));
    display.update({ ...view(90, 'failed'), error: { code: 'chunk_failed', message: 'x' } });
    expect(written).toEqual(['bulk r1: 90/100 rows (90.0%), 10.0 rows/s, ETA ?\n', 'bulk r1: failed at 90 of 100 rows\n']);
  });
});
