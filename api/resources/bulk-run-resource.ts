/** A bulk run's wire form (DESIGN §7): what GET /v1/bulk-runs/{id} and the bulk webhooks send, with ISO 8601 times. */
import type { BulkRunView } from '../../infra/contracts/bulk.ts';
import { iso } from './job-resource.ts';

/** GET /v1/bulk-runs/{id}: the run view with ISO times (progress fields as in the contract). */
export interface BulkRunResource extends Omit<BulkRunView, 'tenant' | 'deadline' | 'createdAt' | 'startedAt' | 'finishedAt' | 'progress'> {
  deadline?: string;
  progress: Omit<BulkRunView['progress'], 'etaAt'> & { etaAt?: string };
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  links: { self: string };
}

export function toBulkRunResource(run: BulkRunView): BulkRunResource {
  const { tenant: _tenant, deadline, createdAt, startedAt, finishedAt, progress, ...rest } = run;
  const { etaAt, ...counts } = progress;
  const resource: BulkRunResource = {
    ...rest,
    progress: etaAt === undefined ? counts : { ...counts, etaAt: iso(etaAt) },
    createdAt: iso(createdAt),
    links: { self: `/v1/bulk-runs/${run.id}` },
  };
  if (deadline !== undefined) resource.deadline = iso(deadline);
  if (startedAt !== undefined) resource.startedAt = iso(startedAt);
  if (finishedAt !== undefined) resource.finishedAt = iso(finishedAt);
  return resource;
}
