/**
 * A job's place among its tenant's open jobs (MAX_OPEN_JOBS_PER_TENANT), asked for before the
 * result cache is read so both take one round trip (submit-job.ts place()). Apart because it is
 * a small protocol of its own: taken (or 429) once awaited, given back at most once.
 */
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { OpenJobs } from '../../infra/redis/open-jobs.ts';

/** A job's place among its tenant's open jobs, asked for early (see place()). */
export interface OpenJobSlot {
  /** Resolves once counted; rejects with 429 `too_many_open_jobs` at the cap. */
  taken: Promise<void>;
  /** Gives a counted slot back (a cache hit, a failure before the queue); idempotent. */
  giveBack(): void;
}

export function reserveOpenJob(
  deps: { openJobs?: { store: Pick<OpenJobs, 'admit' | 'release'>; maxPerTenant: number } },
  tenant: string,
  id: string,
): OpenJobSlot {
  if (!deps.openJobs) return { taken: Promise.resolve(), giveBack: () => undefined };
  const { store, maxPerTenant } = deps.openJobs;
  return ledgerSlot(
    store.admit(tenant, id, maxPerTenant),
    ({ open }) => {
      throw new InvalidInputError(
        'too_many_open_jobs',
        `tenant ${tenant} has ${open} jobs queued or running, at its limit of ${maxPerTenant}; retry once some have finished (or cancel some)`,
        { status: 429 },
      );
    },
    () => store.release(tenant, [id]),
  );
}

/**
 * A slot asked of a Redis ledger (open jobs, stored bytes): taken once `admitted` says so, else
 * `refuse` throws the refusal; given back at most once, and only when it was counted.
 */
export function ledgerSlot<R extends { admitted: boolean }>(
  admitted: Promise<R>,
  refuse: (refused: R) => never,
  release: () => Promise<unknown> | void,
): OpenJobSlot {
  const taken = admitted.then((r) => {
    if (!r.admitted) refuse(r);
  });
  taken.catch(() => undefined); // awaited only by enqueue(): a cache hit never looks
  let given = false;
  return {
    taken,
    giveBack() {
      if (given) return;
      given = true;
      admitted.then((r) => (r.admitted ? release() : undefined)).catch(() => undefined);
    },
  };
}

/** Both slots as one: taken once both are (the first refusal wins), given back together. */
export function bothSlots(a: OpenJobSlot, b: OpenJobSlot): OpenJobSlot {
  const taken = Promise.all([a.taken, b.taken]).then(() => undefined);
  taken.catch(() => undefined);
  return {
    taken,
    giveBack() {
      a.giveBack();
      b.giveBack();
    },
  };
}
