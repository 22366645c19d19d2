/**
 * The result cache (issue 3 §7): a repeated request is answered from an earlier run's outputs
 * instead of running the model again. Workers write an entry for each member of a queue entry
 * that succeeded and carries a `cacheDigest` (infra/contracts/entry.ts); the API looks it up at
 * submit (through the job queue, which records a hit as an already-succeeded job).
 *
 *   <prefix>:result:<model>:<version>:<digest>   EX ttlS, one binary string:
 *     u32 LE n | header: n bytes of JSON {specs, workerId, storedAt} | zeros to a multiple of 8 | packed bytes
 *
 * The outputs stay packed (infra/contracts/packed-tensors.ts): `specs` locate each tensor in the
 * packed bytes, so neither side turns numbers into JSON, and a reader gets typed-array views.
 *
 * `digest` (requestDigest) is the sha256 of the request as packed bytes: a small canonical head
 * (the tenant, the model's own sha256 — so a version re-published with other bytes never serves
 * the old bytes' answers —, the requested output names sorted or null for all, and each input's
 * name, datatype, shape and byte length, sorted by name), then each input's bytes in that order.
 * Bytes, not values: `-0` and `0`, or two NaN payloads, are different requests (a miss only
 * costs a run), and a number spelled `1` or `1.0` in JSON packs to the same bytes. Request
 * `parameters` and the OIP `id` are not part of it: workers do not pass them to the model. The
 * tenant is: a hit (visible as `cached: true`) must never tell one tenant what another sent.
 * Model and version stay readable in the key so one version's entries can be found and dropped.
 *
 * Only successful results are written, each by the worker that computed it for exactly that
 * model version; a miss costs one GET. A value this module did not write (a JSON entry from
 * before packed outputs, a truncated one) reads as a miss.
 */
import { createHash } from 'node:crypto';
import type { Datatype } from '../contracts/oip.ts';
import { aligned, type PackedSet, type PackedSpec } from '../contracts/packed-tensors.ts';
import { isCluster } from './client.ts';
import { resultCacheKey } from './keys.ts';

/** How long an entry lives (the lead moves this to RESULT_CACHE_TTL_S in infra/kernel/config.ts). */
export const DEFAULT_RESULT_CACHE_TTL_S = 3600;
/**
 * Larger entries are not cached: the entry's outputs already live for the job's retention, and
 * a second copy of large outputs would double Redis memory for little gain.
 */
export const DEFAULT_RESULT_CACHE_MAX_BYTES = 1_048_576;

/** The slice of ioredis this module uses (a single node's pipeline, or a cluster's per-key SETs). */
export interface ResultCacheRedis {
  getBuffer(key: string): Promise<Buffer | null>;
  set(key: string, value: Buffer, ex: 'EX', seconds: number): Promise<unknown>;
  pipeline(): { set(key: string, value: Buffer, ex: 'EX', seconds: number): unknown; exec(): Promise<unknown> };
}

/** A request as its digest sees it: its inputs as packed bytes. */
export interface DigestTarget {
  tenant: string;
  /** sha256 of the model's bytes (its manifest's `sha256`). */
  modelSha256: string;
  /** The requested output names; absent: all of the model's outputs. */
  outputs?: readonly string[];
  tensors: ReadonlyArray<{ name: string; datatype: Datatype; shape: readonly number[]; bytes: Uint8Array }>;
}

export interface CachedResult {
  /** Where each output lies in `bytes`. */
  specs: PackedSpec[];
  /** The packed outputs, 8-byte aligned: `tensorData(spec, bytes)` views them directly. */
  bytes: Buffer;
  /** The worker that computed it, for tracing. */
  workerId: string;
  /** Epoch ms when it was stored. */
  storedAt: number;
}

export interface CacheWrite {
  outputs: PackedSet;
  workerId: string;
}

export interface CacheEntry extends CacheWrite {
  model: string;
  version: string;
  digest: string;
}

export interface ResultCache {
  /** null on a miss (also for an entry that cannot be read). */
  get(model: string, version: string, digest: string): Promise<CachedResult | null>;
  /** Stores a successful result; false when it is larger than `maxBytes` and was not stored. */
  put(model: string, version: string, digest: string, result: CacheWrite): Promise<boolean>;
  /** Stores several at once (a queue entry's members: one pipeline on a single node); how many were stored. */
  putMany(entries: readonly CacheEntry[]): Promise<number>;
}

export interface ResultCacheOptions {
  /** Key prefix (QUEUE_PREFIX). */
  prefix: string;
  /** Entry lifetime; default DEFAULT_RESULT_CACHE_TTL_S. Only writers use it. */
  ttlS?: number;
  /** Default DEFAULT_RESULT_CACHE_MAX_BYTES: the whole stored value, header included. */
  maxBytes?: number;
  now?: () => number;
}

const ALIGN = 8;

export function createResultCache(redis: ResultCacheRedis, options: ResultCacheOptions): ResultCache {
  const { prefix, ttlS = DEFAULT_RESULT_CACHE_TTL_S, maxBytes = DEFAULT_RESULT_CACHE_MAX_BYTES, now = Date.now } = options;
  /** The values within maxBytes, with their keys. */
  const encodeAll = (entries: readonly CacheEntry[]) => {
    const storedAt = now();
    const out: Array<{ key: string; value: Buffer }> = [];
    for (const e of entries) {
      const value = encodeEntry(e, storedAt);
      if (value.byteLength <= maxBytes) out.push({ key: resultCacheKey(prefix, e.model, e.version, e.digest), value });
    }
    return out;
  };
  const putMany = async (entries: readonly CacheEntry[]): Promise<number> => {
    const writes = encodeAll(entries);
    if (writes.length === 0) return 0;
    if (writes.length === 1 || isCluster(redis)) {
      // A cluster spreads these keys over its shards: concurrent SETs, which ioredis sends per node.
      await Promise.all(writes.map((w) => redis.set(w.key, w.value, 'EX', ttlS)));
    } else {
      const pipeline = redis.pipeline();
      for (const w of writes) pipeline.set(w.key, w.value, 'EX', ttlS);
      await execOrThrow(pipeline);
    }
    return writes.length;
  };
  return {
    async get(model, version, digest) {
      const raw = await redis.getBuffer(resultCacheKey(prefix, model, version, digest));
      return raw === null ? null : decodeEntry(raw);
    },
    async put(model, version, digest, result) {
      return (await putMany([{ model, version, digest, ...result }])) === 1;
    },
    putMany,
  };
}

/** sha256 (hex) of the canonical form described in the header. */
export function requestDigest(target: DigestTarget): string {
  const tensors = [...target.tensors].sort((a, b) => compare(a.name, b.name));
  const head = JSON.stringify({
    tenant: target.tenant,
    model: target.modelSha256,
    outputs: target.outputs ? [...target.outputs].sort(compare) : null,
    tensors: tensors.map((t) => [t.name, t.datatype, t.shape, t.bytes.byteLength]),
  });
  const hash = createHash('sha256');
  // The head's length first, and every tensor's length in it: no two requests hash the same bytes.
  const headBytes = Buffer.from(head, 'utf8');
  const length = Buffer.alloc(4);
  length.writeUInt32LE(headBytes.byteLength);
  hash.update(length).update(headBytes);
  for (const t of tensors) hash.update(t.bytes);
  return hash.digest('hex');
}

function encodeEntry(entry: CacheEntry, storedAt: number): Buffer {
  const header = Buffer.from(JSON.stringify({ specs: entry.outputs.specs, workerId: entry.workerId, storedAt }), 'utf8');
  const start = align(4 + header.byteLength);
  const value = Buffer.alloc(start + entry.outputs.bytes.byteLength);
  value.writeUInt32LE(header.byteLength, 0);
  value.set(header, 4);
  value.set(entry.outputs.bytes, start);
  return value;
}

/** An entry as written by encodeEntry; anything else (a foreign or truncated value) is null. */
function decodeEntry(raw: Buffer): CachedResult | null {
  if (raw.byteLength < 4) return null;
  const n = raw.readUInt32LE(0);
  const start = align(4 + n);
  if (start > raw.byteLength) return null;
  let header: Partial<CachedResult>;
  try {
    header = JSON.parse(raw.toString('utf8', 4, 4 + n)) as Partial<CachedResult>;
  } catch {
    return null;
  }
  const bytes = aligned(raw.subarray(start));
  const { specs, workerId, storedAt } = header;
  if (!Array.isArray(specs) || typeof workerId !== 'string' || typeof storedAt !== 'number') return null;
  if (!specs.every((s) => fits(s, bytes.byteLength))) return null;
  return { specs, bytes, workerId, storedAt };
}

function fits(spec: PackedSpec, total: number): boolean {
  return (
    typeof spec === 'object' &&
    spec !== null &&
    typeof spec.name === 'string' &&
    Array.isArray(spec.shape) &&
    Number.isSafeInteger(spec.offset) &&
    Number.isSafeInteger(spec.length) &&
    spec.offset >= 0 &&
    spec.length >= 0 &&
    spec.offset + spec.length <= total
  );
}

/** ioredis' pipeline reports each command's error in its reply instead of rejecting. */
async function execOrThrow(pipeline: { exec(): Promise<unknown> }): Promise<void> {
  const replies = (await pipeline.exec()) as Array<[Error | null, unknown]> | null;
  const failed = replies?.find(([err]) => err !== null);
  if (failed) throw failed[0];
}

function align(n: number): number {
  return Math.ceil(n / ALIGN) * ALIGN;
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
