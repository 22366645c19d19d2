/**
 * A job's inputs charged to its tenant's stored-bytes budget (MAX_STORED_BYTES_PER_TENANT,
 * infra/redis/stored-bytes.ts) before its entry is written: the packed size is known from the
 * validated tensors, so a tenant at its budget is refused before Redis holds a byte more. Asked
 * for beside the open-job slot (open-job-slot.ts) and the result-cache lookup, in the same
 * round trip, and given back the same way (a cache hit, a failure before the queue).
 *
 * Refusals: 413 `inputs_exceed_storage_budget` when this job's inputs alone pass the budget (it
 * can never fit); 429 `storage_budget_exhausted` with Retry-After when what the tenant keeps
 * already leaves no room (the oldest charge's expiry: room comes back then at the latest).
 */
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { StoredBytes } from '../../infra/redis/stored-bytes.ts';
import type { Clock } from '../ports.ts';
import { ledgerSlot, type OpenJobSlot } from './open-job-slot.ts';

export interface StoredBytesBudget {
  ledger: Pick<StoredBytes, 'admit' | 'release'>;
  /** Bytes a tenant's kept inputs and outputs may hold (MAX_STORED_BYTES_PER_TENANT). */
  maxPerTenant: number;
}

export function reserveStoredBytes(
  deps: { storedBytes?: StoredBytesBudget; clock: Pick<Clock, 'now'> },
  tenant: string,
  id: string,
  bytes: number,
): OpenJobSlot {
  if (!deps.storedBytes) return { taken: Promise.resolve(), giveBack: () => undefined };
  const { ledger, maxPerTenant: budget } = deps.storedBytes;
  if (bytes > budget) {
    const taken = Promise.reject(
      new InvalidInputError(
        'inputs_exceed_storage_budget',
        `this job's inputs take ${mib(bytes)} once stored, more than the ${mib(budget)} a tenant's jobs may keep in the job store (MAX_STORED_BYTES_PER_TENANT); send fewer rows per job`,
        { status: 413 },
      ),
    );
    taken.catch(() => undefined);
    return { taken, giveBack: () => undefined };
  }
  return ledgerSlot(
    ledger.admit(tenant, id, bytes, budget),
    ({ total, oldestExpiresAt }) => {
      const now = deps.clock.now();
      const retryAfterS = Math.max(1, Math.ceil(((oldestExpiresAt ?? now) - now) / 1000));
      throw new InvalidInputError(
        'storage_budget_exhausted',
        `tenant ${tenant}'s jobs keep ${mib(total)} of inputs and outputs in the job store, and this job's inputs need ${mib(bytes)} more: ` +
          `its budget is ${mib(budget)} (MAX_STORED_BYTES_PER_TENANT). Outputs are kept for the jobs' retention (JOB_RETENTION_S), inputs until the job ends; ` +
          `the oldest frees in ${retryAfterS} s. Retry then, cancel queued jobs you no longer need, or ask the operator for a shorter JOB_RETENTION_S`,
        { status: 429, retryAfterS },
      );
    },
    () => ledger.release(tenant, [id]),
  );
}

function mib(bytes: number): string {
  return `${(bytes / (1024 * 1024)).toFixed(1)} MiB`;
}
