/**
 * The result cache (issue 3 §7): a repeated request is answered from an earlier run's outputs
 * instead of running the model again. Workers write an entry when a job succeeds; the API looks
 * it up at submit (through the job queue, which records a hit as an already-succeeded job).
 *
 *   <prefix>:result:<model>:<version>:<digest>   JSON {outputs, workerId, storedAt}, EX ttlS
 *
 * `digest` is the sha256 of canonical JSON holding the model's own sha256 (so a version
 * re-published with other bytes never serves the old bytes' answers), the inputs sorted by name
 * and the requested output names sorted (or null: all outputs). Request `parameters` and the
 * OIP `id` are left out: workers do not pass them to the model, so they cannot change outputs.
 * Model and version stay readable in the key so one version's entries can be found and dropped.
 *
 * Only successful results are written, each by the worker that computed it for exactly that
 * model version; a miss costs one GET. Two spellings of the same value (`1` and `1.0` are one
 * JSON number, but `true` and `1` for BOOL are not) may miss each other: a miss only costs a run.
 * Distinct values never share a digest: `-0`, which JSON.stringify would write as `0`, is
 * written as the string "-0" (no numeric datatype accepts strings except the 64-bit integers,
 * where "-0" means 0 anyway).
 */
import { createHash } from 'node:crypto';
import type { JobData } from '../contracts/job.ts';
import type { OipTensor } from '../contracts/oip.ts';
import { resultCacheKey } from './keys.ts';

/** How long an entry lives (the lead moves this to RESULT_CACHE_TTL_S in infra/kernel/config.ts). */
export const DEFAULT_RESULT_CACHE_TTL_S = 3600;
/**
 * Larger serialised results are not cached: BullMQ already keeps every result for the job's
 * retention, and a second copy of large outputs would double Redis memory for little gain.
 */
export const DEFAULT_RESULT_CACHE_MAX_BYTES = 1_048_576;

/** The slice of ioredis this module uses. */
export interface ResultCacheRedis {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ex: 'EX', seconds: number): Promise<unknown>;
}

/** What an entry is keyed by: the model version that runs and what it is asked. */
export interface CacheTarget extends Pick<JobData, 'tenant' | 'model' | 'version' | 'inputs' | 'outputs'> {
  /** sha256 of the model's bytes (its manifest's `sha256`). */
  modelSha256: string;
}

export interface CachedResult {
  outputs: OipTensor[];
  /** The worker that computed it, for tracing. */
  workerId: string;
  /** Epoch ms when it was stored. */
  storedAt: number;
}

export interface ResultCache {
  /** null on a miss (also for an entry that cannot be read). */
  get(target: CacheTarget): Promise<CachedResult | null>;
  /** Stores a successful result; false when it is larger than `maxBytes` and was not stored. */
  put(target: CacheTarget, result: Omit<CachedResult, 'storedAt'>): Promise<boolean>;
}

export interface ResultCacheOptions {
  /** Key prefix (QUEUE_PREFIX). */
  prefix: string;
  /** Entry lifetime; default DEFAULT_RESULT_CACHE_TTL_S. Only writers use it. */
  ttlS?: number;
  /** Default DEFAULT_RESULT_CACHE_MAX_BYTES. */
  maxBytes?: number;
  now?: () => number;
}

export function createResultCache(redis: ResultCacheRedis, options: ResultCacheOptions): ResultCache {
  const { prefix, ttlS = DEFAULT_RESULT_CACHE_TTL_S, maxBytes = DEFAULT_RESULT_CACHE_MAX_BYTES, now = Date.now } = options;
  const key = (target: CacheTarget) => resultCacheKey(prefix, target.model, target.version, requestDigest(target));
  return {
    async get(target) {
      const raw = await redis.get(key(target));
      return raw === null ? null : parseEntry(raw);
    },
    async put(target, result) {
      const entry: CachedResult = { outputs: result.outputs, workerId: result.workerId, storedAt: now() };
      const json = JSON.stringify(entry);
      if (Buffer.byteLength(json) > maxBytes) return false;
      await redis.set(key(target), json, 'EX', ttlS);
      return true;
    },
  };
}

/** sha256 (hex) of the canonical form described in the header. */
export function requestDigest(target: Pick<CacheTarget, 'tenant' | 'modelSha256' | 'inputs' | 'outputs'>): string {
  const inputs = [...target.inputs]
    .sort((a, b) => compare(a.name, b.name))
    // A string is a bulk chunk's packed data (infra/contracts/binary-tensor.ts): never cached, but still keyed exactly.
    .map((t) => ({
      name: t.name,
      datatype: t.datatype,
      shape: t.shape,
      data: typeof t.data === 'string' ? t.data : keepNegativeZero(t.data),
    }));
  const outputs = target.outputs ? target.outputs.map((o) => o.name).sort(compare) : null;
  // The tenant is part of the key: a hit (visible as `cached: true`) must never tell one tenant
  // what another recently sent.
  const canonical = JSON.stringify({ tenant: target.tenant, model: target.modelSha256, inputs, outputs });
  return createHash('sha256').update(canonical).digest('hex');
}

/** A plain scan first: a JSON.stringify replacer would make every hash about four times slower. */
function keepNegativeZero(data: OipTensor['data']): OipTensor['data'] {
  if (!data.some((v) => Object.is(v, -0))) return data;
  return data.map((v) => (Object.is(v, -0) ? '-0' : v));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** An entry as written by put(); anything else (a foreign or truncated value) is a miss. */
function parseEntry(raw: string): CachedResult | null {
  try {
    const value = JSON.parse(raw) as Partial<CachedResult>;
    if (!Array.isArray(value.outputs) || typeof value.workerId !== 'string' || typeof value.storedAt !== 'number') return null;
    return { outputs: value.outputs, workerId: value.workerId, storedAt: value.storedAt };
  } catch {
    return null;
  }
}
