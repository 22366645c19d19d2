// A worker's life on a manual clock, its heartbeat written to a fake `set`: the beat's fields in the
// worker's order, a beat on every change and none on a move the table refuses, the rows-per-second
// meter, a failed start-up (and one a drain cut short), a dead engine, and an idempotent close().
import { expect, it } from 'vitest';
import type { WorkerState } from '../infra/contracts/worker-state.ts';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { flushMicrotasks, ManualClock } from '../infra/kernel/clock.ts';
import type { Log } from '../infra/kernel/log.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import { workerKey } from '../infra/redis/keys.ts';
import { WorkerLife } from './worker-life.ts';

const config = { queuePrefix: 'wl', worker: { heartbeatIntervalMs: 1_000, heartbeatTtlMs: 5_000 } };

function lifeOnAManualClock() {
  const clock = new ManualClock(10_000);
  const beats: HeartbeatPayload[] = [];
  const keys = new Set<string>();
  const redis = {
    set: async (key: string, value: string) => {
      keys.add(key);
      beats.push(JSON.parse(value) as HeartbeatPayload);
      return 'OK';
    },
  } as unknown as Pick<RedisClient, 'set'>;
  const lines: Array<{ level: string; msg: string; obj: object }> = [];
  const at =
    (level: string) =>
    (obj: object | string, msg?: string): void => {
      lines.push(typeof obj === 'string' ? { level, msg: obj, obj: {} } : { level, msg: msg ?? '', obj });
    };
  const log: Log = { error: at('error'), warn: at('warn'), info: at('info'), debug: at('debug'), child: () => log };
  const changes: Array<[WorkerState, WorkerState]> = [];
  const life = new WorkerLife(
    { config, redis, clock, log },
    {
      id: 'w-1',
      sample: (fields) => ({ id: 'w-1', model: 'm', version: '1', ...fields, jobsInFlight: 2 }),
      onBeat: async () => undefined,
      onChange: (state, previous) => changes.push([state, previous]),
    },
  );
  return { clock, life, beats, keys, lines, changes };
}

it('beats at start, on every change and at each interval, its fields among the worker’s own', async () => {
  const { clock, life, beats, keys, lines, changes } = lifeOnAManualClock();
  await life.start(async () => undefined);
  await flushMicrotasks(); // the first beat written, the heartbeat asleep until the interval
  expect(keys).toEqual(new Set([workerKey('wl', 'w-1')]));
  expect(beats).toHaveLength(1);
  expect(Object.keys(beats[0] ?? {})).toEqual([
    'id',
    'model',
    'version',
    'state',
    'startedAt',
    'stateSince',
    'rowsPerS',
    'jobsInFlight',
    'pid',
    'host',
    'updatedAt',
    'memory',
  ]);
  expect(beats[0]).toMatchObject({ state: 'launching', startedAt: 10_000, stateSince: 10_000, rowsPerS: 0, jobsInFlight: 2 });

  // 30 rows in the half second before the change: 60 rows/s, and the meter starts again.
  life.countRows(30);
  clock.set(10_500);
  life.enter('standby');
  expect(beats[1]).toMatchObject({ state: 'standby', startedAt: 10_000, stateSince: 10_500, rowsPerS: 60, updatedAt: 10_500 });
  expect(changes).toEqual([['standby', 'launching']]);
  expect(lines).toContainEqual({ level: 'info', msg: 'worker state', obj: { state: 'standby', previous: 'launching' } });

  // The interval's beat: 7 rows over the 0.5 s since the last beat, rounded to a tenth.
  life.countRows(7);
  await clock.advance(500);
  expect(beats).toHaveLength(3);
  expect(beats[2]).toMatchObject({ state: 'standby', stateSince: 10_500, rowsPerS: 14, updatedAt: 11_000 });
  await life.close();
});

it('ignores a move the table refuses, and one to the state it is in: no log, no event, no beat', async () => {
  const { life, beats, lines, changes } = lifeOnAManualClock();
  await life.start(async () => undefined);
  life.enter('active'); // launching → active is not a move
  life.enter('launching');
  expect(life.state).toBe('launching');
  expect(beats).toHaveLength(1);
  expect(changes).toEqual([]);
  expect(lines.filter((l) => l.msg === 'worker state')).toEqual([]);
  await life.close();
});

it('a failed start-up reports failed with its message in a beat, then rethrows', async () => {
  const { life, beats } = lifeOnAManualClock();
  const boom = new Error('registry said no');
  await expect(life.start(() => Promise.reject(boom))).rejects.toBe(boom);
  expect(life.state).toBe('failed');
  expect(life.error).toBe('registry said no');
  // The change's own beat, and the one awaited before the error goes on.
  expect(beats.slice(1).map((b) => [b.state, b.error])).toEqual([
    ['failed', 'registry said no'],
    ['failed', 'registry said no'],
  ]);
  await life.close();
  // Draining is no move from failed: it stays failed until stopped.
  expect(beats.slice(3).map((b) => b.state)).toEqual(['stopped', 'stopped']);
});

it('a start-up that fails once close() has begun is no failure', async () => {
  const { life, beats } = lifeOnAManualClock();
  let fail: (err: Error) => void = () => undefined;
  const started = life.start(() => new Promise<void>((_, reject) => (fail = reject)));
  const closed = life.close();
  fail(new Error('engine closed under the load'));
  await expect(started).resolves.toBeUndefined();
  await closed;
  expect(life.state).toBe('stopped');
  expect(beats.some((b) => b.state === 'failed' || b.error !== undefined)).toBe(false);
});

it('a dead engine fails the worker and rejects engineLost; a drain request resolves drainRequested', async () => {
  const { life, beats } = lifeOnAManualClock();
  await life.start(async () => undefined);
  life.enter('standby');
  life.requestDrain();
  await expect(life.drainRequested).resolves.toBeUndefined();
  life.engineDied('inference engine lost: thread exited', 'thread exited');
  await expect(life.engineLost).rejects.toThrow('thread exited');
  expect(life.state).toBe('failed');
  expect(beats.at(-1)).toMatchObject({ state: 'failed', error: 'inference engine lost: thread exited' });
  await life.close();
});

it('close() drains through every step, a failing one logged, then stopped and a last beat; twice is once', async () => {
  const { life, beats, lines, changes } = lifeOnAManualClock();
  await life.start(async () => undefined);
  life.enter('standby');
  const ran: string[] = [];
  const steps: Array<[string, () => Promise<unknown>]> = [
    ['first', async () => ran.push('first')],
    ['broken', () => Promise.reject(new Error('would not close'))],
    ['last', async () => ran.push('last')],
  ];
  const first = life.close(steps);
  const second = life.close(steps);
  expect(second).toBe(first);
  await first;
  await flushMicrotasks();
  expect(ran).toEqual(['first', 'last']);
  expect(lines).toContainEqual({ level: 'warn', msg: 'drain step failed', obj: { err: new Error('would not close'), step: 'broken' } });
  expect(changes.map(([state]) => state)).toEqual(['standby', 'draining', 'stopped']);
  // The change to stopped beats, and so does the heartbeat's close.
  expect(beats.slice(-2).map((b) => b.state)).toEqual(['stopped', 'stopped']);
  const count = beats.length;
  await life.close();
  expect(beats).toHaveLength(count);
});
