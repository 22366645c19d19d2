/**
 * A shared pool's worker (`warmpool worker --pool NAME`, issue 31) as a real process, on the real
 * Redis, S3 server and ONNX Runtime, driven through its holdings (infra/fleet/pool-holdings.ts):
 * - told to hold several models, it serves jobs of each, every output equal to ONNX Runtime's
 *   answer for that model (models of one shape with distinct weights: the wrong session would show);
 * - a model it held before (its profile kept beside the cached model) warms in one batch;
 * - a budget that fits about 5 of 10 models evicts instead of growing (RSS read from /proc);
 * - told to drop a model with jobs in flight, it finishes them first and takes no more;
 * - SIGTERM drains every model and exits 0, the jobs it held finished; after a SIGKILL no
 *   accepted job is lost (BullMQ's stall recovery hands them to the next worker that holds them).
 * No assertion here is about time.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { askLoad, sendHoldings } from '../infra/fleet/pool-holdings.ts';
import { poolWorkerEnv } from '../infra/fleet/pool-worker-env.ts';
import { type HeartbeatPayload, listHeartbeats, type PoolModelView } from '../infra/fleet/worker-states.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { stopChild } from '../scripts/dev/stop-child.ts';
import { buildDistinctMlpModels, buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const F = 16;
const MB = 1024 * 1024;
let stack: TestStack;
let redis: RedisClient;
const children: ChildProcess[] = [];
const sessions = new Map<string, ort.InferenceSession>();

/** Models of one shape, distinct weights (`pw-0` … `pw-3`). */
const SERVED = buildDistinctMlpModels(4, { features: F, hidden: 32 });
/** Ten larger models, for the memory budget (`mem-0` … `mem-9`): about 29 MB of weights each. */
const LARGE = buildDistinctMlpModels(10, { features: 256, hidden: 1536, layers: 4, firstSeed: 2000 });
const SLOW = buildMlpModel({ features: 256, hidden: 2048, layers: 4, seed: 5 });

beforeAll(async () => {
  stack = await startStack({
    HEARTBEAT_INTERVAL_MS: '200',
    HEARTBEAT_TTL_MS: '2000',
    WARMUP_ITERATIONS: '2',
    COALESCE_MAX_REQUESTS: '2',
    // A SIGKILLed worker's jobs go back to the queue within seconds (BullMQ's stall recovery).
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '1000',
  });
  redis = createRedis(stack.config.redisUrl);
  const publish = async (name: string, bytes: Uint8Array, warmupBatches: number[]) => {
    await stack.registry.publish({ name, version: '1', bytes, maxBatch: 8, warmupBatches });
    await stack.deployments.put({ model: name, version: '1', min: 0, max: 1, standby: 0 });
  };
  for (const [i, bytes] of SERVED.entries()) {
    await publish(`pw-${i}`, bytes, [1, 2, 4, 8]);
    sessions.set(`pw-${i}`, await ort.InferenceSession.create(bytes));
  }
  for (const [i, bytes] of LARGE.entries()) await publish(`mem-${i}`, bytes, [1, 8]);
  await publish('pw-slow', SLOW, [1, 8]);
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map((c) => stopChild(c)));
  for (const s of sessions.values()) await s.release();
  await stack?.close();
  if (redis) await closeRedis(redis);
});

function startPoolWorker(memoryMb: number): ChildProcess {
  const child = spawn(process.execPath, [BIN, 'worker', '--pool', 'p1', '--memory-mb', String(memoryMb)], {
    env: { ...poolWorkerEnv(stack.env), INTRA_OP_THREADS: '1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  return child;
}

async function beatOf(child: ChildProcess): Promise<HeartbeatPayload | undefined> {
  return (await listHeartbeats(redis, stack.config.queuePrefix)).find((b) => b.pid === child.pid);
}

/** The worker's heartbeat once `ok` holds for it (fails fast if it reports `failed`). */
function waitForBeat(child: ChildProcess, what: string, ok: (b: HeartbeatPayload) => boolean, timeoutMs = 120_000) {
  return until(
    `pool worker ${child.pid}: ${what}`,
    async () => {
      const beat = await beatOf(child);
      if (beat?.state === 'failed') throw new Error(`pool worker failed: ${beat.error}`);
      const broken = beat?.models?.find((m) => m.state === 'failed');
      if (broken) throw new Error(`model ${broken.model} failed to load: ${broken.error}`);
      return beat && ok(beat) ? beat : undefined;
    },
    timeoutMs,
  );
}

const modelIn = (b: HeartbeatPayload, model: string): PoolModelView | undefined => b.models?.find((m) => m.model === model);
const active = (b: HeartbeatPayload) => (b.models ?? []).filter((m) => m.state === 'active');
const refs = (names: string[]) => names.map((model) => ({ model, version: '1' }));

/** The process's resident set from /proc, bytes. */
function procRss(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  if (!kb) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb) * 1024;
}

/** ONNX Runtime's own answer for submitMany's job `i` (one row of F values). */
async function expectedScore(model: string, i: number): Promise<number> {
  const session = sessions.get(model);
  if (!session) throw new Error(`no reference session for ${model}`);
  const row = Float32Array.from({ length: F }, (_, k) => Math.sin(i + k));
  const out = await session.run({ features: new ort.Tensor('float32', row, [1, F]) });
  return (out.score as ort.Tensor).data[0] as number;
}

/** One job of submitMany's row `i` (`rows` rows of `features` values), through the API; its id. */
async function submitRow(model: string, i: number, features = F, rows = 1): Promise<string> {
  const data = Array.from({ length: rows * features }, (_, k) => Math.sin(i + k));
  const res = await stack.call(`/v1/models/${model}/jobs`, {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'features', shape: [rows, features], datatype: 'FP32', data }] }),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

let servingWorker: ChildProcess;

it('holds several models at once and serves each with its own weights', async () => {
  servingWorker = startPoolWorker(1024);
  const standby = await waitForBeat(servingWorker, 'standby', (b) => b.state === 'standby');
  expect(standby).toMatchObject({ pool: 'p1', model: '', version: '', models: [] });

  const names = SERVED.map((_, i) => `pw-${i}`);
  await sendHoldings(redis, stack.config.queuePrefix, standby.id, refs(names));
  const beat = await waitForBeat(servingWorker, 'four models active', (b) => active(b).length === 4);
  expect(beat.state).toBe('active');
  for (const m of active(beat)) {
    expect(m.residentBytes).toBeGreaterThan(0);
    expect(m.warmup?.reused).toBe(false);
    // A cold warm-up measures every size the manifest names, a batch of one among them.
    expect(m.warmup?.batchesMeasured).toBe(4);
    expect(m.profile?.batchOneMs).toBeGreaterThan(0);
    console.info(
      `[figures] ${m.model} cold: loadMs=${m.loadMs} residentBytes=${m.residentBytes} cacheHit=${m.cacheHit} batchOneMs=${m.profile?.batchOneMs}`,
    );
  }

  const ids = await Promise.all(names.map((model) => stack.submitMany(model, 12, { features: F })));
  for (const [n, model] of names.entries()) {
    const jobs = await Promise.all((ids[n] as string[]).map((id) => waitForJob(stack, id, 120_000)));
    for (const [i, job] of jobs.entries()) {
      expect(job.status).toBe('succeeded');
      const [out] = job.outputs as Array<{ name: string; data: number[] }>;
      expect(out?.name).toBe('score');
      expect(out?.data[0]).toBeCloseTo(await expectedScore(model, i), 5);
    }
  }
  // Its counts since it began (GET /v1/pool sums them): four loads, nothing let go, and every job
  // a hit, since each was queued after its model was resident.
  const counted = await waitForBeat(servingWorker, '48 jobs counted', (b) => (b.poolCounts?.jobsHit ?? 0) >= 48);
  expect(counted.poolCounts).toEqual({ loads: 4, evictions: 0, jobsHit: 48, jobsMiss: 0 });
}, 240_000);

it('warms a model it held before in one batch, from the profile kept beside the cached model', async () => {
  const { id } = (await beatOf(servingWorker)) as HeartbeatPayload;
  const prefix = stack.config.queuePrefix;
  await sendHoldings(redis, prefix, id, refs(['pw-1', 'pw-2', 'pw-3']));
  await waitForBeat(servingWorker, 'pw-0 gone', (b) => modelIn(b, 'pw-0') === undefined);

  // Queued while no worker holds its model: a miss, served once the model is back (row 100: no
  // earlier job had its inputs, so the API's result cache cannot answer it).
  const job = await submitRow('pw-0', 100);
  await askLoad(redis, prefix, id, { model: 'pw-0', version: '1' });
  const beat = await waitForBeat(servingWorker, 'pw-0 back', (b) => modelIn(b, 'pw-0')?.state === 'active');
  const back = modelIn(beat, 'pw-0') as PoolModelView;
  expect(back.cacheHit).toBe(true);
  expect(back.warmup).toEqual({ reused: true, runs: 1, batchesMeasured: 0 });
  console.info(`[figures] pw-0 seen before: loadMs=${back.loadMs} residentBytes=${back.residentBytes}`);
  const done = await waitForJob(stack, job as string, 60_000);
  expect((done.outputs as Array<{ data: number[] }>)[0]?.data[0]).toBeCloseTo(await expectedScore('pw-0', 100), 5);

  // The pool's metrics, through the API's /metrics: five loads, one of them from the cache with its
  // profile; 48 hits from the first test and this one miss; four models resident on this worker.
  const series = (text: string, name: string, labels: string) =>
    [...text.matchAll(new RegExp(`^${name}\\{[^}]*${labels}[^}]*\\} ([\\d.]+)$`, 'gm'))].reduce((sum, m) => sum + Number(m[1]), 0);
  const metrics = await until('the pool metrics', async () => {
    const text = await (await stack.call('/metrics')).text();
    return series(text, 'warmpool_pool_jobs_total', 'resident="miss"') === 1 ? text : undefined;
  });
  expect(series(metrics, 'warmpool_pool_jobs_total', 'resident="hit"')).toBe(48);
  expect(series(metrics, 'warmpool_pool_model_loads_total', 'outcome="loaded"')).toBe(5);
  expect(series(metrics, 'warmpool_pool_model_load_seconds_count', 'profile="reused"')).toBe(1);
  expect(series(metrics, 'warmpool_pool_model_evictions_total', 'reason="unwanted"')).toBe(1);
  expect(series(metrics, 'warmpool_pool_models_resident', `worker="${id}"`)).toBe(4);
}, 120_000);

it('told to drop a model with jobs in flight, finishes them first and takes no more', async () => {
  const { id } = (await beatOf(servingWorker)) as HeartbeatPayload;
  const prefix = stack.config.queuePrefix;
  await askLoad(redis, prefix, id, { model: 'pw-slow', version: '1' });
  await waitForBeat(servingWorker, 'pw-slow active', (b) => modelIn(b, 'pw-slow')?.state === 'active');
  const submitted = Date.now();
  // Watched while they are submitted: the first entries run long before the 200 are all in on a
  // slow host, and the API may coalesce them into a few entries, so what is looked for is an entry
  // running, not one done beside one running.
  const submitting = stack.submitMany('pw-slow', 200, { features: 256, rows: 4 });
  submitting.catch(() => undefined); // awaited below; a failure before then is not unhandled
  // Watched while the rest goes on: a beat from while it serves them shows its inference thread busy.
  const busy = waitForBeat(servingWorker, 'busy serving pw-slow', (b) => b.updatedAt > submitted && (b.busyFraction ?? 0) > 0);
  busy.catch(() => undefined); // awaited at the end; a failure before then is not unhandled
  const held = await stack.withQueue('pw-slow', '1', (queue) =>
    until('a pw-slow entry running', async () => {
      const running = await queue.getActive();
      return running.length > 0 ? running.map((j) => j.id as string) : undefined;
    }),
  );
  const ids = await submitting;

  await sendHoldings(redis, prefix, id, refs(['pw-1', 'pw-2', 'pw-3']));
  await waitForBeat(servingWorker, 'pw-slow gone', (b) => modelIn(b, 'pw-slow') === undefined);
  await stack.withQueue('pw-slow', '1', async (queue) => {
    // Every entry it held when told finished; none failed.
    const states = await Promise.all((await held).map((jobId) => queue.getJobState(jobId)));
    expect(states.every((s) => s === 'completed')).toBe(true);
    const c = await queue.getJobCounts('active', 'failed');
    expect(c.active).toBe(0);
    expect(c.failed).toBe(0);
  });
  // And it takes no more: a job queued now (5 rows: no cached answer) is still queued after a beat
  // from after it. (The 200 may all have been held when it was told: the API coalesces them into
  // a few entries, the fewer the slower the host.)
  const [late] = await stack.submitMany('pw-slow', 1, { features: 256, rows: 5 });
  const queuedAt = Date.now();
  await waitForBeat(servingWorker, 'a beat after the late job', (b) => b.updatedAt > queuedAt + 100);
  expect(((await (await stack.call(`/v1/jobs/${late}`)).json()) as { status: string }).status).toBe('queued');
  // The other models still serve.
  const [job] = await stack.submitMany('pw-3', 1, { features: F });
  expect((await waitForJob(stack, job as string, 60_000)).status).toBe('succeeded');
  expect(ids.length).toBe(200);
  const serving = await busy;
  console.info(`[figures] serving pw-slow: busyFraction=${serving.busyFraction} rowsPerS=${serving.rowsPerS}`);
  expect(serving.busyFraction).toBeLessThanOrEqual(1);
}, 240_000);

it('drains on SIGTERM: every model stops fetching, the jobs held finish, and it exits 0', async () => {
  const { id } = (await beatOf(servingWorker)) as HeartbeatPayload;
  // Slow jobs of its own, queued before the model loads, so some are held when the SIGTERM comes
  // however fast the worker is (what the last test left in pw-slow's queue may all be done before
  // anyone looks). The probe for held jobs runs from before the load: a worker that clears the
  // queue before a heartbeat says the model is active would otherwise leave none to see.
  // Rows no earlier job had: the API's result cache would answer repeats without queuing them.
  await Promise.all(Array.from({ length: 200 }, (_, i) => submitRow('pw-slow', 2000 + i, 256, 4)));
  const held = stack.withQueue('pw-slow', '1', (queue) =>
    until('pw-slow held', async () => {
      const running = await queue.getActive();
      return running.length > 0 ? running.map((j) => j.id as string) : undefined;
    }),
  );
  await askLoad(redis, stack.config.queuePrefix, id, { model: 'pw-slow', version: '1' });
  await held;
  const exited = new Promise<number | null>((resolve) => servingWorker.once('exit', (code) => resolve(code)));
  servingWorker.kill('SIGTERM');
  expect(await exited).toBe(0);
  await stack.withQueue('pw-slow', '1', async (queue) => {
    const states = await Promise.all((await held).map((jobId) => queue.getJobState(jobId)));
    expect(states.every((s) => s === 'completed')).toBe(true);
    const c = await queue.getJobCounts('active', 'failed');
    expect(c).toEqual({ active: 0, failed: 0 });
  });
}, 120_000);

it('SIGKILLed holding several models mid-traffic, loses no job: another pool worker finishes them', async () => {
  const prefix = stack.config.queuePrefix;
  const names = ['pw-1', 'pw-2', 'pw-3', 'pw-slow'];
  const first = startPoolWorker(1024);
  const { id } = await waitForBeat(first, 'standby', (b) => b.state === 'standby');
  await sendHoldings(redis, prefix, id, refs(names));
  await waitForBeat(first, 'four models active', (b) => active(b).length === 4);
  // Rows no earlier job had (the API's result cache answers none of them).
  const rows = Array.from({ length: 20 }, (_, i) => 300 + i);
  const quick = await Promise.all(
    ['pw-1', 'pw-2', 'pw-3'].flatMap((model) => rows.map(async (i) => ({ model, i, id: await submitRow(model, i) }))),
  );
  const slow = await Promise.all(rows.map((i) => submitRow('pw-slow', 1000 + i, 256, 4)));
  await stack.withQueue('pw-slow', '1', (queue) =>
    until('pw-slow held', async () => ((await queue.getActive()).length > 0 ? true : undefined)),
  );
  const killed = new Promise((resolve) => first.once('exit', resolve));
  first.kill('SIGKILL');
  await killed;

  const second = startPoolWorker(1024);
  const next = await waitForBeat(second, 'standby', (b) => b.state === 'standby');
  await sendHoldings(redis, prefix, next.id, refs(names));
  for (const job of quick) {
    const done = await waitForJob(stack, job.id, 120_000);
    expect(done.status).toBe('succeeded');
    expect((done.outputs as Array<{ data: number[] }>)[0]?.data[0]).toBeCloseTo(await expectedScore(job.model, job.i), 5);
  }
  const slowDone = await Promise.all(slow.map((jobId) => waitForJob(stack, jobId, 120_000)));
  expect(slowDone.map((j) => j.status)).toEqual(slow.map(() => 'succeeded'));
  await stopChild(second);
}, 240_000);

it('within a budget that fits about 5 of 10 models, evicts instead of growing', async () => {
  // One model's measured footprint first, on a worker with room to spare (this also fills the disk cache).
  const probe = startPoolWorker(4096);
  const probeBeat = await waitForBeat(probe, 'standby', (b) => b.state === 'standby');
  await sendHoldings(redis, stack.config.queuePrefix, probeBeat.id, refs(['mem-0']));
  const measured = modelIn(await waitForBeat(probe, 'mem-0 active', (b) => modelIn(b, 'mem-0')?.state === 'active'), 'mem-0');
  const perModel = measured?.residentBytes ?? 0;
  expect(perModel).toBeGreaterThanOrEqual(LARGE[0]?.byteLength ?? 0);
  await stopChild(probe);

  const budgetBytes = Math.round(5.5 * perModel);
  const worker = startPoolWorker(budgetBytes / MB);
  const standby = await waitForBeat(worker, 'standby', (b) => b.state === 'standby');
  const standbyRss = procRss(worker.pid as number);
  const names = LARGE.map((_, i) => `mem-${i}`);
  // The first model also pays the process's first use of serving (code compiled, heaps grown): the baseline is one model held.
  await askLoad(redis, stack.config.queuePrefix, standby.id, { model: 'mem-0', version: '1' });
  await waitForBeat(worker, 'mem-0 active', (b) => modelIn(b, 'mem-0')?.state === 'active');
  const baseline = procRss(worker.pid as number);
  // One at a time, as placement asks (askLoad also brings back one it evicted), three times round:
  // each load has to make room for itself once the budget is full.
  const rounds: number[] = [];
  const loads: string[] = [];
  for (let round = 0; round < 3; round++) {
    for (const name of names) {
      await askLoad(redis, stack.config.queuePrefix, standby.id, { model: name, version: '1' });
      const loaded = modelIn(await waitForBeat(worker, `${name} active`, (b) => modelIn(b, name)?.state === 'active'), name);
      loads.push(`${round}:${loaded?.cacheHit ? 'cached' : 'cold'}${loaded?.warmup?.reused ? '+profile' : ''}=${loaded?.loadMs}`);
    }
    rounds.push(procRss(worker.pid as number) - baseline);
  }
  console.info(`[figures] growth by round ${rounds.join(' ')}; loads ${loads.join(' ')}`);
  const beat = await waitForBeat(worker, 'evictions settled', (b) => !(b.models ?? []).some((m) => m.state === 'draining'));
  const resident = active(beat);
  console.info(`[figures] measured ${resident.map((m) => `${m.model}=${m.residentBytes}`).join(' ')} file=${LARGE[0]?.byteLength}`);
  const residentBytes = resident.reduce((sum, m) => sum + m.residentBytes, 0);
  const rss = procRss(worker.pid as number);
  console.info(
    `[figures] budget=${budgetBytes} perModel=${perModel} resident=${resident.length} residentBytes=${residentBytes} ` +
      `standbyRss=${standbyRss} baselineRss=${baseline} rss=${rss} growth=${rss - baseline} heap=${beat.memory.heapUsedBytes} standbyHeap=${standby.memory.heapUsedBytes}`,
  );
  expect(resident.length).toBeGreaterThanOrEqual(4);
  expect(resident.length).toBeLessThanOrEqual(6);
  expect(residentBytes).toBeLessThanOrEqual(budgetBytes);
  expect((beat.models ?? []).filter((m) => m.state === 'evicted').length).toBe(10 - resident.length);
  // The newest are the ones it kept: least recently used went first.
  expect(resident.map((m) => m.model).sort()).toEqual(names.slice(10 - resident.length).sort());
  // Measured from outside, over the one-model baseline: holding all ten would add 9 × perModel. It
  // adds what the budget allows and some allocator slack, and a third round adds nothing to the second.
  expect(rss - baseline).toBeLessThan(budgetBytes + 2 * perModel);
  expect(rss - baseline).toBeLessThan(9 * perModel);
  expect((rounds[2] as number) - (rounds[1] as number)).toBeLessThan(perModel);
}, 300_000);
