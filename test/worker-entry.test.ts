/**
 * Queue entries through a real worker (in-process, its ONNX Runtime session in a worker thread),
 * real Redis and S3: entries written as the API writes them (a BullMQ job named `entry`, its
 * packed inputs at `<p>:{q}:in:<entryId>`), and per member what infra/contracts/entry.ts
 * promises: outputs equal to ONNX Runtime's own for every datatype, a skipped member never
 * run, an expired one failed alone, a member ORT rejects failed alone, the inputs key deleted
 * once the entry completed, result-cache entries per member. An `infer` job an older API queued
 * is failed, never run (infra/contracts/queue-job.ts, the migration).
 */
import { Queue } from 'bullmq';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ENTRY_ID_PREFIX,
  ENTRY_JOB_NAME,
  type EntryData,
  type EntryMember,
  type EntryResult,
  type MemberOutcome,
} from '../infra/contracts/entry.ts';
import { queueName } from '../infra/contracts/job.ts';
import { DATATYPES, type Datatype } from '../infra/contracts/oip.ts';
import { aligned, packTensors, type TensorData, type TensorToPack, tensorData } from '../infra/contracts/packed-tensors.ts';
import { LEGACY_JOB_NAME, OUTDATED_JOB_FAILURE } from '../infra/contracts/queue-job.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { encodeHalf } from '../infra/kernel/half-float.ts';
import { type Log, silentLog } from '../infra/kernel/log.ts';
import { createBullJobQueue } from '../infra/queue/index.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { entryInputsKey, entryOutputsKey, entrySkipKey, jobIndexKey } from '../infra/redis/keys.ts';
import { createResultCache } from '../infra/redis/result-cache.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildDynamicAxisModel, buildEveryTypeModel, buildGatherModel, buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { INPUT_REJECTED } from '../worker/engine/rejections.ts';
import { createThreadEngine } from '../worker/engine/thread-engine.ts';
import { WarmpoolWorker } from '../worker/worker-process.ts';
import { testEnv, uniqueId } from './support/services.ts';
import { until } from './support/until.ts';

const RETENTION_S = 600;
/** Forward passes of at most 4 rows: entries of more rows span several. */
const MAX_ROWS = 4;
const config = loadConfig(
  testEnv({
    WARMUP_ITERATIONS: '1',
    BATCH_MAX_ROWS: String(MAX_ROWS),
    JOB_RETENTION_S: String(RETENTION_S),
    MAX_ROWS_PER_JOB: '50',
  }),
);
const prefix = config.queuePrefix;
const store = createS3ObjectStore(config.s3);
const registry = createModelRegistry({ store, prefix: config.s3.prefix });
const redis = createRedis(config.redisUrl);

// --- every datatype: Identity per datatype, FP32 [b,3] … BYTES [b,3] (buildEveryTypeModel) ---
const ORT_TYPE: Record<Datatype, ort.Tensor.Type> = {
  FP32: 'float32',
  UINT8: 'uint8',
  INT8: 'int8',
  UINT16: 'uint16',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  BYTES: 'string',
  BOOL: 'bool',
  FP16: 'float16',
  FP64: 'float64',
  UINT32: 'uint32',
  UINT64: 'uint64',
};

/** `rows` × 3 elements of `datatype`, distinct per `seed`, extremes included. */
function column(datatype: Datatype, rows: number, seed: number): TensorData {
  const n = rows * 3;
  const at = (k: number) => seed * 31 + k;
  switch (datatype) {
    case 'BYTES':
      return Array.from({ length: n }, (_, k) => (k % 3 === 0 ? '' : `r${at(k)}·é`));
    case 'BOOL':
      return Uint8Array.from({ length: n }, (_, k) => at(k) % 2);
    case 'FP16':
      return Uint16Array.from({ length: n }, (_, k) => encodeHalf(Math.sin(at(k)) * 100));
    case 'FP32':
      return Float32Array.from({ length: n }, (_, k) => (k === 0 ? -0 : Math.sin(at(k)) * 1e30));
    case 'FP64':
      return Float64Array.from({ length: n }, (_, k) => (k === 0 ? Number.MIN_VALUE : Math.sin(at(k)) * 1e300));
    case 'INT64':
      return BigInt64Array.from({ length: n }, (_, k) => (k === 0 ? -(2n ** 63n) : BigInt(at(k)) * 2n ** 40n + 1n));
    case 'UINT64':
      return BigUint64Array.from({ length: n }, (_, k) => (k === 0 ? 2n ** 64n - 1n : BigInt(at(k)) * 2n ** 53n + 1n));
    default: {
      const Ctor = { UINT8: Uint8Array, INT8: Int8Array, UINT16: Uint16Array, INT16: Int16Array, INT32: Int32Array, UINT32: Uint32Array }[
        datatype
      ] as Int32ArrayConstructor;
      // Wrapped to each type's range; -1 is an unsigned type's largest value.
      return Ctor.from({ length: n }, (_, k) => (k === 0 ? -1 : at(k) * 7919));
    }
  }
}

// --- workers, queues, entries ---
const workers = new Map<string, WarmpoolWorker>();
/** Rows each model's worker sent to ONNX Runtime (batch:flushed). */
const rowsRun = new Map<string, number>();
const rejections: Array<Record<string, unknown>> = [];
const references = new Map<string, ort.InferenceSession>();
const queues = new Map<string, Queue>();

/** A log that keeps what the worker says about ORT's rejections. */
const recording: Log = {
  ...silentLog,
  warn: (obj: unknown, msg?: string) => {
    if (msg === 'ONNX Runtime rejected a job') rejections.push(obj as Record<string, unknown>);
  },
  child: () => recording,
};

async function serve(model: string, bytes: Uint8Array, maxBatch = 8): Promise<void> {
  await registry.publish({ name: model, version: '1', bytes, maxBatch, warmupBatches: [1, MAX_ROWS] });
  references.set(model, await ort.InferenceSession.create(bytes));
  const worker = new WarmpoolWorker(
    { config, redis: createRedis(config.redisUrl), registry, engine: createThreadEngine(), clock: systemClock, log: recording },
    { model, version: '1' },
  );
  worker.on('batch:flushed', (e) => {
    rowsRun.set(model, (rowsRun.get(model) ?? 0) + e.rows);
  });
  await worker.start();
  workers.set(model, worker);
  queues.set(model, new Queue(queueName(model, '1'), { connection: redis, prefix }));
}

beforeAll(async () => {
  await serve('mlp', buildMlpModel({ features: 8, hidden: 16, layers: 2 }));
  await serve('every', buildEveryTypeModel());
  await serve('lookup', buildGatherModel());
  await serve('seq', buildDynamicAxisModel());
}, 180_000);

afterAll(async () => {
  for (const q of queues.values()) await q.close();
  for (const w of workers.values()) await w.close();
  for (const r of references.values()) await r.release();
  await closeRedis(redis);
  store.close();
});

interface MemberSpec {
  rows: number;
  /** How long ago it was submitted (ms). */
  agoMs?: number;
  timeoutMs?: number;
  cacheDigest?: string;
}

interface Written {
  entryId: string;
  ids: string[];
}

/** Writes an entry as the API does: packed inputs first, then the BullMQ job. */
async function addEntry(
  model: string,
  members: MemberSpec[],
  inputs: TensorToPack[],
  options: { skip?: number[]; outputs?: string[]; withoutInputs?: true } = {},
): Promise<Written> {
  const entryId = `${ENTRY_ID_PREFIX}${uniqueId('e').replace(/-/g, '_')}`;
  const queue = queueName(model, '1');
  const now = Date.now();
  const ids = members.map(() => `job_${uniqueId('m')}`);
  const entryMembers: EntryMember[] = members.map((m, i) => ({
    id: ids[i] as string,
    rows: m.rows,
    submittedAt: now - (m.agoMs ?? 0),
    ...(m.timeoutMs !== undefined ? { timeoutMs: m.timeoutMs } : {}),
    ...(m.cacheDigest !== undefined ? { cacheDigest: m.cacheDigest } : {}),
  }));
  const { specs, bytes } = packTensors(inputs);
  if (!options.withoutInputs) await redis.set(entryInputsKey(prefix, queue, entryId), bytes, 'EX', RETENTION_S);
  if (options.skip?.length) await redis.sadd(entrySkipKey(prefix, queue, entryId), ...options.skip.map((i) => ids[i] as string));
  const data: EntryData = {
    entry: 1,
    tenant: 'tenant-a',
    model,
    version: '1',
    submittedAt: Math.min(...entryMembers.map((m) => m.submittedAt)),
    members: entryMembers,
    inputs: specs,
    ...(options.outputs ? { outputs: options.outputs.map((name) => ({ name })) } : {}),
  };
  await (queues.get(model) as Queue).add(ENTRY_JOB_NAME, data, {
    jobId: entryId,
    attempts: 3,
    removeOnComplete: { age: RETENTION_S },
    removeOnFail: { age: RETENTION_S },
  });
  return { entryId, ids };
}

/** The entry's result once BullMQ completed it. */
async function completed(model: string, entryId: string): Promise<EntryResult> {
  const job = await until(`entry ${entryId} to finish`, async () => {
    const j = await (queues.get(model) as Queue).getJob(entryId);
    return j?.finishedOn !== undefined ? j : undefined;
  });
  expect(job.failedReason).toBeUndefined();
  return job.returnvalue as EntryResult;
}

/** Each output's elements for rows [row, row + rows), from the entry's outputs key. */
async function memberOutputs(model: string, entryId: string, result: EntryResult, outcome: MemberOutcome, rows: number) {
  if (outcome.status !== 'succeeded') throw new Error(`member ${outcome.status}`);
  const bytes = await redis.getBuffer(entryOutputsKey(prefix, queueName(model, '1'), entryId));
  if (!bytes) throw new Error('no outputs key');
  const out: Record<string, unknown[]> = {};
  for (const spec of result.outputs) {
    const all = tensorData(spec, aligned(bytes));
    const rowSize = all.length / (spec.shape[0] as number);
    out[spec.name] = Array.from(all.slice(outcome.row * rowSize, (outcome.row + rows) * rowSize) as ArrayLike<unknown>);
  }
  return out;
}

/** ONNX Runtime's own outputs for these inputs, run alone. */
async function reference(model: string, inputs: TensorToPack[]): Promise<Record<string, unknown[]>> {
  const feeds: Record<string, ort.Tensor> = {};
  for (const t of inputs) feeds[t.name] = new ort.Tensor(ORT_TYPE[t.datatype], t.data as never, t.shape);
  const out = await (references.get(model) as ort.InferenceSession).run(feeds);
  return Object.fromEntries(Object.entries(out).map(([name, t]) => [name, Array.from(t.data as ArrayLike<unknown>)]));
}

/** Member inputs of one input name, concatenated as the API's entry writer does. */
function entryInputs(perMember: TensorToPack[][]): TensorToPack[] {
  return (perMember[0] as TensorToPack[]).map((t, i) => {
    const parts = perMember.map((p) => p[i] as TensorToPack);
    const rows = parts.reduce((n, p) => n + (p.shape[0] as number), 0);
    const data = Array.isArray(t.data)
      ? parts.flatMap((p) => p.data as string[])
      : (() => {
          const Ctor = t.data.constructor as new (n: number) => Float32Array;
          const out = new Ctor(parts.reduce((n, p) => n + p.data.length, 0));
          let at = 0;
          for (const p of parts) {
            out.set(p.data as Float32Array, at);
            at += p.data.length;
          }
          return out as unknown as TensorData;
        })();
    return { name: t.name, datatype: t.datatype, shape: [rows, ...t.shape.slice(1)], data };
  });
}

const features = (rows: number, seed: number): TensorToPack[] => [
  {
    name: 'features',
    datatype: 'FP32',
    shape: [rows, 8],
    data: Float32Array.from({ length: rows * 8 }, (_, k) => Math.sin(seed * 13 + k)),
  },
];

async function inputsDeleted(model: string, entryId: string): Promise<void> {
  await until('the inputs key to be deleted', async () =>
    (await redis.exists(entryInputsKey(prefix, queueName(model, '1'), entryId))) === 0 ? true : undefined,
  );
}

describe('an entry of several members', () => {
  it('gives every member of an every-datatype model what ONNX Runtime gives it, rows of each member in its own range', async () => {
    const rows = [1, 3, 2];
    const perMember = rows.map((n, i) =>
      DATATYPES.map((t) => ({ name: `in_${t}`, datatype: t, shape: [n, 3], data: column(t, n, i + 1) })),
    );
    const { entryId, ids } = await addEntry(
      'every',
      rows.map((n) => ({ rows: n })),
      entryInputs(perMember),
    );
    const result = await completed('every', entryId);

    expect(result.outputs.map((s) => [s.name, s.datatype, s.shape])).toEqual(DATATYPES.map((t) => [`out_${t}`, t, [6, 3]]));
    let row = 0;
    for (const [i, id] of ids.entries()) {
      const outcome = result.members[id] as MemberOutcome;
      expect(outcome).toMatchObject({ status: 'succeeded', row, timings: { batchRows: expect.any(Number) } });
      row += rows[i] as number;
      const got = await memberOutputs('every', entryId, result, outcome, rows[i] as number);
      const want = await reference('every', perMember[i] as TensorToPack[]);
      for (const t of DATATYPES) expect(got[`out_${t}`], t).toEqual(want[`out_${t}`]);
      // -0, 64-bit extremes and empty strings made it through untouched.
      expect(Object.is(got.out_FP32?.[0], -0)).toBe(true);
      expect(got.out_INT64?.[0]).toBe(-(2n ** 63n));
      expect(got.out_UINT64?.[0]).toBe(2n ** 64n - 1n);
      expect(got.out_BYTES?.[0]).toBe('');
    }
    await inputsDeleted('every', entryId);
    const ttl = await redis.ttl(entryOutputsKey(prefix, queueName('every', '1'), entryId));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(RETENTION_S);
  });

  it('runs an entry larger than a forward pass in slices, members spanning them, and keeps only the outputs asked for', async () => {
    const rows = [3, 4, 2];
    const perMember = rows.map((n, i) => [
      { name: 'seq', datatype: 'FP32' as const, shape: [n, 5], data: Float32Array.from({ length: n * 5 }, (_, k) => i * 100 + k) },
    ]);
    const { entryId, ids } = await addEntry(
      'seq',
      rows.map((n) => ({ rows: n })),
      entryInputs(perMember),
      { outputs: ['total'] },
    );
    const result = await completed('seq', entryId);
    for (const [i, id] of ids.entries()) {
      const outcome = result.members[id] as MemberOutcome;
      const got = await memberOutputs('seq', entryId, result, outcome, rows[i] as number);
      expect(got.total).toEqual((await reference('seq', perMember[i] as TensorToPack[])).total);
      // At most MAX_ROWS rows in any pass that carried it.
      expect(outcome.status === 'succeeded' && outcome.timings.batchRows).toBeLessThanOrEqual(MAX_ROWS);
    }
  });

  it('never runs a skipped member, fails an expired one alone (deadline_exceeded), runs the rest', async () => {
    const before = rowsRun.get('mlp') ?? 0;
    const perMember = [features(2, 1), features(3, 2), features(1, 3), features(2, 4)];
    const members: MemberSpec[] = [{ rows: 2 }, { rows: 3 }, { rows: 1, agoMs: 10_000, timeoutMs: 1_000 }, { rows: 2, timeoutMs: 60_000 }];
    const { entryId, ids } = await addEntry('mlp', members, entryInputs(perMember), { skip: [1] });
    const result = await completed('mlp', entryId);

    expect(result.members[ids[1] as string]).toEqual({ status: 'skipped' });
    const expired = result.members[ids[2] as string];
    expect(expired).toMatchObject({ status: 'failed', error: { code: 'deadline_exceeded' } });
    expect(expired?.status === 'failed' && expired.timings?.queueMs).toBeGreaterThan(1_000);
    // Only the two live members' rows reached ONNX Runtime, and only theirs are in the outputs.
    expect((rowsRun.get('mlp') ?? 0) - before).toBe(4);
    expect(result.outputs[0]?.shape).toEqual([4, 1]);
    for (const i of [0, 3]) {
      const outcome = result.members[ids[i] as string] as MemberOutcome;
      expect(outcome).toMatchObject({ status: 'succeeded', row: i === 0 ? 0 : 2 });
      const got = await memberOutputs('mlp', entryId, result, outcome, members[i]?.rows as number);
      const want = (await reference('mlp', perMember[i] as TensorToPack[])).score as number[];
      for (const [k, v] of (got.score as number[]).entries()) expect(v).toBeCloseTo(want[k] as number, 5);
    }
    await inputsDeleted('mlp', entryId);
  });

  it('completes an entry whose members are all skipped without running anything or writing outputs', async () => {
    const before = rowsRun.get('mlp') ?? 0;
    const { entryId, ids } = await addEntry('mlp', [{ rows: 1 }, { rows: 1 }], entryInputs([features(1, 5), features(1, 6)]), {
      skip: [0, 1],
    });
    const result = await completed('mlp', entryId);
    expect(Object.values(result.members)).toEqual([{ status: 'skipped' }, { status: 'skipped' }]);
    expect(Object.keys(result.members)).toEqual(ids);
    expect(rowsRun.get('mlp') ?? 0).toBe(before);
    expect(await redis.exists(entryOutputsKey(prefix, queueName('mlp', '1'), entryId))).toBe(0);
    await inputsDeleted('mlp', entryId);
  });

  it('fails only the member whose index ONNX Runtime rejects; the others get their rows', async () => {
    const idx = (values: bigint[]): TensorToPack[] => [
      { name: 'idx', datatype: 'INT64', shape: [values.length, 1], data: BigInt64Array.from(values) },
    ];
    const perMember = [idx([1n, 2n]), idx([99n]), idx([3n]), idx([-1n, 0n])];
    const { entryId, ids } = await addEntry(
      'lookup',
      perMember.map((t) => ({ rows: t[0]?.shape[0] as number })),
      entryInputs(perMember),
    );
    const result = await completed('lookup', entryId);

    expect(result.members[ids[1] as string]).toEqual({
      status: 'failed',
      error: { code: 'invalid_input', message: INPUT_REJECTED },
      timings: { queueMs: expect.any(Number) },
    });
    const rejected = rejections.find((r) => r.jobId === ids[1]);
    expect(rejected).toMatchObject({ code: 'invalid_input', ortMessage: expect.stringMatching(/indices element out of data bounds/) });
    expect(result.outputs[0]?.shape).toEqual([5, 1, 4]);
    let row = 0;
    for (const i of [0, 2, 3]) {
      const outcome = result.members[ids[i] as string] as MemberOutcome;
      const rows = perMember[i]?.[0]?.shape[0] as number;
      expect(outcome).toMatchObject({ status: 'succeeded', row });
      row += rows;
      const got = await memberOutputs('lookup', entryId, result, outcome, rows);
      expect(got.row).toEqual((await reference('lookup', perMember[i] as TensorToPack[])).row);
    }
    await inputsDeleted('lookup', entryId);

    // Small enough for one forward pass over one buffer, which the engine may take whole: the
    // re-run of each member alone still finds the entry's bytes.
    const small = [idx([4n]), idx([-9n]), idx([5n])];
    const again = await addEntry(
      'lookup',
      small.map(() => ({ rows: 1 })),
      entryInputs(small),
    );
    const second = await completed('lookup', again.entryId);
    expect(Object.values(second.members).map((m) => m.status)).toEqual(['succeeded', 'failed', 'succeeded']);
    expect(second.outputs[0]?.shape).toEqual([2, 1, 4]);
  });

  it('fails every live member invalid_input when the layout does not fit the model or a member its bounds', async () => {
    const wrongWidth: TensorToPack[] = [{ name: 'features', datatype: 'FP32', shape: [3, 7], data: new Float32Array(21) }];
    const bad = await addEntry('mlp', [{ rows: 1 }, { rows: 2 }], wrongWidth, { skip: [0] });
    const result = await completed('mlp', bad.entryId);
    expect(result.members[bad.ids[0] as string]).toEqual({ status: 'skipped' });
    expect(result.members[bad.ids[1] as string]).toMatchObject({
      status: 'failed',
      error: { code: 'invalid_input', message: expect.stringMatching(/axis 1/) },
    });

    // 60 rows for one member, past MAX_ROWS_PER_JOB (50): refused before anything is built for it.
    const big = await addEntry('mlp', [{ rows: 1 }, { rows: 60 }], features(61, 1));
    const tooBig = await completed('mlp', big.entryId);
    for (const id of big.ids) {
      expect(tooBig.members[id]).toMatchObject({
        status: 'failed',
        error: { code: 'invalid_input', message: expect.stringMatching(/at most 50/) },
      });
    }
    // Rows that disagree with the members' sum, and a datatype that is not the model's.
    const rowsOff = await addEntry('mlp', [{ rows: 1 }], features(2, 1));
    expect(Object.values((await completed('mlp', rowsOff.entryId)).members)[0]).toMatchObject({ error: { code: 'invalid_input' } });
    const fp64: TensorToPack[] = [{ name: 'features', datatype: 'FP64', shape: [1, 8], data: new Float64Array(8) }];
    const typeOff = await addEntry('mlp', [{ rows: 1 }], fp64);
    expect(Object.values((await completed('mlp', typeOff.entryId)).members)[0]).toMatchObject({
      error: { code: 'invalid_input', message: expect.stringMatching(/datatype/) },
    });
  });

  it('stores each succeeded member’s own rows in the result cache when it carries a digest', async () => {
    const perMember = [features(2, 7), features(1, 8), features(1, 9)];
    const members: MemberSpec[] = [{ rows: 2, cacheDigest: 'd-first' }, { rows: 1 }, { rows: 1, cacheDigest: 'd-third' }];
    const { entryId, ids } = await addEntry('mlp', members, entryInputs(perMember));
    const result = await completed('mlp', entryId);
    const cache = createResultCache(redis, { prefix });
    for (const [i, digest] of [
      [0, 'd-first'],
      [2, 'd-third'],
    ] as const) {
      const hit = await cache.get('mlp', '1', digest);
      expect(hit?.workerId).toBe(result.workerId);
      expect(hit?.specs.map((s) => [s.name, s.shape])).toEqual([['score', [members[i]?.rows, 1]]]);
      const outcome = result.members[ids[i] as string] as MemberOutcome;
      const fromEntry = await memberOutputs('mlp', entryId, result, outcome, members[i]?.rows as number);
      expect(Array.from(tensorData(hit?.specs[0] as never, hit?.bytes as Buffer) as Float32Array)).toEqual(fromEntry.score);
    }
  });
});

describe('an entry whose inputs are gone', () => {
  it('is retried, then fails in words a tenant may read', async () => {
    const { entryId } = await addEntry('mlp', [{ rows: 1 }], features(1, 1), { withoutInputs: true });
    const job = await until('the entry to fail for good', async () => {
      const j = await (queues.get('mlp') as Queue).getJob(entryId);
      return j?.finishedOn !== undefined ? j : undefined;
    });
    expect(job.attemptsMade).toBe(3);
    expect(job.failedReason).toBe("the job's inputs are no longer stored (they expired or were lost)");
  });
});

describe('an online job an older API queued (before queue entries)', () => {
  it('fails at once with a message to start it again, never run nor retried, shown so by the API; entries beside it run', async () => {
    const queue = queues.get('mlp') as Queue;
    const jobId = `job_${uniqueId('legacy')}`;
    // As the API before entries wrote it: an index key naming the bare queue, then an `infer` job, rows inside.
    await redis.set(jobIndexKey(prefix, jobId), queueName('mlp', '1'), 'EX', RETENTION_S);
    const data = {
      tenant: 'tenant-a',
      model: 'mlp',
      version: '1',
      inputs: [{ name: 'features', shape: [1, 8], datatype: 'FP32', data: [1, 2, 3, 4, 5, 6, 7, 8] }],
      submittedAt: Date.now(),
    };
    const rowsBefore = rowsRun.get('mlp') ?? 0;
    await queue.add(LEGACY_JOB_NAME, data, { jobId, attempts: 3, backoff: { type: 'fixed', delay: 10 } });
    const done = await until('the legacy job to fail', async () => {
      const j = await queue.getJob(jobId);
      return j?.finishedOn !== undefined ? j : undefined;
    });
    expect(done.failedReason).toBe(OUTDATED_JOB_FAILURE);
    expect(done.attemptsMade).toBe(1);
    expect(rowsRun.get('mlp') ?? 0).toBe(rowsBefore);

    const api = createBullJobQueue({ connection: config.redisUrl, prefix, retentionS: RETENTION_S, attempts: 1 });
    try {
      const view = await api.get(jobId);
      expect(view).toMatchObject({ id: jobId, tenant: 'tenant-a', status: 'failed', error: { code: 'invalid_input' } });
      expect(view?.error?.message).toMatch(/older warmpool.*start it again$/);
    } finally {
      await api.close();
    }

    const { entryId, ids } = await addEntry('mlp', [{ rows: 1 }], features(1, 7));
    expect((await completed('mlp', entryId)).members[ids[0] as string]?.status).toBe('succeeded');
  });
});
