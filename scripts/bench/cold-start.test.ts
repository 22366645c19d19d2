import { describe, expect, it } from 'vitest';
import { phasesFrom, stateMarkOf } from './cold-start.ts';

describe('phasesFrom', () => {
  it('splits a start into boot, download, load and warm-up from the state timestamps', () => {
    const phases = phasesFrom(1_000, [
      { state: 'launching', at: 1_400 },
      { state: 'downloading', at: 1_500 },
      { state: 'loading', at: 1_800 },
      { state: 'warming', at: 2_000 },
      { state: 'active', at: 2_600 },
    ]);
    expect(phases).toEqual({ boot: 500, download: 300, load: 200, warmup: 600, ready: 1_100 });
  });

  it('counts a worker that warmed into standby as ready then', () => {
    const phases = phasesFrom(0, [
      { state: 'downloading', at: 10 },
      { state: 'loading', at: 20 },
      { state: 'warming', at: 30 },
      { state: 'standby', at: 70 },
      { state: 'active', at: 900 },
    ]);
    expect(phases.warmup).toBe(40);
    expect(phases.ready).toBe(60);
  });

  it('leaves phases it has no marks for as NaN', () => {
    const phases = phasesFrom(0, [{ state: 'downloading', at: 10 }]);
    expect(phases.boot).toBe(10);
    expect(phases.download).toBeNaN();
    expect(phases.ready).toBeNaN();
  });
});

describe('stateMarkOf', () => {
  it("reads a state change from the worker's pino line", () => {
    const line = JSON.stringify({ level: 30, time: 1234, pid: 1, state: 'loading', previous: 'downloading', msg: 'worker state' });
    expect(stateMarkOf(line)).toEqual({ state: 'loading', at: 1234 });
  });

  it('ignores other lines, other messages and broken JSON', () => {
    expect(stateMarkOf('plain text')).toBeUndefined();
    expect(stateMarkOf(JSON.stringify({ time: 1, state: 'active', msg: 'warm-up done' }))).toBeUndefined();
    expect(stateMarkOf('{"msg": "worker state", "state"')).toBeUndefined();
  });
});
