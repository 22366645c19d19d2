/**
 * `driveBulkRun`: drives one run to an end while holding its lease (one driver per run), for the
 * CLI (in-process, with a progress display) and the dispatcher's supervisor alike.
 *
 *   no lease (another live driver holds it) → returns at once with `leaseHeldBy`: the caller watches
 *   lease taken → RunDriver (run-driver.ts) until the run ends, the signal aborts, or the lease is lost
 *   → lease released (if still ours) → returns the run's view
 *
 * The lease is renewed every third of its TTL in the background; a renewal that finds it taken
 * stops the drive at its next step. Abort leaves the run `running` with its queued chunks in
 * place: the next drive (this run id again, or the supervisor once the lease lapses) continues.
 */

import type { BulkRunView } from '../contracts/bulk.ts';
import { NotFoundError } from '../kernel/errors.ts';
import type { BulkDeps } from './bulk-runs.ts';
import { createLease, type Lease } from './lease.ts';
import { RunDriver } from './run-driver.ts';
import { createRunStore, viewOf } from './run-store.ts';

export const DEFAULT_WINDOW_CHUNKS = 16;
export const DEFAULT_LEASE_TTL_MS = 15_000;

export interface DriveOptions {
  owner: string;
  signal?: AbortSignal;
  onProgress?(run: BulkRunView): void;
  /** Progress saved and onProgress called at most this often; default 1000. */
  progressIntervalMs?: number;
  // bulk-core additions below, all optional.
  /** Chunks in Redis at once (enqueued, not yet counted); default 16. */
  windowChunks?: number;
  /** Longest wait between looks at outstanding chunks; default 1000 (a finished chunk wakes the driver at once). */
  pollMs?: number;
  /** Default 15 s: how long a crashed driver holds a run up before the supervisor adopts it. */
  leaseTtlMs?: number;
  /** `bulk.progress` webhooks at most this often; default 30 s. */
  webhookIntervalMs?: number;
}

/**
 * `target`: the run as its tenant names it (the CLI), or its ref (run-store.ts `runRef`), as the
 * supervisor reads it from the running set.
 */
export async function driveBulkRun(
  deps: BulkDeps,
  target: { tenant: string; id: string } | { ref: string },
  options: DriveOptions,
): Promise<{ run: BulkRunView; leaseHeldBy?: string }> {
  const store = createRunStore(deps.redis, deps.prefix);
  const record = 'ref' in target ? await store.read(target.ref) : await store.find(target.tenant, target.id);
  if (!record) throw new NotFoundError('run_not_found', `no bulk run ${'ref' in target ? target.ref : target.id}`);
  const runId = record.ref;
  if (record.status !== 'running') return { run: viewOf(record) };
  const ttlMs = options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
  const lease = createLease(deps.redis, store.leaseKey(runId), options.owner, ttlMs);
  if (!(await lease.acquire())) return { run: viewOf(record), leaseHeldBy: (await lease.holder()) ?? 'another driver' };

  const stop = new AbortController();
  const onAbort = () => stop.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onAbort, { once: true });
  if (options.signal?.aborted) stop.abort(options.signal.reason);
  const keeper = keepLease(deps, lease, ttlMs, stop, runId);
  try {
    const settings = {
      windowChunks: Math.max(1, options.windowChunks ?? DEFAULT_WINDOW_CHUNKS),
      pollMs: options.pollMs ?? 1000,
      progressIntervalMs: options.progressIntervalMs ?? 1000,
      webhookIntervalMs: options.webhookIntervalMs ?? 30_000,
      ...(options.onProgress ? { onProgress: (run: BulkRunView) => options.onProgress?.(run) } : {}),
    };
    await new RunDriver(deps, store, record, settings, stop.signal).run();
  } catch (err) {
    // Aborted (by the caller, or the lease lost): the run goes on under the next driver.
    if (!stop.signal.aborted) throw err;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    await keeper.close();
    await lease.release().catch((err: unknown) => deps.log.warn({ err, runId }, 'bulk lease not released; it expires by itself'));
  }
  const last = await store.read(runId);
  return { run: viewOf(last ?? record) };
}

/** Renews the lease every third of its TTL; aborts `stop` when it was taken by another driver. */
function keepLease(deps: BulkDeps, lease: Lease, ttlMs: number, stop: AbortController, runId: string) {
  const done = new AbortController();
  const loop = (async () => {
    while (!done.signal.aborted && !stop.signal.aborted) {
      try {
        await deps.clock.sleep(ttlMs / 3, done.signal);
      } catch {
        return;
      }
      // A renewal that fails (Redis unreachable) is tried again; the TTL decides if it was too long.
      const held = await lease.renew().catch((err: unknown) => {
        deps.log.warn({ err, runId }, 'bulk lease renewal failed');
        return true;
      });
      if (!held) {
        deps.log.warn({ runId }, 'bulk lease lost to another driver; stopping');
        stop.abort(new Error(`lease on bulk run ${runId} lost`));
      }
    }
  })();
  return {
    async close() {
      done.abort();
      await loop;
    },
  };
}
