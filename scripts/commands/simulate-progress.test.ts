import { describe, expect, it } from 'vitest';
import { createProgress, etaSeconds, formatProgress, type ProgressIo, withProgress } from './simulate-progress.ts';

const CLEAR = '\r\x1b[2K';

function fakeIo(isTTY: boolean, columns = 120) {
  let now = 1_000;
  const written: string[] = [];
  const io: ProgressIo = { write: (t) => written.push(t), isTTY, columns: () => columns, now: () => now };
  return { io, written, advance: (ms: number) => (now += ms) };
}

describe('etaSeconds', () => {
  it('is unknown before the first replay ends, then the pace so far times what is left', () => {
    expect(etaSeconds({ done: 0, planned: 40, elapsedMs: 5_000 })).toBeUndefined();
    expect(etaSeconds({ done: 10, planned: 40, elapsedMs: 20_000 })).toBe(60);
    // A plan given back below what is done leaves nothing to wait for.
    expect(etaSeconds({ done: 12, planned: 10, elapsedMs: 20_000 })).toBe(0);
  });
});

describe('formatProgress', () => {
  it('says done of planned, the share, the time taken and the ETA', () => {
    expect(formatProgress('replays', { done: 17, planned: 40, elapsedMs: 65_000 })).toBe('simulate: 17/40 replays (42%), 1m05s, ETA 1m28s');
    expect(formatProgress('cells', { done: 0, planned: 72, elapsedMs: 3_000 })).toBe('simulate: 0/72 cells (0%), 3s, ETA ?');
    expect(formatProgress('worlds', { done: 1200, planned: 2000, elapsedMs: 7_200_000 })).toBe(
      'simulate: 1,200/2,000 worlds (60%), 2h00m, ETA 1h20m',
    );
  });

  it('never shows more done than planned', () => {
    expect(formatProgress('replays', { done: 5, planned: 4, elapsedMs: 1_000 })).toBe('simulate: 5/5 replays (100%), 1s, ETA 0s');
  });
});

describe('createProgress on a terminal', () => {
  it('redraws one line in place as replays end, at most every redrawMs, and clears it at the end', () => {
    const { io, written, advance } = fakeIo(true);
    const p = createProgress(io, 'replays', { redrawMs: 250 });
    p.plan(40);
    expect(written).toEqual([`${CLEAR}simulate: 0/40 replays (0%), 0s, ETA ?`]);
    advance(100);
    p.done();
    expect(written).toHaveLength(1);
    advance(9_900);
    p.done();
    expect(written.at(-1)).toBe(`${CLEAR}simulate: 2/40 replays (5%), 10s, ETA 3m10s`);
    // A search that ended early gives back what it did not use: the plan and the ETA shrink.
    advance(250);
    p.plan(-10);
    expect(written.at(-1)).toBe(`${CLEAR}simulate: 2/30 replays (6%), 10s, ETA 2m24s`);
    // The last one is drawn however soon it comes.
    advance(250);
    p.done();
    const drawn = written.length;
    advance(10);
    p.done(27);
    expect(written).toHaveLength(drawn + 1);
    expect(written.at(-1)).toBe(`${CLEAR}simulate: 30/30 replays (100%), 11s, ETA 0s`);
    p.close();
    expect(written.at(-1)).toBe(CLEAR);
    p.close();
    expect(written.at(-2)).not.toBe(CLEAR);
  });

  it('prints the run’s own lines above the progress line', () => {
    const { io, written, advance } = fakeIo(true);
    const p = createProgress(io, 'cells');
    p.plan(2);
    advance(5_000);
    p.note('[1/2] nasa cold start 30 s, SLO 5 s, short-batched: meets every target\n');
    p.done();
    expect(written.slice(1)).toEqual([
      CLEAR,
      '[1/2] nasa cold start 30 s, SLO 5 s, short-batched: meets every target\n',
      `${CLEAR}simulate: 0/2 cells (0%), 5s, ETA ?`,
    ]);
  });

  it('cuts the line to the terminal’s width', () => {
    const { io, written } = fakeIo(true, 30);
    createProgress(io, 'replays').plan(40);
    expect(written[0]).toBe(`${CLEAR}simulate: 0/40 replays (0%),…`);
  });
});

describe('off a terminal', () => {
  it('draws nothing, and passes the run’s own lines through unchanged', () => {
    const { io, written, advance } = fakeIo(false);
    const p = createProgress(io, 'cells');
    p.plan(3);
    advance(60_000);
    p.done();
    p.note('[1/3] a line of the run\n');
    p.done(2);
    p.close();
    expect(written).toEqual(['[1/3] a line of the run\n']);
  });

  it('withProgress writes nothing to a stderr that is not a terminal', async () => {
    const err: string[] = [];
    const result = await withProgress({ out: () => undefined, err: (t) => err.push(t), errIsTTY: false }, 'replays', 4, async (p) => {
      p.done(4);
      return 'report';
    });
    expect(result).toBe('report');
    expect(err).toEqual([]);
  });

  it('withProgress on a terminal clears its line even when the work fails', async () => {
    const err: string[] = [];
    const work = withProgress({ out: () => undefined, err: (t) => err.push(t), errIsTTY: true }, 'replays', 4, async () => {
      throw new Error('replay thread exited');
    });
    await expect(work).rejects.toThrow('replay thread exited');
    expect(err.at(0)).toBe(`${CLEAR}simulate: 0/4 replays (0%), 0s, ETA ?`);
    expect(err.at(-1)).toBe(CLEAR);
  });
});
