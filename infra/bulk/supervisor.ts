/**
 * The dispatcher's bulk supervisor: every `pollMs` it looks at the running runs and drives each
 * whose lease is free (its creator never drove it — an API-created run — or its driver died and
 * the lease lapsed). A run driven by a live CLI or another supervisor is left alone: the lease
 * says so. `close()` aborts every drive (their leases are released, their chunks stay queued)
 * and resolves when all have stopped; safe to call twice.
 */
import type { BulkDeps } from './bulk-runs.ts';
import { type DriveOptions, driveBulkRun } from './driver.ts';
import { createRunStore } from './run-store.ts';

export interface SupervisorOptions {
  owner: string;
  pollMs?: number;
  /** Passed to every drive (window, lease TTL, intervals). */
  drive?: Omit<DriveOptions, 'owner' | 'signal'>;
}

export function startBulkSupervisor(deps: BulkDeps, options: SupervisorOptions): { close(): Promise<void> } {
  const store = createRunStore(deps.redis, deps.prefix);
  const stop = new AbortController();
  const driving = new Map<string, Promise<void>>();
  const pollMs = options.pollMs ?? 5_000;

  const adopt = (runId: string) => {
    const drive = driveBulkRun(deps, { ref: runId }, { ...options.drive, owner: options.owner, signal: stop.signal })
      .then(({ run, leaseHeldBy }) => {
        if (!leaseHeldBy) deps.log.info({ runId, status: run.status }, 'bulk supervisor: drive ended');
      })
      .catch((err: unknown) => deps.log.warn({ err, runId }, 'bulk supervisor: drive failed; retrying later'))
      .finally(() => driving.delete(runId));
    driving.set(runId, drive);
  };

  const loop = (async () => {
    while (!stop.signal.aborted) {
      try {
        // Refs (run-store.ts runRef): ids are only unique per tenant.
        for (const runId of await store.runningIds()) {
          if (stop.signal.aborted || driving.has(runId)) continue;
          // Cheap look first: a held lease means a live driver, no need to try.
          if ((await deps.redis.exists(store.leaseKey(runId))) === 0) adopt(runId);
        }
      } catch (err) {
        deps.log.warn({ err }, 'bulk supervisor: listing runs failed');
      }
      await deps.clock.sleep(pollMs, stop.signal).catch(() => undefined);
    }
  })();

  let closing: Promise<void> | undefined;
  return {
    close() {
      closing ??= (async () => {
        stop.abort();
        await loop;
        await Promise.allSettled([...driving.values()]);
      })();
      return closing;
    },
  };
}
