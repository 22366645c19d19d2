/**
 * The shared pool's rows (pool-load.ts) measured on real processes: a `warmpool worker --pool`
 * child (started with poolWorkerEnv) told what to hold through its holdings channel
 * (infra/fleet/pool-holdings.ts), the bench's Redis, S3 and ONNX Runtime. Models of one shape
 * with distinct weights (scripts/fixtures/onnx-models.ts), so a job served by the wrong session
 * would show in the outputs.
 *
 * Loads: one worker with room for every model; each round asks it to load a model it never saw,
 * waits for it `active`, lets it go (holdings: none) until the worker is standby again, then the
 * same model once more, now from its disk cache and kept profile. Every load lands on a standby.
 *
 * Zipf: an API child and one worker whose --memory-mb fits `fits` of `models` models; jobs in
 * Poisson arrivals, models drawn by Zipf. Misses are placed by either
 * - `controller` (the default): the real one. A shared pool of exactly one worker (`max 1, min 1,
 *   standby 0`) that every model's deployment joins; the scaler with its pool controller runs in
 *   this process (as test/pool-zipf-live.test.ts wires it), its local provider forking the worker;
 *   the API rings the pool's demand on each submit. The bench only watches the heartbeat.
 * - `bench`: MissRouter, the bench's own: an askLoad for a model the heartbeat shows not held,
 *   and each second for a model with jobs waiting that the worker does not hold (as the controller
 *   does for a backlog), so no job is left behind an eviction.
 * The ratio is read from the API's /metrics.
 */
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { queueName } from '../../infra/contracts/job.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { createSharedPoolStore } from '../../infra/deployments/pool-store.ts';
import { askLoad, sendHoldings } from '../../infra/fleet/pool-holdings.ts';
import { poolWorkerEnv } from '../../infra/fleet/pool-worker-env.ts';
import { type HeartbeatPayload, listHeartbeats, type PoolModelView } from '../../infra/fleet/worker-states.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import type { Config } from '../../infra/kernel/config.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { seededRandom } from '../../infra/kernel/seeded-random.ts';
import { createLocalProvider } from '../../infra/pool/index.ts';
import { openQueueProbes } from '../../infra/queue/index.ts';
import { closeRedis, createRedis, type RedisClient } from '../../infra/redis/client.ts';
import { workerKey } from '../../infra/redis/keys.ts';
import { startScaler } from '../../infra/scaler/main.ts';
import { freePort } from '../dev/free-port.ts';
import { buildDistinctMlpModels } from '../fixtures/onnx-models.ts';
import {
  HIT_ROW,
  hitRow,
  LOAD_ROW_NAMES,
  type LoadSample,
  loadRows,
  lruHitRatio,
  MissRouter,
  type PoolLoadPlan,
  poolJobCounts,
  type ZipfFigures,
  zipfTraffic,
} from './pool-load.ts';
import type { BenchRow } from './report.ts';
import { BENCH_KEY, type BenchContext, type ChildRole, scopedEnv, spawnRole, waitForHttp } from './services.ts';
import { failedRows } from './suite.ts';

/** ~8.6 MB of weights each: large enough that the budget, not the serving parts' noise, decides what fits. */
const SHAPE = { features: 64, hidden: 1024, layers: 3 };
const F = SHAPE.features;
const MB = 1024 * 1024;
/** Every heartbeat is a Redis write per model: fast enough to see loads, cheap at these counts. */
const BEAT = { HEARTBEAT_INTERVAL_MS: '100', HEARTBEAT_TTL_MS: '1000', INTRA_OP_THREADS: '1' };
const POLL_MS = 10;
const METRICS_TOKEN = 'bench-metrics-token-0123456789';
const VERSION = '1';
const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));
const POOL = 'bench-zipf';

/** Who places a model no worker holds (see the header). */
export type Placement = 'controller' | 'bench';

const PLACEMENT_NOTE: Record<Placement, string> = {
  controller:
    'placed by the pool controller (the scaler in the bench process, local provider, a pool of max 1 worker, the API ringing demand on submit)',
  bench: "placed by the bench's plain router (an askLoad for a model the heartbeat shows not held), not the pool controller",
};

/** Both measurements; a failed one gives its rows as n/a and the other still runs. */
export async function benchPoolLoad(ctx: BenchContext, plan: PoolLoadPlan, placement: Placement = 'controller'): Promise<BenchRow[]> {
  ctx.out('[shared pool: loads onto a standby, hit ratio under Zipf]');
  const rows: BenchRow[] = [];
  try {
    const samples = await measureLoads(ctx, plan);
    rows.push(...loadRows(samples, POLL_MS));
  } catch (err) {
    rows.push(...failedRows(undefined, LOAD_ROW_NAMES, err));
  }
  try {
    rows.push(hitRow(await measureZipf(ctx, plan, placement)));
  } catch (err) {
    rows.push(...failedRows(undefined, [HIT_ROW], err));
  }
  return rows;
}

async function publishModels(ctx: BenchContext, prefix: string, count: number, firstSeed: number): Promise<ZipfModel[]> {
  const all = buildDistinctMlpModels(count, { ...SHAPE, firstSeed });
  const out: ZipfModel[] = [];
  for (const [i, bytes] of all.entries()) {
    const name = `${prefix}-${i}`;
    const manifest = await ctx.registry.publish({ name, version: VERSION, bytes, maxBatch: 8, warmupBatches: [1, 2, 4, 8] });
    out.push({ name, bytes, sizeBytes: manifest.sizeBytes });
  }
  return out;
}

/** A published model: its name (version VERSION), bytes and size. */
interface ZipfModel {
  name: string;
  bytes: Uint8Array;
  sizeBytes: number;
}

interface PoolWorkerUnderTest {
  role: ChildRole;
  id: string;
  beat(): Promise<HeartbeatPayload | undefined>;
}

async function startPoolWorker(redis: RedisClient, env: NodeJS.ProcessEnv, prefix: string, memoryMb: number): Promise<PoolWorkerUnderTest> {
  const role = spawnRole(['worker', '--pool', 'bench', '--memory-mb', String(memoryMb)], poolWorkerEnv(env));
  const first = await until('the pool worker standby', async () => {
    const beat = (await listHeartbeats(redis, prefix)).find((b) => b.pid === role.child.pid);
    if (beat?.state === 'failed') throw new Error(`pool worker failed: ${beat.error}`);
    return beat?.state === 'standby' ? beat : undefined;
  }).catch(async (err: unknown) => {
    await role.stop();
    throw err;
  });
  const key = workerKey(prefix, first.id);
  return {
    role,
    id: first.id,
    beat: async () => {
      const raw = await redis.get(key);
      return raw ? (JSON.parse(raw) as HeartbeatPayload) : undefined;
    },
  };
}

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 120_000, everyMs = POLL_MS): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await systemClock.sleep(everyMs);
  }
}

async function measureLoads(ctx: BenchContext, plan: PoolLoadPlan): Promise<LoadSample[]> {
  const models = await publishModels(ctx, 'pool-load', plan.loads, 3100);
  const { env, config } = scopedEnv(ctx, 'pool-load', BEAT);
  const prefix = config.queuePrefix;
  const redis = createRedis(config.redisUrl);
  let worker: PoolWorkerUnderTest | undefined;
  try {
    worker = await startPoolWorker(redis, env, prefix, 4096);
    const w = worker;
    const loadOnce = async (model: string, kind: LoadSample['kind']): Promise<LoadSample> => {
      const started = performance.now();
      await askLoad(redis, prefix, w.id, { model, version: VERSION });
      const view = await until(`${model} active`, async () => {
        const beat = await w.beat();
        const m = beat?.models?.find((x) => x.model === model);
        if (m?.state === 'failed') throw new Error(`${model} failed to load: ${m.error}`);
        return m?.state === 'active' ? m : undefined;
      });
      const outsideMs = performance.now() - started;
      await sendHoldings(redis, prefix, w.id, []);
      await until('the worker standby again', async () => {
        const beat = await w.beat();
        return beat?.state === 'standby' && (beat.models ?? []).length === 0 ? true : undefined;
      });
      return sample(kind, view, outsideMs);
    };
    const samples: LoadSample[] = [];
    for (const { name } of models) {
      samples.push(await loadOnce(name, 'cold'), await loadOnce(name, 'seen'));
      const [cold, seen] = samples.slice(-2) as [LoadSample, LoadSample];
      ctx.out(
        `  ${name}: never seen ${Math.round(cold.workerMs)} ms (outside ${Math.round(cold.outsideMs)}), seen ${Math.round(seen.workerMs)} ms (outside ${Math.round(seen.outsideMs)})`,
      );
    }
    return samples;
  } finally {
    await worker?.role.stop();
    await closeRedis(redis);
  }
}

function sample(kind: LoadSample['kind'], view: PoolModelView, outsideMs: number): LoadSample {
  return {
    kind,
    workerMs: view.loadMs ?? Number.NaN,
    outsideMs,
    cacheHit: view.cacheHit ?? false,
    reused: view.warmup?.reused ?? false,
  };
}

interface Submitted {
  id: string;
  model: number;
  row: number;
}

async function measureZipf(ctx: BenchContext, plan: PoolLoadPlan, placement: Placement): Promise<ZipfFigures> {
  const models = await publishModels(ctx, 'pool-zipf', plan.models, 4100);
  const sizeBytes = Math.max(...models.map((m) => m.sizeBytes));
  // Measured resident memory is 1.00–1.01× the file under poolWorkerEnv (pool-worker.ts): half a
  // model's slack fits `fits` and never fits + 1.
  const memoryMb = Math.floor(((plan.fits + 0.5) * sizeBytes) / MB);
  const { env, config } = scopedEnv(ctx, 'pool-zipf', { ...BEAT, PORT: String(await freePort()), METRICS_TOKEN, SCALER_TICK_MS: '500' });
  const prefix = config.queuePrefix;
  const url = `http://127.0.0.1:${config.api.port}`;
  const redis = createRedis(config.redisUrl);
  const controlled = placement === 'controller';
  const stops: Array<() => Promise<unknown>> = [];
  try {
    if (controlled) await createSharedPoolStore(redis, prefix).put({ name: POOL, max: 1, min: 1, standby: 0, memoryMb });
    // Deployed (the API takes no job for an undeployed model), into the pool when the controller places.
    const deployments = createDeploymentStore(redis, prefix);
    for (const m of models) {
      await deployments.put({ model: m.name, version: VERSION, min: 0, max: 1, standby: 0, ...(controlled ? { pool: POOL } : {}) });
    }
    const api = spawnRole(['api'], env);
    stops.push(() => api.stop());
    await waitForHttp(`${url}/v2/health/ready`);
    const worker = controlled
      ? await startControlledPool(env, config, redis, stops)
      : await startPoolWorker(redis, env, prefix, memoryMb).then((w) => {
          stops.push(() => w.role.stop());
          return w;
        });
    const routing = startRouting(ctx, redis, prefix, worker, models, !controlled);
    stops.push(() => routing.stop());
    const traffic = zipfTraffic(plan);
    const { jobs, benchHits } = await sendTraffic(url, models, routing.router, traffic);
    const text = await countedMetrics(url, jobs.length);
    const { checked, wrong } = await checkOutputs(url, jobs, models, plan);
    const metric = poolJobCounts(text);
    const { held } = routing;
    ctx.out(
      `  Zipf: ${jobs.length} jobs over ${plan.models} models, ${metric.hit} hit / ${metric.miss} miss (the bench saw ${benchHits} hits), ` +
        `held ≤ ${held.max} under --memory-mb ${memoryMb}, ${wrong} of ${checked} checked outputs wrong`,
    );
    return {
      jobs: jobs.length,
      metric,
      benchHits,
      lru: lruHitRatio(
        traffic.map((t) => t.model),
        plan.fits,
      ),
      plan,
      memoryMb,
      heldMax: held.max,
      heldMean: held.reads > 0 ? held.sum / held.reads : Number.NaN,
      loads: sumSeries(text, 'warmpool_pool_model_loads_total', 'outcome="loaded"'),
      checked,
      wrong,
      router: PLACEMENT_NOTE[placement],
    };
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await closeRedis(redis);
  }
}

/**
 * The scaler with its pool controller in this process and its local provider forking the pool's
 * one worker (test/pool-zipf-live.test.ts wires it the same way); resolves once that worker is
 * standby. Its stoppers go on `stops`.
 */
async function startControlledPool(
  env: NodeJS.ProcessEnv,
  config: Config,
  redis: RedisClient,
  stops: Array<() => Promise<unknown>>,
): Promise<Pick<PoolWorkerUnderTest, 'id' | 'beat'>> {
  const prefix = config.queuePrefix;
  const log = createLogger('silent');
  const provider = createLocalProvider({
    command: [process.execPath, BIN, 'worker'],
    env,
    redis,
    prefix,
    clock: systemClock,
    log,
    stdio: 'ignore',
  });
  stops.push(() => provider.close());
  const scaler = startScaler(config, log, provider);
  stops.push(() => scaler.close());
  const first = await until("the pool controller's standby worker", async () => {
    const beat = (await listHeartbeats(redis, prefix)).find((b) => b.pool === POOL);
    if (beat?.state === 'failed') throw new Error(`pool worker failed: ${beat.error}`);
    return beat?.state === 'standby' ? beat : undefined;
  });
  const key = workerKey(prefix, first.id);
  return {
    id: first.id,
    beat: async () => {
      const raw = await redis.get(key);
      return raw ? (JSON.parse(raw) as HeartbeatPayload) : undefined;
    },
  };
}

/**
 * The bench's view of the worker, fed by its heartbeat every 50 ms (counting the models it shows
 * active). When the bench places (`asks`), also its router: a miss asks for a load, and each
 * second a model with jobs waiting that the worker does not hold is routed as one.
 */
function startRouting(
  ctx: BenchContext,
  redis: RedisClient,
  prefix: string,
  worker: Pick<PoolWorkerUnderTest, 'id' | 'beat'>,
  models: readonly ZipfModel[],
  asks: boolean,
) {
  const probes = openQueueProbes(redis, prefix);
  // A TTL past the run: an expired set would make the next askLoad's set of one drain the rest.
  const ask = (model: string) =>
    void askLoad(redis, prefix, worker.id, { model, version: VERSION }, { ttlMs: 3_600_000 }).catch((err: unknown) =>
      ctx.out(`  askLoad ${model} failed: ${errorMessage(err)}`),
    );
  // Under the controller the router only reads: its route() is the bench's own hit count.
  const router = new MissRouter(asks ? ask : () => undefined, () => Date.now());
  const held = { max: 0, sum: 0, reads: 0 };
  const beats = watch(async () => {
    const beat = await worker.beat();
    router.observe(beat?.models ?? []);
    held.max = Math.max(held.max, router.resident);
    held.sum += router.resident;
    held.reads++;
  }, 50);
  const backlog = watch(async () => {
    if (!asks) return;
    for (const m of models) {
      const counts = await probes.queue(queueName(m.name, VERSION)).counts('waiting', 'prioritized');
      if (counts.waiting + counts.prioritized > 0) router.route(m.name);
    }
  }, 1000);
  return {
    router,
    held,
    stop: async () => {
      await Promise.all([beats.stop(), backlog.stop()]);
      await probes.close();
    },
  };
}

/** Each job of `traffic` at its time, routed, then submitted; throws if any submit was refused. */
async function sendTraffic(url: string, models: readonly ZipfModel[], router: MissRouter, traffic: ReturnType<typeof zipfTraffic>) {
  const submitted: Promise<Submitted | undefined>[] = [];
  const refused: string[] = [];
  let benchHits = 0;
  const t0 = performance.now();
  for (const [row, job] of traffic.entries()) {
    const wait = t0 + job.atMs - performance.now();
    if (wait > 0) await systemClock.sleep(wait);
    const name = (models[job.model] as ZipfModel).name;
    if (router.route(name)) benchHits++;
    submitted.push(
      submit(url, name, row).then(
        (id) => ({ id, model: job.model, row }),
        (err: unknown) => void refused.push(errorMessage(err)),
      ),
    );
  }
  const jobs = (await Promise.all(submitted)).filter((j): j is Submitted => j !== undefined);
  if (refused.length > 0) throw new Error(`${refused.length} of ${traffic.length} submits failed, first: ${refused[0]}`);
  return { jobs, benchHits };
}

/** The API's /metrics once `warmpool_pool_jobs_total` counts `jobs` jobs (they all finished). */
function countedMetrics(url: string, jobs: number): Promise<string> {
  const read = () => fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } }).then((r) => r.text());
  return until(
    'every job counted in warmpool_pool_jobs_total',
    async () => {
      const text = await read();
      const c = poolJobCounts(text);
      return c.hit + c.miss >= jobs ? text : undefined;
    },
    180_000,
    500,
  );
}

/** `fn` every `everyMs` until stopped; a failing round is skipped, not fatal. */
function watch(fn: () => Promise<void>, everyMs: number): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await fn().catch(() => undefined);
      await systemClock.sleep(everyMs);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

/** Job `row`'s one row: a fixed function of its index, distinct per job (the API's result cache never answers). */
function rowData(row: number): number[] {
  return Array.from({ length: F }, (_, k) => Math.sin(row + k));
}

async function submit(url: string, model: string, row: number): Promise<string> {
  const res = await fetch(`${url}/v1/models/${model}/jobs`, {
    method: 'POST',
    headers: { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: rowData(row) }] }),
  });
  if (res.status !== 202) throw new Error(`submit to ${model} refused: HTTP ${res.status} ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

/** A seeded sample of the jobs (and the first of every model), each output against ONNX Runtime's for its model. */
async function checkOutputs(url: string, jobs: readonly Submitted[], models: readonly ZipfModel[], plan: PoolLoadPlan) {
  const rand = seededRandom(plan.seed + 1);
  const pick = new Set<Submitted>();
  for (let m = 0; m < models.length; m++) {
    const first = jobs.find((j) => j.model === m);
    if (first) pick.add(first);
  }
  while (pick.size < Math.min(plan.checked, jobs.length)) pick.add(jobs[Math.floor(rand() * jobs.length)] as Submitted);
  let wrong = 0;
  // One model's session at a time, released after its jobs: the bench process holds no pool of its own.
  for (let m = 0; m < models.length; m++) {
    const mine = [...pick].filter((j) => j.model === m);
    if (mine.length === 0) continue;
    const session = await ort.InferenceSession.create((models[m] as ZipfModel).bytes);
    try {
      for (const job of mine) {
        const res = await fetch(`${url}/v1/jobs/${encodeURIComponent(job.id)}`, { headers: { authorization: `Bearer ${BENCH_KEY}` } });
        const body = (await res.json()) as { status: string; outputs?: Array<{ data: number[] }> };
        const out = await session.run({ features: new ort.Tensor('float32', Float32Array.from(rowData(job.row)), [1, F]) });
        const expected = (out.score as ort.Tensor).data[0] as number;
        const got = body.outputs?.[0]?.data[0];
        if (body.status !== 'succeeded' || got === undefined || Math.abs(got - expected) > 1e-5) wrong++;
      }
    } finally {
      await session.release();
    }
  }
  return { checked: pick.size, wrong };
}

function sumSeries(text: string, name: string, labels: string): number {
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`^${name}\\{([^}]*)\\} ([\\d.e+]+)$`, 'gm'))) if (m[1]?.includes(labels)) sum += Number(m[2]);
  return sum;
}
