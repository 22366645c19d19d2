import { describe, expect, it } from 'vitest';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import type { HeartbeatPayload } from '../../infra/fleet/worker-states.ts';
import { ManualClock } from '../../infra/kernel/clock.ts';
import { createFleetView } from './fleet-view.ts';

function beat(id: string, model: string, version: string, state: WorkerState): HeartbeatPayload {
  const memory = { rssBytes: 0, heapUsedBytes: 0 };
  return { id, model, version, state, pid: 1, host: 'h', startedAt: 0, updatedAt: 0, rowsPerS: 0, jobsInFlight: 2, memory };
}

describe('createFleetView', () => {
  it("lists a model version's live workers, leaving out other versions and those draining, stopped or failed", async () => {
    const beats = [
      beat('a', 'm', '1', 'active'),
      beat('b', 'm', '1', 'launching'),
      beat('c', 'm', '1', 'standby'),
      beat('d', 'm', '1', 'draining'),
      beat('e', 'm', '1', 'stopped'),
      beat('f', 'm', '1', 'failed'),
      beat('g', 'm', '2', 'active'),
      beat('h', 'other', '1', 'active'),
    ];
    const fleet = createFleetView(async () => beats, { clock: new ManualClock(0) });
    expect(await fleet.workers('m', '1')).toEqual([
      { id: 'a', state: 'active', jobsInFlight: 2, startedAt: 0 },
      { id: 'b', state: 'launching', jobsInFlight: 2, startedAt: 0 },
      { id: 'c', state: 'standby', jobsInFlight: 2, startedAt: 0 },
    ]);
    expect(await fleet.workers('m', '3')).toEqual([]);
  });

  it("does not take a shared pool's worker for a deployment's, even while it holds that model", async () => {
    const pooled: HeartbeatPayload = {
      ...beat('p', '', '', 'active'),
      pool: 'shared',
      models: [{ model: 'm', version: '1', state: 'active', residentBytes: 1, lastUsedAt: 0, jobsInFlight: 0 }],
    };
    const fleet = createFleetView(async () => [pooled, beat('a', 'm', '1', 'active')], { clock: new ManualClock(0) });
    expect((await fleet.workers('m', '1')).map((w) => w.id)).toEqual(['a']);
  });

  it('reads once per ttl for every caller, again after it, and again at once after a failed read', async () => {
    const clock = new ManualClock(1000);
    let reads = 0;
    let fail = false;
    const fleet = createFleetView(
      async () => {
        reads++;
        if (fail) throw new Error('redis away');
        return [beat(`w${reads}`, 'm', '1', 'active')];
      },
      { clock, ttlMs: 1000 },
    );
    await Promise.all([fleet.workers('m', '1'), fleet.workers('m', '1'), fleet.workers('m', '2')]);
    expect(reads).toBe(1);
    await clock.advance(999);
    expect((await fleet.workers('m', '1'))[0]?.id).toBe('w1');
    await clock.advance(1);
    expect((await fleet.workers('m', '1'))[0]?.id).toBe('w2');
    await clock.advance(1000);
    fail = true;
    await expect(fleet.workers('m', '1')).rejects.toThrow('redis away');
    fail = false;
    expect((await fleet.workers('m', '1'))[0]?.id).toBe('w4');
    expect(reads).toBe(4);
  });

  it('counts a clock that went backwards as expired', async () => {
    const clock = new ManualClock(5000);
    let reads = 0;
    const fleet = createFleetView(async () => [beat(`w${++reads}`, 'm', '1', 'active')], { clock });
    await fleet.workers('m', '1');
    clock.set(4000);
    await fleet.workers('m', '1');
    expect(reads).toBe(2);
  });
});
