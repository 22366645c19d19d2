/**
 * Placing a submission (the header of submit-job.ts): the result cache, admission and the
 * fallback model, on the real BullMQ job queue, result cache and idempotency store over the
 * test Redis. The registry and the deployment record are in-memory stand-ins for their ports.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { PRIORITIES } from '../../infra/contracts/job.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { packTensors } from '../../infra/contracts/packed-tensors.ts';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { createDemandBell } from '../../infra/fleet/pool-demand.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { InvalidInputError, NotFoundError, OverloadedError } from '../../infra/kernel/errors.ts';
import { type BullJobQueue, createBullJobQueue } from '../../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../../infra/redis/client.ts';
import { workerKey } from '../../infra/redis/keys.ts';
import { createOpenJobs } from '../../infra/redis/open-jobs.ts';
import { createResultCache, requestDigest } from '../../infra/redis/result-cache.ts';
import { memberEntry } from '../../test/support/entries.ts';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { createIdempotencyStore } from '../http/idempotency.ts';
import type { ModelCatalog } from '../ports.ts';
import { redisFleetView } from './fleet-view.ts';
import type { SubmitDeployment } from './job-target.ts';
import { type SubmitJobDeps, type SubmitJobInput, submitJob } from './submit-job.ts';

const redis = createRedis(testServices().redisUrl);
let prefix: string;
let jobs: BullJobQueue;
let deps: SubmitJobDeps;
let manifests: Map<string, ModelManifest>;
let deployments: Map<string, SubmitDeployment>;
let seq = 0;

function manifest(name: string, version: string, features = 4, sha = 'a'): ModelManifest {
  return {
    name,
    version,
    format: 'onnx',
    sha256: sha.repeat(64),
    sizeBytes: 100,
    inputs: [{ name: 'features', datatype: 'FP32', shape: [-1, features] }],
    outputs: [{ name: 'score', datatype: 'FP32', shape: [-1, 1] }],
    batching: { maxBatch: 8, warmupBatches: [1] },
    createdAt: '2024-01-01T00:00:00.000Z',
    labels: {},
  };
}

const catalog: ModelCatalog = {
  async getManifest(name, version) {
    const versions = [...manifests.values()].filter((m) => m.name === name);
    const found = version === undefined ? versions.at(-1) : versions.find((m) => m.version === version);
    if (!found) throw new NotFoundError(versions.length ? 'version_not_found' : 'model_not_found', `no ${name}@${version}`);
    return found;
  },
  async list() {
    return [];
  },
  async listVersions() {
    return [];
  },
};

const features = (values: number[]): OipTensor => ({ name: 'features', datatype: 'FP32', shape: [1, values.length], data: values });
const body = (values = [1, 2, 3, 4], extra: Record<string, unknown> = {}) => ({ inputs: [features(values)], ...extra });
const outputs: OipTensor[] = [{ name: 'score', datatype: 'FP32', shape: [1, 1], data: [0.75] }];

function submit(input: Partial<SubmitJobInput> & { body: unknown }) {
  return submitJob(deps, { tenant: 'tenant-a', model: 'scorer', kind: 'async', ...input });
}

/** Stores a result as a worker of `m` would after running `values` (all outputs asked for). */
async function remember(m: ModelManifest, values: number[]) {
  const cache = createResultCache(redis, { prefix });
  const input = Float32Array.from(values);
  const digest = requestDigest({
    tenant: 'tenant-a',
    modelSha256: m.sha256,
    tensors: [{ name: 'features', datatype: 'FP32', shape: [1, values.length], bytes: new Uint8Array(input.buffer) }],
  });
  const packed = packTensors(outputs.map((o) => ({ ...o, data: Float32Array.from(o.data as number[]) })));
  await cache.put(m.name, m.version, digest, { outputs: packed, workerId: 'w-1' });
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: unknown) => err,
  );
}

/**
 * The queued request `id` of model `model`, version `version`: its member record in the queue
 * entry that carries it, the entry's data and options; undefined when BullMQ holds no such request.
 */
async function queuedJob(model: string, version: string, id: string) {
  const held = await memberEntry(redis, prefix, id);
  if (!held) return undefined;
  expect(held.entry.data).toMatchObject({ model, version });
  return { member: held.member, data: held.entry.data, opts: held.entry.opts };
}

/** Fills a queue with `n` distinct jobs (nothing drains it in these tests). */
async function fill(model: string, version: string, n: number) {
  for (let i = 0; i < n; i++) await submit({ model, version, body: body([100 + i, 0, 0, 0], { cache: false }) });
}

beforeAll(() => {
  prefix = uniqueId('submit');
  jobs = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
});

beforeEach(async () => {
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  manifests = new Map(
    [manifest('scorer', '1'), manifest('scorer', '2'), manifest('lite', '1'), manifest('wide', '1', 8)].map((m) => [
      `${m.name}@${m.version}`,
      m,
    ]),
  );
  deployments = new Map();
  deps = {
    jobs,
    catalog,
    deployments: { get: async (model) => deployments.get(model) ?? null },
    clock: systemClock,
    newId: () => `job_t${++seq}`,
    idempotency: createIdempotencyStore(redis, { prefix, ttlS: 600 }),
    webhookAllowedPrivateHosts: ['127.0.0.1'],
  };
  deploy('scorer'); // version 1 of 2, so requests that name no version go to 1
});

afterAll(async () => {
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await jobs?.close();
  await closeRedis(redis);
});

function deploy(model: string, extra: Partial<SubmitDeployment> = {}) {
  deployments.set(model, { model, version: '1', versions: [{ version: '1', weight: 100 }], ...extra });
}

describe('result cache at submit', () => {
  it('answers a repeated request as a succeeded job without adding anything to BullMQ', async () => {
    await remember(manifests.get('scorer@1') as ModelManifest, [1, 2, 3, 4]);
    const job = await submit({ version: '1', body: body([1, 2, 3, 4], { outputs: [{ name: 'score' }] }) });
    // Requested outputs are part of the key: asking for "all" is another request.
    expect(job).not.toHaveProperty('cached');
    await jobs.cancel(job.id);

    const hit = await submit({ version: '1', body: body() });
    expect(hit).toMatchObject({ model: 'scorer', version: '1', cached: true, rows: 1 });
    expect(await queuedJob('scorer', '1', hit.id)).toBeUndefined();
    const view = await jobs.get(hit.id);
    expect(view).toMatchObject({
      id: hit.id,
      tenant: 'tenant-a',
      status: 'succeeded',
      cached: true,
      result: { outputs, timings: { queueMs: 0, inferMs: 0, batchRows: 0 } },
    });
    // What sync inference waits on resolves at once, and a finished job cannot be canceled.
    expect((await jobs.waitFor(hit.id, 60_000)).status).toBe('succeeded');
    expect((await jobs.cancel(hit.id))?.status).toBe('succeeded');
  });

  it('skips the lookup when the request opts out, and tells the worker not to store the result', async () => {
    await remember(manifests.get('scorer@1') as ModelManifest, [1, 2, 3, 4]);
    const job = await submit({ body: body([1, 2, 3, 4], { cache: false }) });
    expect(job).not.toHaveProperty('cached');
    // No digest: the worker has nowhere to store its result. A member that uses the cache carries one.
    const optedOut = await queuedJob('scorer', '1', job.id);
    expect(optedOut?.member).toBeDefined();
    expect(optedOut?.member).not.toHaveProperty('cacheDigest');
    const cached = await submit({ body: body([4, 3, 2, 1]) });
    expect((await queuedJob('scorer', '1', cached.id))?.member.cacheDigest).toMatch(/^[0-9a-f]{64}$/);
    const repeat = await submit({ body: body() });
    expect(repeat.cached).toBe(true);
    expect(await queuedJob('scorer', '1', repeat.id)).toBeUndefined();
  });

  it('skips the lookup for a job with a webhook (the dispatcher only hears of queued jobs)', async () => {
    await remember(manifests.get('scorer@1') as ModelManifest, [1, 2, 3, 4]);
    const job = await submit({ body: body([1, 2, 3, 4], { webhook: { url: 'http://127.0.0.1:9/hook' } }) });
    expect(job).not.toHaveProperty('cached');
    expect(await queuedJob('scorer', '1', job.id)).toBeDefined();
  });

  it('never answers from another version or other model bytes', async () => {
    deploy('scorer', {
      versions: [
        { version: '1', weight: 100 },
        { version: '2', weight: 0 },
      ],
    });
    await remember(manifests.get('scorer@1') as ModelManifest, [1, 2, 3, 4]);
    expect((await submit({ version: '1', body: body() })).cached).toBe(true);
    const v2 = await submit({ version: '2', body: body() });
    expect(v2).not.toHaveProperty('cached');
    expect(await queuedJob('scorer', '2', v2.id)).toBeDefined();

    manifests.set('scorer@1', manifest('scorer', '1', 4, 'b')); // version 1 re-published with other bytes
    const republished = await submit({ version: '1', body: body() });
    expect(republished).not.toHaveProperty('cached');
  });

  it('replays the same cached job for the same Idempotency-Key', async () => {
    await remember(manifests.get('scorer@1') as ModelManifest, [1, 2, 3, 4]);
    const first = await submit({ body: body(), idempotencyKey: 'k-1' });
    const again = await submit({ body: body(), idempotencyKey: 'k-1' });
    expect(first.cached).toBe(true);
    expect(again).toMatchObject({ id: first.id, cached: true, replayed: true });
    const conflict = await rejection(submit({ body: body([4, 3, 2, 1]), idempotencyKey: 'k-1' }));
    expect(conflict).toBeInstanceOf(InvalidInputError);
    expect((conflict as InvalidInputError).status).toBe(409);
  });

  it('answers a hit even while the backlog is full: a hit adds nothing to any queue', async () => {
    deploy('scorer', { backlogMax: 1 });
    await fill('scorer', '1', 1);
    await remember(manifests.get('scorer@1') as ModelManifest, [1, 2, 3, 4]);
    expect((await submit({ body: body() })).cached).toBe(true);
    expect(await rejection(submit({ body: body([9, 9, 9, 9]) }))).toBeInstanceOf(OverloadedError);
  });
});

describe('Idempotency-Key across a killed API', () => {
  /** deps whose commit never happens: the API died after placing the job, its claim left pending. */
  function killedAfterPlacing(): SubmitJobDeps {
    const store = deps.idempotency;
    return {
      ...deps,
      idempotency: {
        async claim(scope, key, fp, recover) {
          const claim = await store.claim(scope, key, fp, recover);
          if (claim.kind === 'replay') return claim;
          return { kind: 'new', release: claim.release, commit: async () => Promise.reject(new Error('killed before commit')) };
        },
      },
    };
  }

  const queued = () => jobs.depth('scorer', '1');

  it('a retry while the dead claim is pending finds the job it placed', async () => {
    const placed = rejection(
      submitJob(killedAfterPlacing(), {
        tenant: 'tenant-a',
        model: 'scorer',
        kind: 'async',
        body: body([5, 6, 7, 8], { cache: false }),
        idempotencyKey: 'k-dead',
      }),
    );
    expect(await placed).toMatchObject({ message: 'killed before commit' });
    const retry = await submit({ body: body([5, 6, 7, 8], { cache: false }), idempotencyKey: 'k-dead' });
    expect(retry.replayed).toBe(true);
    expect(await queuedJob('scorer', '1', retry.id)).toBeDefined();
    expect(await queued()).toBe(1);
  });

  it('a retry after the dead claim expired adopts the job instead of placing a second', async () => {
    await rejection(
      submitJob(killedAfterPlacing(), {
        tenant: 'tenant-a',
        model: 'scorer',
        kind: 'async',
        body: body([5, 6, 7, 9], { cache: false }),
        idempotencyKey: 'k-expired',
      }),
    );
    for await (const keys of scanKeys(redis, `${prefix}:idem:*`)) await deleteMany(redis, keys); // the 60 s pending TTL, passed
    const retry = await submit({ body: body([5, 6, 7, 9], { cache: false }), idempotencyKey: 'k-expired' });
    expect(await queuedJob('scorer', '1', retry.id)).toBeDefined();
    expect(await queued()).toBe(1);
    // Adopted and committed: the next retry is a plain replay of it.
    expect(await submit({ body: body([5, 6, 7, 9], { cache: false }), idempotencyKey: 'k-expired' })).toMatchObject({
      id: retry.id,
      replayed: true,
    });
    // Another tenant's same key and body is its own job.
    const other = await submit({ tenant: 'tenant-b', body: body([5, 6, 7, 9], { cache: false }), idempotencyKey: 'k-expired' });
    expect(other.id).not.toBe(retry.id);
    expect(await queued()).toBe(2);
  });
});

describe('fallback under overload', () => {
  it('sends a degradable request over the bound to the fallback queue; a plain one gets 503', async () => {
    deploy('scorer', { backlogMax: 2, fallback: { model: 'lite' } });
    deploy('lite');
    await fill('scorer', '1', 2);
    const refused = await rejection(submit({ body: body() }));
    expect(refused).toBeInstanceOf(OverloadedError);
    expect((refused as OverloadedError).message).toMatch(/"degradable": true to be served by its fallback model/);

    const degraded = await submit({ body: body([1, 2, 3, 4], { degradable: true, priority: 'high' }) });
    expect(degraded).toMatchObject({ model: 'lite', version: '1', fallbackFor: { model: 'scorer', version: '1' } });
    const queued = await queuedJob('lite', '1', degraded.id);
    expect(queued?.data).toMatchObject({ model: 'lite', version: '1' });
    expect(queued?.opts.priority).toBe(PRIORITIES.high); // the request's own priority, not low
    expect(await jobs.depth('scorer', '1')).toBe(2);
  });

  it('pins the fallback version when the deployment names one', async () => {
    manifests.set('lite@2', manifest('lite', '2'));
    deploy('scorer', { backlogMax: 1, fallback: { model: 'lite', version: '1' } });
    deploy('lite', {
      versions: [
        { version: '2', weight: 100 },
        { version: '1', weight: 0 },
      ],
    });
    await fill('scorer', '1', 1);
    expect(await submit({ body: body([1, 2, 3, 4], { degradable: true }) })).toMatchObject({ model: 'lite', version: '1' });
  });

  it('without a fallback, keeps queueing degradable requests at low priority', async () => {
    deploy('scorer', { backlogMax: 1 });
    await fill('scorer', '1', 1);
    const job = await submit({ body: body([1, 2, 3, 4], { degradable: true }) });
    expect(job).toMatchObject({ model: 'scorer', version: '1' });
    expect((await queuedJob('scorer', '1', job.id))?.opts.priority).toBe(PRIORITIES.low);
  });

  it('treats a fallback missing from the registry as no fallback', async () => {
    deploy('scorer', { backlogMax: 1, fallback: { model: 'gone' } });
    await fill('scorer', '1', 1);
    expect(await submit({ body: body([1, 2, 3, 4], { degradable: true }) })).toMatchObject({ model: 'scorer' });
  });

  it('treats a fallback nothing serves as no fallback: the job would never run there', async () => {
    deploy('scorer', { backlogMax: 1, fallback: { model: 'lite' } }); // lite is published, not deployed
    await fill('scorer', '1', 1);
    const job = await submit({ body: body([1, 2, 3, 4], { degradable: true }) });
    expect(job).toMatchObject({ model: 'scorer', version: '1' });
    expect((await queuedJob('scorer', '1', job.id))?.opts.priority).toBe(PRIORITIES.low);
    expect(await jobs.depth('lite', '1')).toBe(0);
  });

  it('answers 422 fallback_incompatible when the request does not fit the fallback', async () => {
    deploy('scorer', { backlogMax: 1, fallback: { model: 'wide' } });
    deploy('wide');
    await fill('scorer', '1', 1);
    const err = await rejection(submit({ body: body([1, 2, 3, 4], { degradable: true }) }));
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err).toMatchObject({ code: 'fallback_incompatible', status: 422 });
    expect((err as Error).message).toMatch(/fallback model wide version 1.*features.*8/);
    expect(await jobs.depth('wide', '1')).toBe(0);
  });

  it("holds the fallback's own bound strictly", async () => {
    deploy('scorer', { backlogMax: 1, fallback: { model: 'lite' } });
    deploy('lite', { backlogMax: 1 });
    await fill('scorer', '1', 1);
    await fill('lite', '1', 1);
    const err = await rejection(submit({ body: body([1, 2, 3, 4], { degradable: true }) }));
    expect(err).toBeInstanceOf(OverloadedError);
    expect((err as Error).message).toMatch(/and so is its fallback lite/);
  });

  it("answers a degraded request from the fallback's cache entry", async () => {
    deploy('scorer', { backlogMax: 1, fallback: { model: 'lite' } });
    deploy('lite');
    await fill('scorer', '1', 1);
    await remember(manifests.get('lite@1') as ModelManifest, [1, 2, 3, 4]);
    const job = await submit({ body: body([1, 2, 3, 4], { degradable: true }) });
    expect(job).toMatchObject({ model: 'lite', cached: true, fallbackFor: { model: 'scorer', version: '1' } });
    expect(await jobs.depth('lite', '1')).toBe(0);
  });
});

describe('what serves a job (serving-check.ts)', () => {
  /** A worker's heartbeat as worker/heartbeat.ts writes it, on the real Redis the fleet view scans. */
  async function heartbeat(model: string, version: string, state: WorkerState) {
    const id = `w-${uniqueId('hb')}`;
    const payload = { id, model, version, state, pid: 1, host: 'h', startedAt: 0, updatedAt: 0, rowsPerS: 0, jobsInFlight: 0 };
    await redis.set(workerKey(prefix, id), JSON.stringify(payload), 'PX', 60_000);
  }

  it('refuses a published model with no deployment: 409 model_not_deployed naming the fix; nothing is queued', async () => {
    deployments.clear();
    for (const kind of ['async', 'sync'] as const) {
      const err = await rejection(submit({ kind, body: body() }));
      expect(err).toBeInstanceOf(InvalidInputError);
      expect(err).toMatchObject({
        status: 409,
        code: 'model_not_deployed',
        message: 'model scorer is published but not deployed: run `warmpool deploy scorer` (or PUT /v1/deployments/scorer)',
      });
    }
    expect(await jobs.depth('scorer', '2')).toBe(0);
    // Unknown everywhere stays 404; a bad body is still the body's fault first.
    expect(await rejection(submit({ model: 'ghost', body: body() }))).toBeInstanceOf(NotFoundError);
    expect(await rejection(submit({ body: body([1, 2]) }))).toMatchObject({ code: 'shape_mismatch' });
  });

  it('refuses a version the deployment does not list, naming what it serves', async () => {
    const err = await rejection(submit({ version: '2', body: body() }));
    expect(err).toMatchObject({
      status: 409,
      code: 'model_not_deployed',
      message:
        'version 2 of model scorer is published but not deployed (its deployment serves 1): send no version, or run `warmpool deploy scorer --version 2` (or PUT /v1/deployments/scorer)',
    });
  });

  it('accepts a deployment whose min is 0 (the scaler starts a worker) without reading the fleet', async () => {
    deploy('scorer', { min: 0 });
    let asked = 0;
    deps.fleet = {
      async workers() {
        asked++;
        return [];
      },
    };
    expect(await submit({ body: body([1, 0, 0, 0], { cache: false }) })).toMatchObject({ model: 'scorer', version: '1' });
    expect(asked).toBe(0);
  });

  it('accepts a version no deployment lists while a live worker of it heartbeats (a hand-started worker)', async () => {
    deps.fleet = redisFleetView(redis, prefix, systemClock);
    const refused = await rejection(submit({ version: '2', body: body() }));
    expect(refused).toMatchObject({ code: 'model_not_deployed' });
    await heartbeat('scorer', '2', 'draining'); // on its way out: serves nothing new
    await heartbeat('scorer', '1', 'active'); // another version
    deps.fleet = redisFleetView(redis, prefix, systemClock); // a fresh view: the last one holds its read for a second
    expect(await rejection(submit({ version: '2', body: body() }))).toMatchObject({ code: 'model_not_deployed' });
    await heartbeat('scorer', '2', 'warming');
    deps.fleet = redisFleetView(redis, prefix, systemClock);
    const job = await submit({ version: '2', body: body([2, 0, 0, 0], { cache: false }) });
    expect(job).toMatchObject({ model: 'scorer', version: '2' });
    expect(await queuedJob('scorer', '2', job.id)).toBeDefined();
  });

  it('queues a job for a shared pool member that no worker holds, then rings its pool once a second', async () => {
    deploy('scorer', { pool: 'tail', min: 0 });
    deps.fleet = redisFleetView(redis, prefix, systemClock); // no worker at all
    const rings: string[] = [];
    let now = 1_000_000;
    const publish = async (_channel: string, message: string) => {
      rings.push(message);
    };
    deps.poolDemand = createDemandBell({ publish }, prefix, { now: () => now });
    const first = await submit({ body: body([3, 0, 0, 0], { cache: false }) });
    expect(await queuedJob('scorer', '1', first.id)).toBeDefined();
    await submit({ body: body([4, 0, 0, 0], { cache: false }) });
    now += 1_000;
    await submit({ body: body([5, 0, 0, 0], { cache: false }) });
    expect(rings.map((r) => JSON.parse(r))).toEqual([
      { pool: 'tail', model: 'scorer', version: '1', at: 1_000_000 },
      { pool: 'tail', model: 'scorer', version: '1', at: 1_001_000 },
    ]);
    // A model of its own pool rings nothing.
    deploy('scorer');
    await submit({ body: body([6, 0, 0, 0], { cache: false }) });
    expect(rings).toHaveLength(2);
  });
});

describe('strict bodies', () => {
  it('refuses an unknown top-level field with 400 unknown_field before anything else is read', async () => {
    deployments.clear(); // not even the deployment is asked
    const err = await rejection(submit({ model: 'ghost', body: body([1, 2, 3, 4], { webhookUrl: 'https://example.com/' }) }));
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err).toMatchObject({
      status: 400,
      code: 'unknown_field',
      message: '"webhookUrl" is not a field of a job request; did you mean "webhook"?',
    });
  });

  it('keeps parameters and tensor-level fields open (the OIP lets clients extend them)', async () => {
    const inputs = [{ ...features([1, 2, 3, 4]), parameters: { mine: 1, nested: { ok: true } } }];
    const job = await submit({ body: { inputs, parameters: { sequence_id: 7, custom: { a: 1 } }, cache: false } });
    expect(job.id).toMatch(/^job_/);
  });
});

describe('what a job stores, and how many a tenant may hold', () => {
  it('keeps neither parameters nor the OIP id with the queued job; the id still comes back to the caller', async () => {
    const job = await submit({ body: body([1, 2, 3, 4], { cache: false, parameters: { note: 'n' }, id: 'req-9' }) });
    expect(job.requestId).toBe('req-9');
    const queued = await queuedJob('scorer', '1', job.id);
    expect(queued).toBeDefined();
    for (const stored of [queued?.data, queued?.member, ...(queued?.data.inputs ?? [])]) {
      expect(stored).not.toHaveProperty('parameters');
      expect(stored).not.toHaveProperty('requestId');
    }
    expect(JSON.stringify(queued?.data)).not.toContain('req-9');
  });

  it('refuses a tenant past its open jobs with 429 too_many_open_jobs; a canceled job makes room', async () => {
    deps.openJobs = { store: createOpenJobs(redis, { prefix, horizonMs: 600_000, clock: systemClock }), maxPerTenant: 2 };
    const first = await submit({ body: body([1, 0, 0, 0], { cache: false }) });
    await submit({ body: body([2, 0, 0, 0], { cache: false }) });
    const err = await rejection(submit({ body: body([3, 0, 0, 0], { cache: false }) }));
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err).toMatchObject({ code: 'too_many_open_jobs', status: 429 });
    // Another tenant counts its own.
    expect((await submit({ tenant: 'tenant-b', body: body([3, 0, 0, 0], { cache: false }) })).id).toMatch(/^job_/);
    // A cache hit adds no job, so it is answered at the cap.
    await remember(manifests.get('scorer@1') as ModelManifest, [7, 7, 7, 7]);
    expect((await submit({ body: body([7, 7, 7, 7]) })).cached).toBe(true);
    // The job queue releases what it ends itself (here: a cancel).
    const withRelease = createBullJobQueue({
      connection: testServices().redisUrl,
      prefix,
      retentionS: 600,
      attempts: 1,
      openJobs: deps.openJobs.store,
    });
    try {
      expect((await withRelease.cancel(first.id))?.status).toBe('canceled');
    } finally {
      await withRelease.close();
    }
    expect((await submit({ body: body([3, 0, 0, 0], { cache: false }) })).id).toMatch(/^job_/);
  });

  it('counts a job whose enqueue failed as released', async () => {
    const store = createOpenJobs(redis, { prefix, horizonMs: 600_000, clock: systemClock });
    deps.openJobs = { store, maxPerTenant: 1 };
    deps.jobs = { ...jobs, enqueue: async () => Promise.reject(new Error('redis down')) };
    expect(await rejection(submit({ body: body([5, 0, 0, 0], { cache: false }) }))).toMatchObject({ message: 'redis down' });
    expect(await store.count('tenant-a')).toBe(0);
  });
});
