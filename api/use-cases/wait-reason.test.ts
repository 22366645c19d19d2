import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../infra/kernel/clock.ts';
import type { FleetView, WorkerSighting } from './fleet-view.ts';
import { timeoutReason, type WaitReasonDeps, waitReason } from './wait-reason.ts';

const T0 = Date.UTC(2026, 0, 5, 9);
const job = { model: 'm', version: '1' };

function depsOf(workers: WorkerSighting[] | Error, options: { min?: number; deployed?: boolean; coldStartMs?: number } = {}) {
  const fleet: FleetView = {
    async workers() {
      if (workers instanceof Error) throw workers;
      return workers;
    },
    ...(options.coldStartMs !== undefined ? { coldStartMs: async () => options.coldStartMs } : {}),
  };
  const deployment = { model: 'm', version: '1', versions: [{ version: '1', weight: 100 }], min: options.min ?? 1, max: 2, standby: 0 };
  return {
    fleet,
    clock: new ManualClock(T0),
    jobs: { depth: async () => 4 },
    deployments: { get: async () => (options.deployed === false ? null : deployment) },
  } as unknown as WaitReasonDeps;
}

const worker = (state: WorkerSighting['state'], over: Partial<WorkerSighting> = {}): WorkerSighting => ({
  id: state,
  state,
  jobsInFlight: 0,
  ...over,
});

describe('waitReason', () => {
  it('no worker yet: a cold start from now, where one was measured', async () => {
    expect(await waitReason(depsOf([], { min: 0, coldStartMs: 42_000 }), job, 'queued')).toEqual({
      code: 'no_worker',
      message: "no worker for m@1 yet (the deployment's min is 0: the scaler is starting one); a cold start of m takes about 42.0 s",
      expectedInMs: 42_000,
    });
    expect(await waitReason(depsOf([]), job, 'queued')).toEqual({
      code: 'no_worker',
      message: 'no worker for m@1 yet (the scaler is starting one)',
    });
    // Not deployed: nobody starts one, so no estimate.
    const gone = await waitReason(depsOf([], { deployed: false, coldStartMs: 42_000 }), job, 'queued');
    expect(gone).toMatchObject({ code: 'no_worker' });
    expect(gone?.expectedInMs).toBeUndefined();
  });

  it('a worker starting: the phase of the one furthest along, how long it has been in it, what is left of a cold start (0 once overdue)', async () => {
    const workers = [
      worker('launching', { startedAt: T0 - 1_000, stateSince: T0 - 1_000 }),
      worker('loading', { startedAt: T0 - 20_000, stateSince: T0 - 3_000 }),
    ];
    expect(await waitReason(depsOf(workers, { coldStartMs: 30_000 }), job, 'queued')).toEqual({
      code: 'worker_starting',
      phase: 'loading',
      expectedInMs: 10_000,
      message: 'a worker is starting (loading the model for 3.0 s; a cold start of m takes about 30.0 s)',
    });
    const overdue = await waitReason(depsOf(workers, { coldStartMs: 5_000 }), job, 'queued');
    expect(overdue?.expectedInMs).toBe(0);
    // An older worker's heartbeat without times, and no measured cold start: the phase alone.
    expect(await waitReason(depsOf([worker('warming')]), job, 'queued')).toEqual({
      code: 'worker_starting',
      phase: 'warming',
      message: 'a worker is starting (warming up)',
    });
  });

  it('standby, busy, running; nothing for a finished job; a failed read leaves the reason out', async () => {
    expect(await waitReason(depsOf([worker('standby')]), job, 'queued')).toMatchObject({ code: 'standby' });
    expect(await waitReason(depsOf([worker('active'), worker('warming')]), job, 'queued')).toEqual({
      code: 'busy',
      message: 'workers are busy: 3 requests queued ahead',
      queued: 3,
    });
    expect(await waitReason(depsOf([]), job, 'running')).toMatchObject({ code: 'running' });
    expect(await waitReason(depsOf([]), job, 'succeeded')).toBeUndefined();
    expect(await waitReason(depsOf(new Error('redis away')), job, 'queued')).toBeUndefined();
    expect(await timeoutReason(depsOf([worker('standby')]), job, 'queued')).toBe(
      'a worker is in standby and the scaler has not activated it yet',
    );
  });
});
