import { describe, expect, it } from 'vitest';
import { ManualClock } from '../infra/kernel/clock.ts';
import { IntegrityError, NotFoundError } from '../infra/kernel/errors.ts';
import { withStartBackoff } from './start-backoff.ts';

/** A step that fails with `errors` in turn, then succeeds with 'ok'. */
function failing(errors: Error[]) {
  let calls = 0;
  const step = async () => {
    calls++;
    const err = errors.shift();
    if (err) throw err;
    return 'ok';
  };
  return { step, calls: () => calls };
}

const refused = () => Object.assign(new Error('S3 get failed: connect ECONNREFUSED'), { code: 'ECONNREFUSED' });

describe('withStartBackoff', () => {
  it('retries a transient failure with growing, capped delays until it succeeds', async () => {
    const clock = new ManualClock();
    const delays: number[] = [];
    const { step, calls } = failing([refused(), refused(), refused(), refused()]);
    const run = withStartBackoff(step, {
      clock,
      signal: new AbortController().signal,
      initialDelayMs: 100,
      maxDelayMs: 300,
      random: () => 1,
      onRetry: (e) => delays.push(e.delayMs),
    });
    for (let i = 0; i < 10 && calls() < 5; i++) await clock.advance(1_000);
    await expect(run).resolves.toBe('ok');
    expect(delays).toEqual([100, 200, 300, 300]);
  });

  it('fails at once on a decision (unknown model), without waiting', async () => {
    const clock = new ManualClock();
    const { step, calls } = failing([new NotFoundError('model_not_found', 'no model x')]);
    const onRetry = () => expect.unreachable('no retry for a missing model');
    await expect(withStartBackoff(step, { clock, signal: new AbortController().signal, onRetry })).rejects.toThrow('no model x');
    expect(calls()).toBe(1);
  });

  it('gives mismatched bytes a few attempts (a cut transfer), then fails', async () => {
    const clock = new ManualClock();
    const mismatch = () => new IntegrityError('checksum_mismatch', 'sha256 differs');
    const { step, calls } = failing([mismatch(), mismatch(), mismatch(), mismatch()]);
    const run = withStartBackoff(step, { clock, signal: new AbortController().signal, integrityAttempts: 3, onRetry: () => undefined });
    run.catch(() => undefined);
    for (let i = 0; i < 10; i++) await clock.advance(60_000);
    await expect(run).rejects.toThrow('sha256 differs');
    expect(calls()).toBe(3);
  });

  it('stops waiting when the signal aborts (the worker drains), with the last error', async () => {
    const clock = new ManualClock();
    const stop = new AbortController();
    const { step } = failing([refused(), refused()]);
    const run = withStartBackoff(step, { clock, signal: stop.signal, onRetry: () => undefined });
    run.catch(() => undefined);
    await clock.advance(0);
    expect(clock.pending).toBe(1);
    stop.abort();
    await expect(run).rejects.toThrow('ECONNREFUSED');
  });
});
