/**
 * Dedup and degradation (issue 3 §7) through the whole stack: the API in-process, real worker
 * processes, real Redis and S3. A repeated request is answered from the result cache with no
 * model run (BullMQ never sees it); identical rows of concurrent jobs run once per forward
 * pass; under overload a degradable request is served by the deployment's fallback model.
 */
import { Queue } from 'bullmq';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queueName } from '../infra/contracts/job.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { locateMember } from './support/entries.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const F = 8;
const scorer = buildMlpModel({ features: F, hidden: 16, layers: 1, seed: 1 });
const lite = buildMlpModel({ features: F, hidden: 4, layers: 1, seed: 2 });
// Slow enough per pass that jobs arriving during one pile up for the next.
const twin = buildMlpModel({ features: F, hidden: 512, layers: 6, seed: 3 });
let stack: TestStack;
let redis: ReturnType<typeof createRedis>;

const row = (seed: number) => Array.from({ length: F }, (_, k) => Math.round(Math.cos(seed * 3 + k) * 1000) / 1000);
const request = (values: number[], extra: Record<string, unknown> = {}) => ({
  inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: values }],
  ...extra,
});

type JobBody = { id: string; model: string; version: string; status: string; cached?: boolean; outputs?: unknown; timings?: unknown };

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return stack.call(path, { method: 'POST', body: JSON.stringify(body), headers });
}

async function submit(model: string, body: unknown, headers: Record<string, string> = {}): Promise<JobBody> {
  const res = await post(`/v1/models/${model}/jobs`, body, headers);
  expect(res.status).toBe(202);
  return (await res.json()) as JobBody;
}

async function job(id: string): Promise<JobBody> {
  return (await (await stack.call(`/v1/jobs/${id}`)).json()) as JobBody;
}

/** The queue entry (a BullMQ job) of `model`@`version` carrying request `id`, if any, and the queue's BullMQ job counts. */
async function inQueue(model: string, version: string, id: string) {
  const queue = new Queue(queueName(model, version), { connection: redis, prefix: stack.config.queuePrefix });
  try {
    const at = await locateMember(redis, stack.config.queuePrefix, id);
    const entry = at?.queue === queue.name ? await queue.getJob(at.entryId) : undefined;
    const carries = (entry?.data as { members?: Array<{ id: string }> } | undefined)?.members?.some((m) => m.id === id);
    return { job: carries ? entry : undefined, counts: await queue.getJobCounts('completed', 'waiting', 'prioritized', 'active') };
  } finally {
    await queue.close();
  }
}

/** A worker series from /metrics (workers publish with each heartbeat): polls until `until` holds. */
async function metric(pattern: RegExp, until: (v: number) => boolean): Promise<number> {
  let value = Number.NaN;
  for (let tries = 0; tries < 200; tries++) {
    const text = await (await stack.call('/metrics')).text(); // tenant-a's key: an admin tenant may read /metrics
    value = Number(pattern.exec(text)?.[1]);
    if (until(value)) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  return value;
}

const processed = (model: string) =>
  new RegExp(`warmpool_jobs_processed_total\\{[^}]*model="${model}"[^}]*outcome="succeeded"[^}]*\\} (\\d+)`);

async function reference(bytes: Uint8Array, values: number[]): Promise<number> {
  const session = await ort.InferenceSession.create(bytes);
  try {
    const out = await session.run({ features: new ort.Tensor('float32', Float32Array.from(values), [1, F]) });
    return (out.score!.data as Float32Array)[0] as number;
  } finally {
    await session.release();
  }
}

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300' });
  redis = createRedis(stack.config.redisUrl);
  const publish = (name: string, version: string, bytes: Uint8Array) => stack.registry.publish({ name, version, bytes, maxBatch: 32 });
  await publish('scorer', '1', scorer);
  await publish('scorer', '2', buildMlpModel({ features: F, hidden: 16, layers: 1, seed: 9 }));
  await publish('lite', '1', lite);
  await publish('twin', '1', twin);
  await publish('primary', '1', scorer);
  await publish('wide', '1', buildMlpModel({ features: F + 4, hidden: 4, layers: 1 }));
  // Version 2 is listed without traffic: jobs that name it are taken (and wait: no worker serves it).
  const versions = [
    { version: '1', weight: 100 },
    { version: '2', weight: 0 },
  ];
  await stack.deployments.put({ model: 'scorer', versions, min: 1, max: 1, standby: 0 });
  // Twin's jobs are queued before its worker starts: deployed (min 0, no scaler here) so they are taken.
  await stack.deployments.put({ model: 'twin', version: '1', min: 0, max: 1, standby: 0 });
  await stack.startWorker('scorer', '1');
  await stack.startWorker('lite', '1');
  await stack.waitForWorkers('scorer', 'active');
  await stack.waitForWorkers('lite', 'active');
}, 180_000);

afterAll(async () => {
  if (redis) await closeRedis(redis);
  await stack?.close();
});

describe('result cache', () => {
  it('answers a repeated request without running the model: async, sync, idempotent; opt-out runs it', async () => {
    const values = row(1);
    const first = await waitForJob(stack, (await submit('scorer', request(values))).id);
    expect(first).toMatchObject({ status: 'succeeded' });
    expect(first).not.toHaveProperty('cached');
    expect((first.outputs as Array<{ data: number[] }>)[0]?.data[0]).toBeCloseTo(await reference(scorer, values), 5);

    const repeat = await submit('scorer', request(values));
    expect(repeat).toMatchObject({ model: 'scorer', version: '1', status: 'succeeded', cached: true });
    const cached = await job(repeat.id);
    expect(cached).toMatchObject({ status: 'succeeded', cached: true, timings: { queueMs: 0, inferMs: 0, batchRows: 0 } });
    expect(cached.outputs).toEqual(first.outputs);
    expect(cached).toHaveProperty('startedAt');
    expect(cached).toHaveProperty('finishedAt');
    // BullMQ never saw it: no job under that id, and the queue completed only the first.
    const seen = await inQueue('scorer', '1', repeat.id);
    expect(seen.job).toBeUndefined();
    expect(seen.counts.completed).toBe(1);

    const sync = await post('/v2/models/scorer/infer', request(values, { id: 'again' }));
    expect(sync.status).toBe(200);
    expect(await sync.json()).toMatchObject({ model_name: 'scorer', model_version: '1', id: 'again', outputs: first.outputs });

    const once = await submit('scorer', request(values), { 'Idempotency-Key': 'cache-1' });
    const replay = await post('/v1/models/scorer/jobs', request(values), { 'Idempotency-Key': 'cache-1' });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(((await replay.json()) as JobBody).id).toBe(once.id);
    expect(await job(once.id)).toMatchObject({ status: 'succeeded', cached: true });

    const optedOut = await waitForJob(stack, (await submit('scorer', request(values, { cache: false }))).id);
    expect(optedOut).toMatchObject({ status: 'succeeded', outputs: first.outputs });
    expect(optedOut).not.toHaveProperty('cached');
    expect((await inQueue('scorer', '1', optedOut.id as string)).counts.completed).toBe(2);
    // The worker ran exactly the first job and the opted-out one.
    expect(await metric(processed('scorer'), (v) => v >= 2)).toBe(2);
    // The arrival history (the forecaster's input) has those two; the cache's three answers are
    // counted apart, for the dashboard, never as arrivals a worker must be there for.
    const history = createArrivalHistory(redis, stack.config.queuePrefix, systemClock);
    const total = async (read: typeof history.series) =>
      (await read('scorer', Date.now() - 5 * 60_000, Date.now())).perMinute.reduce((a, b) => a + b, 0);
    await expect.poll(() => total(history.cached), { timeout: 10_000 }).toBe(3);
    expect(await total(history.series)).toBe(2);
  });

  it('misses for another version of the model', async () => {
    const values = row(2);
    await waitForJob(stack, (await submit('scorer', request(values))).id);
    expect((await job((await submit('scorer', request(values))).id)).cached).toBe(true);
    const v2 = await submit('scorer', request(values, { version: '2' }));
    expect(v2.version).toBe('2');
    const view = await job(v2.id);
    expect(view.status).toBe('queued'); // no worker serves version 2
    expect(view).not.toHaveProperty('cached');
    expect((await inQueue('scorer', '2', v2.id)).job).toBeDefined();
    expect((await stack.call(`/v1/jobs/${v2.id}`, { method: 'DELETE' })).status).toBe(200);
  });
});

describe('request collapsing', () => {
  it('20 identical concurrent single-row jobs take fewer engine rows than jobs, and all get the answer', async () => {
    const values = row(3);
    // Queued before the worker exists (cache off, so each one must reach the model): the
    // worker then takes them together and they share forward passes.
    const ids = await Promise.all(Array.from({ length: 20 }, async () => (await submit('twin', request(values, { cache: false }))).id));
    await stack.startWorker('twin', '1', { BATCH_MAX_WAIT_MS: '50' });
    const done = await Promise.all(ids.map((id) => waitForJob(stack, id)));
    const want = await reference(twin, values);
    for (const j of done) {
      expect(j.status).toBe('succeeded');
      expect((j.outputs as Array<{ data: number[] }>)[0]?.data[0]).toBeCloseTo(want, 5);
      expect(j.outputs).toEqual(done[0]?.outputs);
    }
    expect(await metric(processed('twin'), (v) => v >= 20)).toBe(20);
    const engineRows = await metric(/warmpool_batch_rows_sum\{[^}]*model="twin"[^}]*\} ([\d.]+)/, (v) => v > 0);
    expect(engineRows).toBeGreaterThanOrEqual(1);
    expect(engineRows).toBeLessThan(20);
  });
});

describe('fallback model under overload', () => {
  it('PUT /v1/deployments takes a fallback that must exist in the registry', async () => {
    const res = await stack.call('/v1/deployments/primary', {
      method: 'PUT',
      body: JSON.stringify({ version: '1', backlogMax: 2, fallback: { model: 'lite' } }),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ model: 'primary', backlogMax: 2, fallback: { model: 'lite' } });
    const missing = await stack.call('/v1/deployments/primary', { method: 'PUT', body: JSON.stringify({ fallback: { model: 'nope' } }) });
    expect(missing.status).toBe(422);
    const self = await stack.call('/v1/deployments/primary', { method: 'PUT', body: JSON.stringify({ fallback: { model: 'primary' } }) });
    expect(self.status).toBe(400);
  });

  it('past the bound: degradable → the fallback model serves it; not degradable → 503', async () => {
    for (let i = 0; i < 2; i++) await submit('primary', request(row(10 + i)));
    const refused = await post('/v1/models/primary/jobs', request(row(20)));
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('backlog_full');

    const values = row(21);
    const degraded = await submit('primary', request(values, { degradable: true }));
    expect(degraded).toMatchObject({ model: 'lite', version: '1' });
    expect((await inQueue('primary', '1', degraded.id)).job).toBeUndefined();
    const done = await waitForJob(stack, degraded.id);
    expect(done).toMatchObject({ status: 'succeeded', model: 'lite', version: '1' });
    expect((done.outputs as Array<{ data: number[] }>)[0]?.data[0]).toBeCloseTo(await reference(lite, values), 5);

    const sync = await post('/v2/models/primary/infer', request(row(22), { degradable: true }));
    expect(sync.status).toBe(200);
    expect(await sync.json()).toMatchObject({ model_name: 'lite', model_version: '1' });
  });

  it('422 fallback_incompatible when the request does not fit the fallback', async () => {
    const put = await stack.call('/v1/deployments/wide', {
      method: 'PUT',
      body: JSON.stringify({ version: '1', backlogMax: 1, fallback: { model: 'lite' } }),
    });
    expect(put.status).toBe(200);
    const wide = (seed: number) => ({
      inputs: [{ name: 'features', shape: [1, F + 4], datatype: 'FP32', data: [...row(seed), 0, 0, 0, 0] }],
    });
    await submit('wide', wide(30));
    const res = await post('/v1/models/wide/jobs', { ...wide(31), degradable: true });
    expect(res.status).toBe(422);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('fallback_incompatible');
    expect(error.message).toMatch(/fallback model lite version 1/);
  });
});
