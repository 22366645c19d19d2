import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { flushMicrotasks, ManualClock } from './clock.ts';
import { closeAll, DRAIN_LIMIT_MS, ECHO_WINDOW_MS, exitCodeFor, once, onShutdownSignals } from './lifecycle.ts';

/** Stands in for `process`: signals are plain events, exit() only records its code. */
class FakeProcess extends EventEmitter {
  readonly exits: number[] = [];
  exit(code?: number): void {
    this.exits.push(code ?? 0);
  }
  // Process's `on`/`off` overloads and `exit(): never` do not match EventEmitter's types,
  // though the behaviour onShutdownSignals relies on is the same.
  asProcess(): Pick<NodeJS.Process, 'on' | 'off' | 'exit'> {
    return this as unknown as Pick<NodeJS.Process, 'on' | 'off' | 'exit'>;
  }
}

/** Handlers that record their calls; drain settles when the test says. */
function recorder() {
  const drains: string[] = [];
  const forces: string[] = [];
  let finishDrain: () => void = () => {};
  let failDrain: (err: Error) => void = () => {};
  return {
    drains,
    forces,
    finishDrain: () => finishDrain(),
    failDrain: (err: Error) => failDrain(err),
    handlers: {
      drain: (signal: string) => {
        drains.push(signal);
        return new Promise<void>((resolve, reject) => {
          finishDrain = resolve;
          failDrain = reject;
        });
      },
      force: (signal: string, reason: string) => void forces.push(`${signal}:${reason}`),
    },
  };
}

describe('onShutdownSignals', () => {
  it('drains on the first signal and forces when it comes again', async () => {
    const proc = new FakeProcess();
    const clock = new ManualClock();
    const r = recorder();
    onShutdownSignals(r.handlers, { processLike: proc.asProcess(), clock });
    proc.emit('SIGINT', 'SIGINT');
    await flushMicrotasks();
    expect(r.drains).toEqual(['SIGINT']);
    expect(r.forces).toEqual([]);
    expect(proc.exits).toEqual([]);

    await clock.advance(ECHO_WINDOW_MS);
    proc.emit('SIGINT', 'SIGINT');
    expect(r.forces).toEqual(['SIGINT:signal']);
    expect(proc.exits).toEqual([exitCodeFor('SIGINT')]);
    proc.emit('SIGINT', 'SIGINT'); // a third signal changes nothing
    expect(r.forces).toHaveLength(1);
    expect(r.drains).toHaveLength(1);
  });

  it('never forces on SIGTERM again: supervisors may each send one, late (the drain bound ends a drain that hangs)', async () => {
    const proc = new FakeProcess();
    const clock = new ManualClock();
    const r = recorder();
    onShutdownSignals(r.handlers, { processLike: proc.asProcess(), clock, forceAfterMs: 10_000 });
    proc.emit('SIGTERM', 'SIGTERM');
    await clock.advance(2_000);
    proc.emit('SIGTERM', 'SIGTERM'); // the second supervisor's, well after the echo window
    expect(r.forces).toEqual([]);
    await clock.advance(8_000);
    expect(r.forces).toEqual(['SIGTERM:timeout']);
  });

  it('ignores echoes of the first signal: another signal, or the same one at once', async () => {
    // One Ctrl-C under `npm start`: SIGINT from the terminal, SIGINT again from npm, SIGTERM
    // from the supervisor that started this process.
    const proc = new FakeProcess();
    const clock = new ManualClock();
    const r = recorder();
    onShutdownSignals(r.handlers, { processLike: proc.asProcess(), clock });
    proc.emit('SIGINT', 'SIGINT');
    await clock.advance(ECHO_WINDOW_MS - 1);
    proc.emit('SIGINT', 'SIGINT');
    await clock.advance(5_000);
    proc.emit('SIGTERM', 'SIGTERM');
    expect(r.drains).toEqual(['SIGINT']);
    expect(r.forces).toEqual([]);
    expect(proc.exits).toEqual([]);
    r.finishDrain();
    await flushMicrotasks();
    proc.emit('SIGTERM', 'SIGTERM'); // drained: any signal now ends the process at once, as a clean exit
    expect(r.forces).toEqual([]);
    expect(proc.exits).toEqual([0]);
  });

  it('bounds every drain by DRAIN_LIMIT_MS unless told otherwise; 0 = never', async () => {
    const proc = new FakeProcess();
    const clock = new ManualClock();
    const r = recorder();
    onShutdownSignals(r.handlers, { processLike: proc.asProcess(), clock });
    proc.emit('SIGTERM', 'SIGTERM');
    await clock.advance(DRAIN_LIMIT_MS - 1);
    expect(r.forces).toEqual([]);
    await clock.advance(1);
    expect(r.forces).toEqual(['SIGTERM:timeout']);
    expect(proc.exits).toEqual([143]);

    const unbounded = new FakeProcess();
    const r2 = recorder();
    onShutdownSignals(r2.handlers, { processLike: unbounded.asProcess(), clock, forceAfterMs: 0 });
    unbounded.emit('SIGTERM', 'SIGTERM');
    await flushMicrotasks();
    expect(clock.pending).toBe(0);
    await clock.advance(10 * DRAIN_LIMIT_MS);
    expect(r2.forces).toEqual([]);
  });

  it('forces when drain outlasts forceAfterMs, and not before', async () => {
    const proc = new FakeProcess();
    const clock = new ManualClock();
    const r = recorder();
    onShutdownSignals(r.handlers, { processLike: proc.asProcess(), clock, forceAfterMs: 5000 });
    proc.emit('SIGTERM', 'SIGTERM');
    await clock.advance(4999);
    expect(r.forces).toEqual([]);
    await clock.advance(1);
    expect(r.forces).toEqual(['SIGTERM:timeout']);
    expect(proc.exits).toEqual([143]);
  });

  it('cancels the force timer once drain finishes; a later signal ends the process with 0 (its drain is done)', async () => {
    const proc = new FakeProcess();
    const clock = new ManualClock();
    const r = recorder();
    onShutdownSignals(r.handlers, { processLike: proc.asProcess(), clock, forceAfterMs: 100 });
    proc.emit('SIGINT', 'SIGINT');
    await flushMicrotasks();
    expect(clock.pending).toBe(1);
    r.finishDrain();
    await flushMicrotasks();
    expect(clock.pending).toBe(0);
    await clock.advance(1000);
    expect(r.forces).toEqual([]);
    proc.emit('SIGTERM', 'SIGTERM');
    expect(r.forces).toEqual([]);
    expect(proc.exits).toEqual([0]);
  });

  it('forces when drain fails, even when drain throws synchronously', async () => {
    const proc = new FakeProcess();
    const clock = new ManualClock();
    const r = recorder();
    onShutdownSignals(r.handlers, { processLike: proc.asProcess(), clock });
    proc.emit('SIGTERM', 'SIGTERM');
    await flushMicrotasks();
    r.failDrain(new Error('redis gone'));
    await flushMicrotasks();
    expect(r.forces).toEqual(['SIGTERM:drain-failed']);

    const proc2 = new FakeProcess();
    const forces: string[] = [];
    const drain = (): Promise<void> => {
      throw new Error('sync');
    };
    onShutdownSignals({ drain, force: (s) => void forces.push(s) }, { processLike: proc2.asProcess(), clock });
    proc2.emit('SIGINT', 'SIGINT');
    await flushMicrotasks();
    expect(forces).toEqual(['SIGINT']);
    expect(proc2.exits).toEqual([130]);
  });

  it('exits even when force throws', async () => {
    const proc = new FakeProcess();
    const clock = new ManualClock();
    onShutdownSignals(
      {
        drain: () => new Promise(() => {}),
        force: () => {
          throw new Error('boom');
        },
      },
      { processLike: proc.asProcess(), clock },
    );
    proc.emit('SIGINT', 'SIGINT');
    await clock.advance(ECHO_WINDOW_MS);
    proc.emit('SIGINT', 'SIGINT');
    expect(proc.exits).toEqual([130]);
  });

  it('listens only to the signals asked for, and unsubscribes cleanly', async () => {
    const proc = new FakeProcess();
    const clock = new ManualClock();
    const r = recorder();
    const off = onShutdownSignals(r.handlers, {
      processLike: proc.asProcess(),
      signals: ['SIGHUP'],
      clock,
      forceAfterMs: 10,
    });
    expect(proc.listenerCount('SIGHUP')).toBe(1);
    expect(proc.listenerCount('SIGINT')).toBe(0);
    proc.emit('SIGHUP', 'SIGHUP');
    off();
    expect(proc.listenerCount('SIGHUP')).toBe(0);
    await clock.advance(100);
    expect(r.forces).toEqual([]);
    expect(proc.exits).toEqual([]);
  });

  it('uses the shell convention for exit codes', () => {
    expect(exitCodeFor('SIGINT')).toBe(130);
    expect(exitCodeFor('SIGTERM')).toBe(143);
    expect(exitCodeFor('NOPE')).toBe(1);
  });
});

describe('closeAll', () => {
  it('runs every closer in order even when some fail, then names the failures', async () => {
    const ran: string[] = [];
    const boom = new Error('boom');
    const error = await closeAll([
      ['http', () => void ran.push('http')],
      [
        'queue',
        async () => {
          ran.push('queue');
          throw boom;
        },
      ],
      [
        'redis',
        () => {
          ran.push('redis');
          throw new Error('sync');
        },
      ],
      ['s3', async () => void ran.push('s3')],
    ]).catch((err: unknown) => err);
    expect(ran).toEqual(['http', 'queue', 'redis', 's3']);
    expect(error).toBeInstanceOf(AggregateError);
    expect((error as AggregateError).message).toBe('failed to close: queue, redis');
    expect((error as AggregateError).errors).toEqual([boom, new Error('sync')]);
  });

  it('waits for each closer before starting the next', async () => {
    const ran: string[] = [];
    let release: () => void = () => {};
    const done = closeAll([
      ['slow', () => new Promise<void>((resolve) => (release = resolve)).then(() => void ran.push('slow'))],
      ['next', () => void ran.push('next')],
    ]);
    await flushMicrotasks();
    expect(ran).toEqual([]);
    release();
    await done;
    expect(ran).toEqual(['slow', 'next']);
  });

  it('resolves when nothing fails', async () => {
    await expect(closeAll([])).resolves.toBeUndefined();
    await expect(closeAll([['a', () => {}]])).resolves.toBeUndefined();
  });
});

describe('once', () => {
  it('starts the function once and hands every caller the same promise', async () => {
    let calls = 0;
    const close = once(async () => ++calls);
    const first = close();
    expect(calls).toBe(1); // started synchronously
    expect(close()).toBe(first);
    await expect(first).resolves.toBe(1);
    await expect(close()).resolves.toBe(1);
    expect(calls).toBe(1);
  });

  it('memoises failures, synchronous ones included', async () => {
    let calls = 0;
    const close = once((): Promise<void> => {
      calls++;
      throw new Error('nope');
    });
    await expect(close()).rejects.toThrow('nope');
    await expect(close()).rejects.toThrow('nope');
    expect(calls).toBe(1);
  });
});
