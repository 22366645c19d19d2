/**
 * The self-tuning policy in a replay: a short replay (four hours of
 * steady synthetic traffic, two of them replayed) run twice to show it is deterministic and
 * walk-forward.
 */
import { describe, expect, it } from 'vitest';
import type { PolicySettings } from '../contracts/pool.ts';
import { seededRandom } from '../kernel/seeded-random.ts';
import type { PolicyContext } from './policies.ts';
import { selfTuningPolicy } from './self-tuning.ts';
import { linearService } from './service.ts';
import { MINUTE_MS, simulate, type WorldOptions } from './world.ts';

const T0 = Date.UTC(2024, 0, 8, 0, 0);

describe('selfTuningPolicy', () => {
  const SETTINGS: PolicySettings = {
    min: 1,
    max: 20,
    standby: 1,
    sloQueueWaitMs: 10_000,
    coldStartMs: 60_000,
    scaleDownStabilizationMs: 10 * MINUTE_MS,
    targetUtilization: 0.8,
  };
  const WORKER_RATE = 2;
  const MAX_BATCH = 8;
  const TICK_MS = 15_000;
  const random = seededRandom(7);
  const counts = Array.from({ length: 240 }, () => 300 + Math.round((random() - 0.5) * 20));
  const serviceMs = linearService(WORKER_RATE, MAX_BATCH);
  const ctx: PolicyContext = {
    series: { startMs: T0, perMinute: counts },
    missing: new Array(counts.length).fill(false),
    workerRate: WORKER_RATE,
    batchMs: serviceMs(MAX_BATCH),
    maxBatch: MAX_BATCH,
    tickMs: TICK_MS,
    fromMinute: 120,
  };
  const world: WorldOptions = {
    counts,
    startMs: T0,
    fromMinute: 120,
    toMinute: 240,
    pattern: { kind: 'poisson' },
    seed: 1,
    coldStartMs: 60_000,
    activateMs: 1_000,
    maxBatch: MAX_BATCH,
    serviceMs,
    tickMs: TICK_MS,
    sloMs: SETTINGS.sloQueueWaitMs,
  };
  const options = { retuneIntervalMs: 30 * MINUTE_MS, sloTarget: 0.99, seed: 1 };

  function replay() {
    const policy = selfTuningPolicy(ctx, SETTINGS, options);
    const run = simulate(policy, world);
    return { run, choices: policy.choices() };
  }

  it('retunes walk-forward, every interval, starting from the base predictive candidate', () => {
    const { choices } = replay();
    // Two hours replayed, a one-hour window, a retune every 30 minutes: four.
    expect(choices.map((c) => (c.at - T0) / MINUTE_MS)).toEqual([120, 150, 180, 210]);
    expect(choices[0]?.previous).toBe('predictive');
    for (const c of choices) {
      expect(c.toMs).toBeLessThanOrEqual(c.at);
      expect(c.toMs - c.fromMs).toBe(60 * MINUTE_MS);
    }
    // Each retune starts from what the one before adopted.
    for (let i = 1; i < choices.length; i++) expect(choices[i]?.previous).toBe(choices[i - 1]?.chosen.name);
  });

  it('the same inputs give the same choices and the same run', () => {
    const a = replay();
    const b = replay();
    expect(a.choices).toHaveLength(4);
    expect(b.choices).toEqual(a.choices);
    expect(b.run.workerSeconds).toEqual(a.run.workerSeconds);
    expect(b.run.sloAttainment).toBe(a.run.sloAttainment);
  });
});
