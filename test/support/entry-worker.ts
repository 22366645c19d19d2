/**
 * A miniature of the worker's entry intake (infra/contracts/entry.ts), so queue tests drive the
 * API's job queue with a plain BullMQ Worker and stay fast: no model, no batcher, no thread.
 * What it does with an entry is what the real worker does, in the same order and with the same
 * keys and values:
 *
 *   1. reads the skip set (`entrySkipKey`) and the packed inputs (`entryInputsKey`);
 *   2. per member, in member order: skipped → `skipped`; past its start deadline → `failed`
 *      (`deadline_exceeded`, it alone); otherwise `run` gets the member's rows of every input;
 *   3. `run` throwing an UnrecoverableError fails that member alone, its message parsed as
 *      `code: message` (worker/intake.ts's form); any other error fails the whole entry, which
 *      BullMQ retries while attempts are left (the real worker's transient failures);
 *   4. packs the succeeded members' outputs, in member order, SETs them at `entryOutputsKey`
 *      (EX the retention), and returns the EntryResult;
 *   5. once BullMQ has finished the entry for good (completed, or failed with its attempts
 *      spent), deletes its inputs (`startEntryWorker` only: the Worker's events say when).
 *
 * `run` sees every member's call before any is awaited, so a gate in it holds the whole entry
 * running, as a forward pass would.
 */
import { type Job, type Processor, UnrecoverableError, Worker } from 'bullmq';
import type { EntryData, EntryMember, EntryResult, MemberOutcome } from '../../infra/contracts/entry.ts';
import { queueName } from '../../infra/contracts/job.ts';
import {
  aligned,
  elementsOf,
  type PackedSpec,
  packTensors,
  type TensorData,
  type TensorToPack,
  tensorData,
} from '../../infra/contracts/packed-tensors.ts';
import { parseFailure } from '../../infra/queue/index.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { entryInputsKey, entryOutputsKey, entrySkipKey } from '../../infra/redis/keys.ts';

/** One member as `run` sees it. */
export interface MemberRun {
  entryId: string;
  entry: EntryData;
  member: EntryMember;
  /** The member's rows of each input, in the entry's input order. */
  inputs: TensorToPack[];
  /** The entry's attempts before this one. */
  attemptsMade: number;
}

/** A member's outputs (shape[0] = its rows), or a throw (see the header, step 3). */
export type MemberFn = (run: MemberRun) => TensorToPack[] | Promise<TensorToPack[]>;

export interface EntryProcessorOptions {
  /** Reads the entry's inputs and skip set, writes its outputs. */
  redis: RedisClient;
  prefix: string;
  run: MemberFn;
  /** How long the outputs live; default 600 s. */
  retentionS?: number;
  workerId?: string;
  /** When the entry was taken, for an entry without BullMQ's processedOn; default Date.now. */
  now?: () => number;
}

export function entryProcessor(options: EntryProcessorOptions): Processor<EntryData, EntryResult> {
  const { redis, prefix, retentionS = 600, workerId = 'entry-worker', now = Date.now } = options;
  return async (job: Job<EntryData, EntryResult>) => {
    const queue = job.queueName;
    const entryId = job.id as string;
    const data = job.data;
    const [skipped, raw] = await Promise.all([
      redis.smembers(entrySkipKey(prefix, queue, entryId)),
      redis.getBuffer(entryInputsKey(prefix, queue, entryId)),
    ]);
    const bytes = raw === null ? null : aligned(raw);
    const takenAt = job.processedOn ?? now();
    const skip = new Set(skipped);
    const members: Record<string, MemberOutcome> = {};
    const runs: Array<{ member: EntryMember; outputs: Promise<TensorToPack[]> }> = [];
    let row = 0;
    for (const member of data.members) {
      const first = row;
      row += member.rows;
      const queueMs = Math.max(0, takenAt - member.submittedAt);
      if (skip.has(member.id)) {
        members[member.id] = { status: 'skipped' };
      } else if (member.timeoutMs !== undefined && queueMs > member.timeoutMs) {
        const message = `the job waited ${queueMs} ms for a worker; its deadline was ${member.timeoutMs} ms`;
        members[member.id] = { status: 'failed', error: { code: 'deadline_exceeded', message }, timings: { queueMs } };
      } else {
        // Retried like any fault of the worker's; only read when some member is to run.
        if (bytes === null) throw new Error("the job's inputs are no longer stored (they expired or were lost)");
        const inputs = data.inputs.map((spec) => rowsOf(spec, bytes, first, first + member.rows));
        const call = { entryId, entry: data, member, inputs, attemptsMade: job.attemptsMade };
        runs.push({ member, outputs: Promise.resolve().then(() => options.run(call)) });
      }
    }
    const started = now();
    const settled = await Promise.allSettled(runs.map((r) => r.outputs));
    const inferMs = Math.max(0, now() - started);
    const batchRows = runs.reduce((n, r) => n + r.member.rows, 0);

    const succeeded: Array<{ member: EntryMember; outputs: TensorToPack[] }> = [];
    settled.forEach((outcome, i) => {
      const { member } = runs[i] as (typeof runs)[number];
      const queueMs = Math.max(0, takenAt - member.submittedAt);
      if (outcome.status === 'fulfilled') {
        succeeded.push({ member, outputs: outcome.value });
        return;
      }
      // A transient failure: the whole entry goes back (BullMQ's retry), as in the real worker.
      if (!(outcome.reason instanceof UnrecoverableError)) throw outcome.reason;
      members[member.id] = { status: 'failed', error: parseFailure(outcome.reason.message), timings: { queueMs } };
    });

    let outRow = 0;
    for (const { member } of succeeded) {
      const queueMs = Math.max(0, takenAt - member.submittedAt);
      members[member.id] = { status: 'succeeded', row: outRow, timings: { queueMs, inferMs, batchRows } };
      outRow += member.rows;
    }
    const outputs = await writeOutputs(redis, entryOutputsKey(prefix, queue, entryId), retentionS, succeeded);
    return { entry: 1, workerId, outputs, members };
  };
}

export interface EntryWorkerOptions extends EntryProcessorOptions {
  model: string;
  version?: string;
  concurrency?: number;
}

/** A BullMQ Worker on the model version's queue running `entryProcessor`; close it when done. */
export function startEntryWorker(options: EntryWorkerOptions): Worker<EntryData, EntryResult> {
  const { redis, prefix } = options;
  const worker = new Worker<EntryData, EntryResult>(queueName(options.model, options.version ?? '1'), entryProcessor(options), {
    connection: redis,
    prefix,
    concurrency: options.concurrency ?? 1,
  });
  const ended = (job: Job<EntryData, EntryResult> | undefined) => {
    if (job?.id) redis.unlink(entryInputsKey(prefix, job.queueName, job.id)).catch(() => undefined);
  };
  worker.on('completed', ended);
  worker.on('failed', (job) => {
    if (job && job.attemptsMade >= (job.opts.attempts ?? 1)) ended(job);
  });
  return worker;
}

/** Rows [start, end) of a packed tensor, as a tensor of its own (a view for numeric data). */
function rowsOf(spec: PackedSpec, bytes: Buffer, start: number, end: number): TensorToPack {
  const data = tensorData(spec, bytes);
  const rowSize = elementsOf(spec.shape.slice(1));
  const part = Array.isArray(data)
    ? (data as string[]).slice(start * rowSize, end * rowSize)
    : (data as Exclude<TensorData, readonly string[]>).subarray(start * rowSize, end * rowSize);
  return { name: spec.name, datatype: spec.datatype, shape: [end - start, ...spec.shape.slice(1)], data: part };
}

/** The succeeded members' outputs, one after another per output name, packed and stored; their specs. */
async function writeOutputs(
  redis: RedisClient,
  key: string,
  retentionS: number,
  succeeded: ReadonlyArray<{ outputs: TensorToPack[] }>,
): Promise<PackedSpec[]> {
  const first = succeeded[0];
  if (!first) return [];
  const joined = first.outputs.map((o) => {
    const parts = succeeded.map((s) => {
      const part = s.outputs.find((p) => p.name === o.name);
      if (!part) throw new Error(`a member's outputs lack "${o.name}"`);
      return part;
    });
    const rows = parts.reduce((n, p) => n + (p.shape[0] ?? 1), 0);
    return { name: o.name, datatype: o.datatype, shape: [rows, ...o.shape.slice(1)], data: concat(parts.map((p) => p.data)) };
  });
  const { specs, bytes } = packTensors(joined);
  await redis.set(key, bytes, 'EX', retentionS);
  return specs;
}

function concat(parts: TensorData[]): TensorData {
  if (Array.isArray(parts[0])) return (parts as string[][]).flat();
  const typed = parts as Array<Exclude<TensorData, readonly string[]>>;
  const Ctor = typed[0]?.constructor as new (length: number) => Exclude<TensorData, readonly string[]>;
  const out = new Ctor(typed.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of typed) {
    (out as unknown as { set(a: ArrayLike<unknown>, at: number): void }).set(p, at);
    at += p.length;
  }
  return out;
}
