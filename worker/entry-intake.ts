/**
 * One queue entry from taking to result (infra/contracts/entry.ts): the entry-job half of the
 * intake (intake.ts hands over every job named `entry`).
 *
 *   read      inputs + skip set, one round trip (entry-inputs.ts)
 *   sort      each member: skipped (in the skip set: never run) | expired (waited past its own
 *             deadline: deadline_exceeded, it alone) | live
 *   check     the layout against the manifest; invalid → every live member fails invalid_input
 *   run       the live members' rows through the batcher (entry-run.ts); a member ORT rejects
 *             alone fails invalid_input or inference_failed (engine/rejections.ts, ORT's own
 *             message to onRejected, never to the tenant)
 *   write     the succeeded members' output rows packed into `<p>:{q}:out:<entryId>` (EX the
 *             jobs' retention; charged first to the tenant's stored bytes) and, for members that carry a cacheDigest, result-cache entries:
 *             written before the entry completes, so whoever sees a member succeeded finds them
 *   return    the EntryResult (BullMQ's returnvalue): per member its outcome, row and timings
 *
 * A member's failure is an outcome, not an exception: the entry completes. What is thrown (the
 * engine lost, Redis failing, the inputs missing) is the entry's, and BullMQ retries it whole.
 * Its inputs key is deleted by `entryEnded`, once BullMQ has finished the entry for good: a
 * worker that dies after writing outputs leaves the entry to be run again, from its inputs.
 */
import type { EntryData, EntryMember, EntryResult, MemberOutcome } from '../infra/contracts/entry.ts';
import type { ModelManifest, TensorSpec } from '../infra/contracts/manifest.ts';
import type { ValidateLimits } from '../infra/contracts/oip-validate.ts';
import { type PackedSet, packTensors } from '../infra/contracts/packed-tensors.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import { entryInputsKey, entryOutputsKey } from '../infra/redis/keys.ts';
import type { OpenJobsReleaser } from '../infra/redis/open-jobs.ts';
import type { CacheEntry, ResultCache } from '../infra/redis/result-cache.ts';
import type { StoredBytes } from '../infra/redis/stored-bytes.ts';
import type { EngineTensor } from './engine/engine.ts';
import { rejectionOf } from './engine/rejections.ts';
import { dtypeToDatatype } from './engine/tensor-codec.ts';
import { checkEntry, openInputs, type RowRange, readEntry, selectRows } from './entry-inputs.ts';
import { type EntryRunDeps, type LiveMember, type RunOutcome, runMembers } from './entry-run.ts';

export type JobOutcome = 'succeeded' | 'failed' | 'retry';

export interface EntryDeps extends Omit<EntryRunDeps, 'outputNames'> {
  redis: Pick<RedisClient, 'pipeline' | 'set'>;
  prefix: string;
  queue: string;
  manifest: ModelManifest;
  bounds: Required<ValidateLimits>;
  workerId: string;
  /** JOB_RETENTION_S: how long the outputs key lives. */
  retentionS: number;
  results?: Pick<ResultCache, 'putMany'>;
  /** The tenants' stored-bytes ledger (MAX_STORED_BYTES_PER_TENANT): outputs charged, ended jobs' inputs released; none when absent. */
  storedBytes?: StoredBytesLedger;
  onCacheError?: (err: unknown) => void;
  onRejected?: (e: { jobId: string; code: string; ortMessage: string }) => void;
  onJobDone?: (e: { outcome: JobOutcome; queueMs: number; rows: number }) => void;
}

/** The worker's side of infra/redis/stored-bytes.ts: releases are batched (open-jobs.ts's releaser takes its shape). */
export interface StoredBytesLedger {
  ledger: Pick<StoredBytes, 'charge'>;
  releaser: Pick<OpenJobsReleaser, 'release'>;
}

interface Live extends LiveMember {
  member: EntryMember;
  /** Its first row in the entry's inputs. */
  start: number;
  queueMs: number;
}

/** `startedAt`: when BullMQ handed the entry to this worker (its processedOn). */
export async function processEntry(deps: EntryDeps, entryId: string, data: EntryData, startedAt: number): Promise<EntryResult> {
  const read = await readEntry(deps.redis, deps.prefix, deps.queue, entryId);
  const members: Record<string, MemberOutcome> = {};
  const live: Live[] = [];
  let start = 0;
  for (const member of data.members) {
    const queueMs = Math.max(0, startedAt - member.submittedAt);
    if (read.skipped.has(member.id)) members[member.id] = { status: 'skipped' };
    else if (member.timeoutMs !== undefined && queueMs > member.timeoutMs) {
      const message = `the job waited ${queueMs} ms for a worker; its deadline was ${member.timeoutMs} ms`;
      members[member.id] = failed('deadline_exceeded', message, queueMs, deps);
    } else live.push({ id: member.id, rows: member.rows, member, start, queueMs });
    start += member.rows;
  }
  const result: EntryResult = { entry: 1, workerId: deps.workerId, outputs: [], members };
  if (live.length === 0) return result;
  if (read.bytes === null) {
    // Retried like any fault of ours (the API writes the inputs before the entry); shown to the
    // tenant once the attempts are spent, so in its words: no key names, no entry id.
    retry(live, deps);
    throw new Error("the job's inputs are no longer stored (they expired or were lost)");
  }

  let run: RunOutcome;
  try {
    checkEntry(data, deps.manifest, deps.bounds);
    const inputs = openInputs(data.inputs, read.bytes);
    const rangesOf = (ms: readonly LiveMember[]): RowRange[] =>
      (ms as readonly Live[]).map((m) => ({ start: m.start, end: m.start + m.rows }));
    run = await runMembers({ ...deps, outputNames: wantedOutputs(data, deps.manifest) }, live, (ms, keep) =>
      selectRows(inputs, merge(rangesOf(ms)), keep),
    );
  } catch (err) {
    if (!(err instanceof InvalidInputError)) {
      retry(live, deps);
      throw err;
    }
    for (const m of live) members[m.id] = failed('invalid_input', err.message, m.queueMs, deps);
    return result;
  }

  for (const m of live) {
    const ran = run.ran.get(m.id);
    if (ran) {
      members[m.id] = {
        status: 'succeeded',
        row: ran.row,
        timings: { queueMs: m.queueMs, inferMs: ran.inferMs, batchRows: ran.batchRows },
      };
      continue;
    }
    const ortMessage = run.rejected.get(m.id) ?? 'no outcome';
    const { code, message } = rejectionOf(ortMessage);
    deps.onRejected?.({ jobId: m.id, code, ortMessage });
    members[m.id] = failed(code, message, m.queueMs, deps);
  }
  if (run.ran.size > 0) {
    const packed = packOutputs(run.outputs, wantedOutputs(data, deps.manifest), deps.manifest.outputs);
    result.outputs = packed.specs;
    await writeOutputs(deps, entryId, data.tenant, packed, cacheEntries(deps, live, run, packed)).catch((err: unknown) => {
      retry(live, deps);
      throw err;
    });
  }
  for (const m of live) if (run.ran.has(m.id)) deps.onJobDone?.({ outcome: 'succeeded', queueMs: m.queueMs, rows: m.rows });
  return result;
}

/**
 * The entry has ended for good (completed, or failed with its attempts spent or its workers
 * crashed): its inputs are no longer needed, and none of its members is open for its tenant
 * (a skipped one was released by the API already; releasing it again changes nothing), nor are
 * its inputs kept: their charges to the tenant's stored bytes go (its outputs' stay, with them).
 */
export function entryEnded(
  deps: {
    redis: Pick<RedisClient, 'unlink'>;
    prefix: string;
    queue: string;
    openJobs?: Pick<OpenJobsReleaser, 'release'> | undefined;
    storedBytes?: StoredBytesLedger | undefined;
  },
  entryId: string,
  data: EntryData,
  onError: (err: unknown) => void,
): void {
  deps.redis.unlink(entryInputsKey(deps.prefix, deps.queue, entryId)).catch(onError);
  for (const m of data.members) {
    deps.openJobs?.release(data.tenant, m.id);
    deps.storedBytes?.releaser.release(data.tenant, m.id);
  }
}

function failed(code: string, message: string, queueMs: number, deps: Pick<EntryDeps, 'onJobDone'>): MemberOutcome {
  deps.onJobDone?.({ outcome: 'failed', queueMs, rows: 0 });
  return { status: 'failed', error: { code, message }, timings: { queueMs } };
}

function retry(live: readonly Live[], deps: Pick<EntryDeps, 'onJobDone'>): void {
  for (const m of live) deps.onJobDone?.({ outcome: 'retry', queueMs: m.queueMs, rows: 0 });
}

function wantedOutputs(data: EntryData, manifest: ModelManifest): string[] {
  return (data.outputs ?? manifest.outputs).map((o) => o.name);
}

/** Adjacent ranges as one (every member live: a single range, so the views are used as they are). */
function merge(ranges: RowRange[]): RowRange[] {
  const out: RowRange[] = [];
  for (const r of ranges) {
    const last = out[out.length - 1];
    if (last && last.end === r.start) last.end = r.end;
    else out.push({ ...r });
  }
  return out;
}

/** In row layout, each output marked with where the model keeps its rows, for the API to show it so. */
function packOutputs(outputs: Record<string, EngineTensor>, names: readonly string[], specs: readonly TensorSpec[]): PackedSet {
  const axes = new Map(specs.map((s) => [s.name, s.batchAxis]));
  return packTensors(
    names.map((name) => {
      const t = outputs[name] as EngineTensor;
      // packTensors writes it only where the model keeps its rows elsewhere than axis 0.
      return { name, datatype: dtypeToDatatype(t.type), shape: t.dims, data: t.data, batchAxis: axes.get(name) };
    }),
  );
}

/** One cache entry per succeeded member with a digest: its own rows of every output. */
function cacheEntries(deps: EntryDeps, live: readonly Live[], run: RunOutcome, packed: PackedSet): CacheEntry[] {
  if (!deps.results) return [];
  const { name: model, version } = deps.manifest;
  const entries: CacheEntry[] = [];
  for (const m of live) {
    const ran = run.ran.get(m.id);
    const digest = m.member.cacheDigest;
    if (!ran || digest === undefined) continue;
    const outputs = run.ran.size === 1 ? packed : packMemberRows(run.outputs, packed, ran.row, ran.row + m.rows);
    entries.push({ model, version, digest, outputs, workerId: deps.workerId });
  }
  return entries;
}

function packMemberRows(outputs: Record<string, EngineTensor>, packed: PackedSet, from: number, to: number): PackedSet {
  return packTensors(
    packed.specs.map((spec) => {
      const t = outputs[spec.name] as EngineTensor;
      const rows = t.dims[0] ?? 0;
      const rowSize = rows === 0 ? 0 : t.data.length / rows;
      const data = Array.isArray(t.data) ? t.data.slice(from * rowSize, to * rowSize) : t.data.subarray(from * rowSize, to * rowSize);
      return { name: spec.name, datatype: spec.datatype, shape: [to - from, ...t.dims.slice(1)], data, batchAxis: spec.batchAxis };
    }),
  );
}

/**
 * The outputs key (its failure fails the attempt) beside the cache entries (theirs only goes to
 * onCacheError). The outputs are charged to the tenant's stored bytes first, whatever its
 * budget: the work is done and kept, and the tenant's next submits are refused instead. Charged
 * before written, so a failure between the two errs high (the charge expires), never low; a
 * retried attempt charges the same id, counted once.
 */
async function writeOutputs(
  deps: EntryDeps,
  entryId: string,
  tenant: string,
  packed: PackedSet,
  cache: readonly CacheEntry[],
): Promise<void> {
  const cached =
    cache.length > 0 && deps.results ? deps.results.putMany(cache).catch((err: unknown) => deps.onCacheError?.(err)) : undefined;
  await deps.storedBytes?.ledger.charge(tenant, `out:${entryId}`, packed.bytes.byteLength);
  await deps.redis.set(entryOutputsKey(deps.prefix, deps.queue, entryId), packed.bytes, 'EX', deps.retentionS);
  await cached;
}
