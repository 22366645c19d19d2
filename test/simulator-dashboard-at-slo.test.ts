/**
 * The dashboard's simulator view compares costs at equal SLO attainment (issue 17): over HTTP on
 * the real API (real Redis, S3), a deployment's recorded arrivals are replayed through the
 * predictive policy and beside it each baseline as-is and at the cheapest setting that meets the
 * SLO target, with both runs' cost ÷ each. The oracle meets the target.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SimulationView } from '../api/use-cases/simulate-deployment.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { testEnv } from './support/services.ts';

const KEY = 'key-bbbbbbbbbbbbbbbb';
const MINUTE = 60_000;
const config = loadConfig(testEnv());
const redis = createRedis(config.redisUrl);
const clock = new ManualClock(Math.floor(Date.now() / MINUTE) * MINUTE + 30_000);
let api: TestApi;

beforeAll(async () => {
  await createDeploymentStore(redis, config.queuePrefix).put({ model: 'slo', version: '1', min: 1, max: 4, standby: 0 });
  api = await startTestApi(config, { clock });
});

afterAll(async () => {
  await api?.close();
  for await (const keys of scanKeys(redis, `${config.queuePrefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

describe('GET /v1/deployments/:model/simulation: baselines at the SLO target', () => {
  it('gives each baseline as-is and at the target, the oracle meeting it, and the runs’ cost ÷ each', async () => {
    const history = createArrivalHistory(redis, config.queuePrefix, clock);
    const to = Math.floor(clock.now() / MINUTE) * MINUTE;
    // Thirty minutes of a ramp, with the world's assumed worker (nothing measured).
    for (let m = 1; m <= 30; m++) await history.recordArrival('slo', 200 * (1 + (m % 10)), to - m * MINUTE);
    const res = await api.call('/v1/deployments/slo/simulation?minutes=30', { key: KEY });
    expect(res.status).toBe(200);
    const sim = (await res.json()) as SimulationView;
    expect(sim.atSlo.error).toBeNull();
    expect(sim.atSlo.target).toBe(0.99);
    expect(sim.atSlo.baselines.map((b) => b.name)).toEqual(['static-peak', 'reactive', 'oracle']);
    const oracle = sim.atSlo.baselines.find((b) => b.name === 'oracle');
    expect(oracle?.atSlo.met).toBe(true);
    expect(oracle?.atSlo.sloAttainment).toBeGreaterThanOrEqual(0.99);
    const chosen = sim.runs.find((r) => r.name === 'chosen');
    for (const b of sim.atSlo.baselines) {
      if (!b.atSlo.met) {
        expect(b.atSlo.cost).toBeNull();
        expect(b.ratio.chosen.atSlo).toBeNull();
        continue;
      }
      expect(b.atSlo.sloAttainment).toBeGreaterThanOrEqual(0.99);
      expect(b.ratio.chosen.atSlo).toBeCloseTo((chosen?.cost ?? 0) / (b.atSlo.cost ?? 1), 2);
      expect(b.ratio.chosen.asIs).toBeCloseTo((chosen?.cost ?? 0) / b.asIs.cost, 2);
    }
    // A fixed fleet at the target holds no more workers than one sized for the peak minute.
    const fixed = sim.atSlo.baselines.find((b) => b.name === 'static-peak');
    expect(fixed?.atSlo.value).toBeLessThanOrEqual(fixed?.asIs.value ?? 0);
  }, 60_000);
});
