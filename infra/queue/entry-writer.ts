/**
 * The entry writer: a group commit from requests to queue entries (infra/contracts/entry.ts).
 *
 * Requests that may share a forward pass and a failure domain — same queue (model version),
 * priority, tenant, requested outputs, and inputs' names, datatypes and non-batch dimensions —
 * join one pending entry. A pending entry is written:
 *   - at once (next turn of the event loop) when no write of that group is in flight: with
 *     light traffic nothing waits, and every entry has one member;
 *   - otherwise when the write in flight returns, with everything that arrived meanwhile: the
 *     busier Redis is, the more requests share each entry, so its cost is paid per entry;
 *   - at `maxMembers` requests or `maxBytes` of inputs, whichever first (a full entry goes at once).
 *
 * Writing an entry is one round trip on a single Redis: a pipeline with, in this order, every
 * member's index key (`<queue>#<entryId>`, so a job BullMQ holds is always findable by id), the
 * packed inputs (one binary string), and BullMQ's insert of the entry. On a cluster the index
 * keys lie in other slots than the queue's: they and the inputs go first, then the entry. A request's promise resolves once its
 * entry is in BullMQ, and rejects (the whole group's) when either write fails: nothing is
 * acknowledged that is not queued. An index key or inputs left behind by a failed add points at
 * no job and expires with the retention.
 *
 * Two rolling means per queue go to Redis for the scaler (queue-stats.ts), which counts BullMQ's
 * entries: requests per entry (entries → requests) and rows per request (requests → rows, the
 * unit of a worker's capacity; a request may carry many rows). Each is a ratio of sums over the
 * entries written lately, so it is exact while traffic is steady and follows a change within a
 * few half-lives.
 */
import {
  ENTRY_ID_PREFIX,
  ENTRY_JOB_NAME,
  type EntryData,
  type EntryMember,
  memberLocation,
  type QueuedRequest,
} from '../contracts/entry.ts';
import { PRIORITIES, type Priority, queueName } from '../contracts/job.ts';
import { type PackedSpec, packTensors, type TensorData, type TensorToPack } from '../contracts/packed-tensors.ts';
import { randomId } from '../kernel/random-id.ts';
import { isCluster, type RedisClient } from '../redis/client.ts';
import { entryInputsKey, entryMembersKey, entryRowsKey, jobIndexKey } from '../redis/keys.ts';
import { addAfter } from './bullmq-pipeline.ts';
import type { QueueLease } from './queue-cache.ts';

export interface EntryWriterOptions {
  redis: RedisClient;
  queues: Pick<QueueLease, 'producer'>;
  prefix: string;
  retentionS: number;
  attempts: number;
  backoffMs: number;
  /** Requests per entry at most (COALESCE_MAX_REQUESTS); 1 turns coalescing off. */
  maxMembers: number;
  /** Input bytes per entry at most: a full entry is written at once. */
  maxBytes: number;
  /** Epoch ms (default Date.now): dates the requests-per-entry mean. */
  now?: () => number;
  /** Told of each entry written, for metrics: `members` requests share it. */
  onWritten?: (e: { queue: string; members: number; bytes: number }) => void;
}

export interface EntryWriter {
  /** Resolves once the request's entry is in BullMQ. */
  enqueue(request: QueuedRequest, options: { priority: Priority; jobId: string }): Promise<void>;
  /** Requests per entry this writer has been writing to `queue` lately (1 before any): turns a count of entries into one of requests. */
  membersPerEntry(queue: string): number;
  /** Waits for the writes in flight and the pending entries (written at once). Idempotent. */
  close(): Promise<void>;
}

/**
 * Requests per entry is a ratio of sums that halve every this many ms: recent entries count, a
 * burst long past does not.
 */
const MEAN_HALF_LIFE_MS = 5000;
/** The means go to Redis at most this often per queue, and at the end of each interval they changed in. */
const PUBLISH_INTERVAL_MS = 1000;
/** How long a published mean outlives the last write to its queue. */
const PUBLISHED_TTL_S = 3600;

interface Pending {
  id: string;
  request: QueuedRequest;
  resolve: () => void;
  reject: (err: unknown) => void;
}

interface Group {
  queue: string;
  priority: Priority;
  pending: Pending[];
  bytes: number;
  /** A write of this group is in flight: new requests wait for it (the group commit). */
  writing: boolean;
  scheduled: boolean;
}

export function createEntryWriter(options: EntryWriterOptions): EntryWriter {
  const groups = new Map<string, Group>();
  const inFlight = new Set<Promise<void>>();
  let closed = false;
  /** Per queue: rows, requests and entries written, each sum halving every MEAN_HALF_LIFE_MS. */
  const written = new Map<string, { rows: number; requests: number; entries: number; at: number }>();
  const meanOf = (queue: string) => {
    const w = written.get(queue);
    return w && w.entries > 0 ? w.requests / w.entries : 1;
  };
  const rowsMeanOf = (queue: string) => {
    const w = written.get(queue);
    return w && w.requests > 0 ? Math.max(1, w.rows / w.requests) : 1;
  };
  const clockNow = options.now ?? Date.now;
  const record = (queue: string, batch: readonly Pending[]) => {
    const now = clockNow();
    const w = written.get(queue) ?? { rows: 0, requests: 0, entries: 0, at: now };
    const decay = 0.5 ** (Math.max(0, now - w.at) / MEAN_HALF_LIFE_MS);
    const rows = batch.reduce((n, p) => n + requestRows(p.request), 0);
    written.set(queue, {
      rows: w.rows * decay + rows,
      requests: w.requests * decay + batch.length,
      entries: w.entries * decay + 1,
      at: now,
    });
    publish(queue);
  };
  /**
   * For readers in other processes (queue-stats.ts), best effort: written at once, then at most
   * once per interval, and once more at the end of an interval in which it changed.
   */
  const timers = new Map<string, NodeJS.Timeout>();
  const dirty = new Set<string>();
  const publish = (queue: string): void => {
    if (timers.has(queue)) {
      dirty.add(queue);
      return;
    }
    const { redis, prefix } = options;
    redis.set(entryMembersKey(prefix, queue), meanOf(queue).toFixed(2), 'EX', PUBLISHED_TTL_S).catch(() => undefined);
    redis.set(entryRowsKey(prefix, queue), rowsMeanOf(queue).toFixed(2), 'EX', PUBLISHED_TTL_S).catch(() => undefined);
    const timer = setTimeout(() => {
      timers.delete(queue);
      if (dirty.delete(queue)) publish(queue);
    }, PUBLISH_INTERVAL_MS);
    timer.unref();
    timers.set(queue, timer);
  };

  function schedule(key: string, group: Group): void {
    if (group.scheduled || group.writing) return;
    group.scheduled = true;
    setImmediate(() => {
      group.scheduled = false;
      flush(key, group);
    });
  }

  function flush(key: string, group: Group): void {
    if (group.writing || group.pending.length === 0) return;
    const batch = take(group);
    group.writing = true;
    const write = writeEntry(options, group.queue, group.priority, batch).then(
      () => {
        record(group.queue, batch);
        for (const p of batch) p.resolve();
      },
      (err: unknown) => {
        for (const p of batch) p.reject(err);
      },
    );
    inFlight.add(write);
    void write.finally(() => {
      inFlight.delete(write);
      group.writing = false;
      if (group.pending.length > 0) flush(key, group);
      else groups.delete(key);
    });
  }

  /** The first `maxMembers` pending requests, within `maxBytes` (at least one). */
  function take(group: Group): Pending[] {
    let bytes = 0;
    let n = 0;
    for (const p of group.pending) {
      const size = requestBytes(p.request);
      if (n >= options.maxMembers || (n > 0 && bytes + size > options.maxBytes)) break;
      bytes += size;
      n++;
    }
    const batch = group.pending.splice(0, n);
    group.bytes -= bytes;
    return batch;
  }

  return {
    enqueue(request, { priority, jobId }) {
      if (closed) return Promise.reject(new Error('entry writer is closed'));
      const key = groupKey(request, priority);
      let group = groups.get(key);
      if (!group) {
        group = { queue: queueName(request.model, request.version), priority, pending: [], bytes: 0, writing: false, scheduled: false };
        groups.set(key, group);
      }
      const g = group;
      return new Promise<void>((resolve, reject) => {
        g.pending.push({ id: jobId, request, resolve, reject });
        g.bytes += requestBytes(request);
        if (!g.writing && (g.pending.length >= options.maxMembers || g.bytes >= options.maxBytes)) flush(key, g);
        else schedule(key, g);
      });
    },

    membersPerEntry: meanOf,

    async close() {
      closed = true;
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
      for (const [key, group] of groups) flush(key, group);
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
  };
}

/** What requests must share to share an entry (see the header). */
function groupKey(r: QueuedRequest, priority: Priority): string {
  const inputs = r.inputs.map((t) => `${t.name}:${t.datatype}:${t.shape.slice(1).join('x')}`).join(',');
  const outputs = r.outputs ? r.outputs.map((o) => o.name).join(',') : '*';
  return JSON.stringify([r.model, r.version, priority, r.tenant, outputs, inputs]);
}

/** A request's rows (at least 1: a request is never less than one row of work). */
function requestRows(r: QueuedRequest): number {
  return Number.isFinite(r.rows) && r.rows >= 1 ? r.rows : 1;
}

function requestBytes(r: QueuedRequest): number {
  let n = 0;
  for (const t of r.inputs) n += Array.isArray(t.data) ? (t.data as string[]).length * 16 : (t.data as { byteLength: number }).byteLength;
  return n;
}

async function writeEntry(options: EntryWriterOptions, queue: string, priority: Priority, batch: Pending[]): Promise<void> {
  const entryId = `${ENTRY_ID_PREFIX}${randomId()}`;
  const first = (batch[0] as Pending).request;
  const { specs, bytes } = packTensors(concatInputs(batch.map((p) => p.request.inputs)));
  const members: EntryMember[] = batch.map(({ id, request: r }) => {
    const m: EntryMember = { id, rows: r.rows, submittedAt: r.submittedAt };
    if (r.timeoutMs !== undefined) m.timeoutMs = r.timeoutMs;
    if (r.webhook) m.webhook = r.webhook;
    if (r.cacheDigest !== undefined) m.cacheDigest = r.cacheDigest;
    return m;
  });
  const data: EntryData = {
    entry: 1,
    tenant: first.tenant,
    model: first.model,
    version: first.version,
    submittedAt: Math.min(...members.map((m) => m.submittedAt)),
    members,
    inputs: specs as PackedSpec[],
  };
  if (first.outputs) data.outputs = first.outputs;

  const { redis, prefix, retentionS } = options;
  const location = memberLocation(queue, entryId);
  const inputsKey = entryInputsKey(prefix, queue, entryId);
  const opts = {
    priority: PRIORITIES[priority],
    attempts: options.attempts,
    backoff: { type: 'exponential', delay: options.backoffMs },
    removeOnComplete: { age: retentionS },
    removeOnFail: { age: retentionS },
  };
  const producer = options.queues.producer(queue);
  const job = { name: ENTRY_JOB_NAME, data, opts, jobId: entryId };
  if (isCluster(redis)) {
    // The index keys lie in every slot, so no one pipeline reaches them: concurrent SETs, which
    // ioredis sends per node, then the entry.
    await Promise.all([
      ...members.map((m) => redis.set(jobIndexKey(prefix, m.id), location, 'EX', retentionS)),
      redis.set(inputsKey, bytes, 'EX', retentionS),
    ]);
    await producer.add(job.name, data, { ...opts, jobId: entryId });
  } else {
    // One round trip: the index keys, the inputs, then BullMQ's own insert of the entry, in
    // that order on the queue's connection (bullmq-pipeline.ts, as BullMQ's addBulk does).
    await addAfter(
      producer,
      (pipeline) => {
        for (const m of members) pipeline.set(jobIndexKey(prefix, m.id), location, 'EX', retentionS);
        pipeline.set(inputsKey, bytes, 'EX', retentionS);
      },
      job,
    );
  }
  options.onWritten?.({ queue, members: members.length, bytes: bytes.byteLength });
}

/** Each input's members' rows, one after another (byte copies; strings concatenated). */
function concatInputs(perMember: TensorToPack[][]): TensorToPack[] {
  const first = perMember[0] as TensorToPack[];
  return first.map((t, i) => {
    const parts = perMember.map((inputs) => inputs[i] as TensorToPack);
    if (parts.length === 1) return t;
    const rows = parts.reduce((n, p) => n + (p.shape[0] ?? 0), 0);
    return { name: t.name, datatype: t.datatype, shape: [rows, ...t.shape.slice(1)], data: concatData(parts.map((p) => p.data)) };
  });
}

function concatData(parts: TensorData[]): TensorData {
  if (Array.isArray(parts[0])) return (parts as string[][]).flat();
  const typed = parts as Array<Exclude<TensorData, readonly string[]>>;
  const first = typed[0] as Exclude<TensorData, readonly string[]>;
  const total = typed.reduce((n, p) => n + p.byteLength, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of typed) {
    out.set(new Uint8Array(p.buffer, p.byteOffset, p.byteLength), at);
    at += p.byteLength;
  }
  const Ctor = first.constructor as new (buffer: ArrayBuffer) => Exclude<TensorData, readonly string[]>;
  return new Ctor(out.buffer);
}
