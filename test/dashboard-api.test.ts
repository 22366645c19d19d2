/**
 * The dashboard's routes over HTTP on the real API (real Redis, S3), with the clock held still:
 * the page and its assets (open, cached by content hash), the session route, the chart series
 * built from recorded arrivals and decisions, and the simulator view on recorded arrivals,
 * with its bounds.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Histogram, PoolSample } from '../api/insights/series.ts';
import { ASSUMED_ROWS_PER_SEC } from '../api/insights/world-model.ts';
import { MAX_REPLAY_ROWS, type SimulationView } from '../api/use-cases/simulate-deployment.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { dashboardKey, scalerWorkerRateKey, workerKey } from '../infra/redis/keys.ts';
import { createDecisionLog, type DecisionRecord } from '../infra/scaler/decision-log.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { testEnv } from './support/services.ts';

const KEY_ADMIN = 'key-aaaaaaaaaaaaaaaa'; // tenant-a, in ADMIN_TENANTS (testEnv)
const KEY_OTHER = 'key-bbbbbbbbbbbbbbbb';
const MINUTE = 60_000;
const config = loadConfig(testEnv());
const redis = createRedis(config.redisUrl);
// Still, in the middle of a minute, near the real time (stream ids are Redis's clock).
const clock = new ManualClock(Math.floor(Date.now() / MINUTE) * MINUTE + 30_000);
const history = createArrivalHistory(redis, config.queuePrefix, clock);
let api: TestApi;

beforeAll(async () => {
  const deployments = createDeploymentStore(redis, config.queuePrefix);
  await deployments.put({ model: 'dash', version: '1', min: 1, max: 4, standby: 0 });
  await deployments.put({ model: 'sim', version: '1', min: 1, max: 4, standby: 0 });
  await deployments.put({ model: 'flood', version: '1', min: 1, max: 4, standby: 0 });
  await deployments.put({ model: 'calib', version: '1', min: 1, max: 4, standby: 0 });
  api = await startTestApi(config, { clock });
});

afterAll(async () => {
  await api?.close();
  for await (const keys of scanKeys(redis, `${config.queuePrefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

describe('page and assets', () => {
  it('serves the page without a key, with a CSP and asset URLs that carry a content hash', async () => {
    const res = await api.call('/dashboard');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(res.headers.get('cache-control')).toBe('no-cache');
    const html = await res.text();
    const src = /src="(dashboard\/assets\/uPlot\.iife\.min\.js\?v=([0-9a-f]+))"/.exec(html);
    expect(src).not.toBeNull();
    const asset = await api.call(`/${src?.[1]}`, { headers: { 'accept-encoding': 'identity' } });
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(asset.headers.get('etag')).toBe(`"${src?.[2]}"`);
    // Gzipped for a client that accepts it (fetch does): another representation, so a weak ETag.
    const gzipped = await api.call(`/${src?.[1]}`, { headers: { 'accept-encoding': 'gzip' } });
    expect(gzipped.headers.get('content-encoding')).toBe('gzip');
    expect(gzipped.headers.get('etag')).toBe(`W/"${src?.[2]}"`);
    const file = createRequire(import.meta.url).resolve('uplot/dist/uPlot.iife.min.js');
    expect(await asset.text()).toBe(readFileSync(file, 'utf8'));
    expect((await api.call('/dashboard/assets/uPlot.min.css')).headers.get('content-type')).toContain('text/css');
  });

  it('answers 404 for a file it does not serve', async () => {
    const res = await api.call('/dashboard/assets/..%2Fpackage.json');
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('asset_not_found');
  });
});

describe('GET /v1/session', () => {
  it('names the tenant and whether it may change deployments; refuses without a key', async () => {
    expect(await (await api.call('/v1/session', { key: KEY_ADMIN })).json()).toEqual({ tenant: 'tenant-a', admin: true });
    expect(await (await api.call('/v1/session', { key: KEY_OTHER })).json()).toEqual({ tenant: 'tenant-b', admin: false });
    expect((await api.call('/v1/session')).status).toBe(401);
  });
});

function decision(model: string, at: number, ratePerSec: number): DecisionRecord {
  return {
    at,
    model,
    version: '1',
    shadow: false,
    leader: 'test',
    forecast: { ratePerSec, burstRatePerSec: ratePerSec, horizonS: 60, method: 'reactive', components: {} },
    backlog: { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 },
    workers: { starting: 0, standby: 0, active: 1, draining: 0 },
    perWorkerRatePerSec: 50,
    settings: {
      min: 1,
      max: 4,
      standby: 0,
      sloQueueWaitMs: 5_000,
      coldStartMs: 20_000,
      scaleDownStabilizationMs: 60_000,
      targetUtilization: 0.8,
    },
    decision: { active: 1, standby: 0, launch: 0, drain: 0, reasons: ['test'] },
    planned: [],
    applied: [],
  };
}

/** A live worker of `model` whose warm-up served `rowsPerS` at batch 32. */
function profiledBeat(model: string, rowsPerS: number): HeartbeatPayload {
  const p50Ms = (32 / rowsPerS) * 1000;
  return {
    id: `${model}-w1`,
    model,
    version: '1',
    state: 'active',
    pid: 1,
    host: 'test',
    startedAt: clock.now() - 3600_000,
    updatedAt: clock.now(),
    rowsPerS: 0,
    jobsInFlight: 0,
    memory: { rssBytes: 1, heapUsedBytes: 1 },
    batchProfile: {
      threads: 1,
      chosenBatch: 32,
      rowsPerS,
      entries: [
        { batch: 1, p50Ms: p50Ms / 16, p95Ms: p50Ms / 16, rowsPerS: rowsPerS / 2 },
        { batch: 32, p50Ms, p95Ms: p50Ms, rowsPerS },
      ],
    },
  };
}

/** A pool sample as the dashboard records it (api/insights/samples.ts), with the queue waits of its interval. */
async function addSample(model: string, at: number, queueSeconds: Histogram): Promise<void> {
  const sample: PoolSample = {
    at,
    queue: { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 },
    workers: { starting: 0, standby: 0, active: 1, draining: 0 },
    queueSeconds,
  };
  await redis.xadd(dashboardKey(config.queuePrefix, 'samples', model), '*', 'sample', JSON.stringify(sample));
}

describe('GET /v1/deployments/:model/series', () => {
  it('returns the recorded arrivals per minute with the forecast, and a pool sample', async () => {
    const now = clock.now();
    await history.recordArrival('dash', 7, now - 2 * MINUTE);
    await history.recordArrival('dash', 3, now);
    await history.recordCompletion('dash', 250, now - MINUTE); // a bulk run's rows: served, never arrivals
    await history.recordMany([{ kind: 'cached', model: 'dash', count: 4, at: now }]); // the result cache's answers
    await createDecisionLog(redis, config.queuePrefix).record(decision('dash', now - MINUTE, 0.5));
    const res = await api.call('/v1/deployments/dash/series?minutes=3', { key: KEY_OTHER });
    expect(res.status).toBe(200);
    const view = (await res.json()) as {
      arrivals: { t: number[]; perMin: number[]; cachedPerMin: number[]; servedPerMin: number[]; forecastPerMin: Array<number | null> };
      pool: { t: number[]; active: number[] };
    };
    const minute0 = (Math.floor(now / MINUTE) - 2) * 60;
    // The decision holds into the next minute (an unchanged one is recorded only once a minute).
    expect(view.arrivals).toEqual({
      t: [minute0, minute0 + 60, minute0 + 120],
      perMin: [7, 0, 3],
      cachedPerMin: [0, 0, 4],
      servedPerMin: [0, 250, 0],
      forecastPerMin: [null, 30, 30],
    });
    expect(view.pool.t).toEqual([now / 1000]);
    expect(view.pool.active).toEqual([0]); // no worker runs in this test
  });

  it.each([
    ['/v1/deployments/dash/series?minutes=0', 400, 'invalid_query'],
    ['/v1/deployments/dash/series?minutes=99999', 400, 'invalid_query'],
    ['/v1/deployments/nobody/series', 404, 'deployment_not_found'],
  ])('%s → %i %s', async (path, status, code) => {
    const res = await api.call(path, { key: KEY_ADMIN });
    expect(res.status).toBe(status);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe(code);
  });
});

describe('GET /v1/deployments/:model/simulation', () => {
  it('replays the recorded arrivals of the observed window with the current and the chosen settings', async () => {
    const now = clock.now();
    let recorded = 0;
    for (let m = 1; m <= 20; m++) {
      await history.recordArrival('sim', 30 * m, now - m * MINUTE);
      recorded += 30 * m;
    }
    // The scaler has been deciding for the last 20 minutes: the record starts there.
    await createDecisionLog(redis, config.queuePrefix).record(decision('sim', now - 20 * MINUTE, 5));
    await createDecisionLog(redis, config.queuePrefix).record(decision('sim', now - MINUTE, 5));
    const res = await api.call('/v1/deployments/sim/simulation?minutes=60&standby=2&sloMs=4000', { key: KEY_OTHER });
    expect(res.status).toBe(200);
    type Run = {
      name: string;
      settings: { standby: number; min: number; coldStartMs: number };
      jobs: number;
      workerSeconds: { standby: number };
    };
    const sim = (await res.json()) as {
      minutes: number;
      requestedMinutes: number;
      world: { replayedRows: number; coldStartMs: number };
      sloMs: number;
      runs: Run[];
      pool: { t: number[] };
    };
    // Asked for an hour, replayed the 20 minutes observed, so cost compares like with like.
    expect([sim.requestedMinutes, sim.minutes]).toEqual([60, 20]);
    expect(sim.world.replayedRows).toBe(recorded);
    expect(sim.sloMs).toBe(4000);
    // The scaler's last decision supplies the measured cold start.
    expect(sim.world.coldStartMs).toBe(20_000);
    const [current, chosen] = sim.runs as [Run, Run];
    expect([current.name, chosen.name]).toEqual(['current', 'chosen']);
    expect(current.settings).toMatchObject({ standby: 0, min: 1 });
    expect(chosen.settings).toMatchObject({ standby: 2, min: 1 });
    expect(current.jobs).toBe(recorded);
    expect(chosen.jobs).toBe(recorded);
    expect(chosen.workerSeconds.standby).toBeGreaterThan(current.workerSeconds.standby);
    expect(sim.pool.t.length).toBeGreaterThan(0);
  });

  it("builds the simulated worker from the deployment's measurements and fills the actual row from the sampled waits", async () => {
    const now = clock.now();
    const to = Math.floor(now / MINUTE) * MINUTE;
    for (let m = 1; m <= 10; m++) await history.recordArrival('calib', 3000, to - m * MINUTE);
    await history.recordArrival('calib', 70, now); // the minute in progress
    await createDecisionLog(redis, config.queuePrefix).record(decision('calib', to - 10 * MINUTE, 50));
    // A live worker's warm-up: 32 rows in 16 ms (2000 rows/s of forward passes) ...
    await redis.set(workerKey(config.queuePrefix, 'calib-w1'), JSON.stringify(profiledBeat('calib', 2000)), 'PX', 60_000);
    // ... and the scaler measured 400 rows/s on busy workers: 2 ms per job beyond the forward pass.
    await redis.set(scalerWorkerRateKey(config.queuePrefix, false, 'calib'), '400');
    // What the dashboard sampled: waits of a few ms in the window, and some in the minute in progress.
    const waits = (count: number): Histogram => ({ bounds: [0.001, 0.005, 0.025], counts: [0, count, count], sum: count * 0.003, count });
    for (let m = 9; m >= 1; m--) await addSample('calib', to - m * MINUTE + 30_000, waits(100));
    await addSample('calib', to + 5_000, waits(7));

    const res = await api.call('/v1/deployments/calib/simulation?minutes=10', { key: KEY_OTHER });
    expect(res.status).toBe(200);
    const sim = (await res.json()) as SimulationView;
    expect(sim.world).toMatchObject({
      source: 'profile+measured',
      measuredRowsPerSec: 400,
      profileRowsPerSec: 2000,
      jobOverheadMs: 2,
      workerRowsPerSec: 400,
      maxBatch: 32,
      batchProfile: true,
      replayedRows: 30_000,
    });
    expect(sim.world.missing.filter((m) => !m.startsWith('cold start'))).toEqual([]);
    // 50 rows/s on a worker that serves 400: the replay waits as little as the deployment did.
    const [current] = sim.runs;
    expect(current?.jobs).toBe(30_000);
    expect(current?.queueWaitMs.p95).toBeLessThan(sim.sloMs);
    expect(sim.actual).toMatchObject({ jobs: 900, waitSamples: 9, note: null, sloAttainment: 1 });
    expect(sim.actual.queueWaitP95Ms).toBeGreaterThan(0);
    expect(sim.actual.queueWaitP95Ms).toBeLessThanOrEqual(5);
    // The minute in progress is in neither row, and the view says what it holds.
    expect(sim.inProgress).toEqual({ rows: 70, jobs: 7, endsAt: to + MINUTE });
  });

  it('says what it assumed when the deployment measured nothing, and why the actual row has no waits', async () => {
    const res = await api.call('/v1/deployments/sim/simulation?minutes=5', { key: KEY_OTHER });
    expect(res.status).toBe(200);
    const sim = (await res.json()) as SimulationView;
    expect(sim.world).toMatchObject({
      source: 'assumed',
      workerRowsPerSec: ASSUMED_ROWS_PER_SEC,
      measuredRowsPerSec: null,
      batchProfile: false,
    });
    expect(sim.world.missing).toEqual(
      expect.arrayContaining([expect.stringMatching(/^worker speed: nothing measured yet/), expect.stringMatching(/^batch profile: /)]),
    );
    expect(sim.actual).toMatchObject({ jobs: 0, queueWaitP95Ms: null, waitSamples: 0 });
    expect(sim.actual.note).toMatch(/no queue waits were recorded in these minutes: the dashboard samples them while it is open/);
  });

  it('refuses settings that do not hold together, and a window with more arrivals than it replays here', async () => {
    const bad = await api.call('/v1/deployments/dash/simulation?min=5&max=2', { key: KEY_ADMIN });
    expect(bad.status).toBe(400);
    await history.recordArrival('flood', MAX_REPLAY_ROWS + 1, clock.now() - MINUTE);
    const flood = await api.call('/v1/deployments/flood/simulation?minutes=5', { key: KEY_ADMIN });
    expect(flood.status).toBe(422);
    expect(((await flood.json()) as { error: { code: string } }).error.code).toBe('simulation_too_large');
  });
});
