/**
 * Admission of one submission against its deployment's live backlog (step 2 of submit-job.ts's
 * header): reads the queue depth, asks whether the fallback is usable, and turns the pure rule's
 * answer (admission.ts) into a route or a 503. Apart from admission.ts, which stays pure, and
 * from submit-job.ts, which places the job wherever this says.
 */
import type { Fallback } from '../../infra/deployments/deployment-store.ts';
import { InvalidInputError, NotFoundError, OverloadedError } from '../../infra/kernel/errors.ts';
import type { JobQueue } from '../ports.ts';
import { checkAdmission, deploymentBacklog } from './admission.ts';
import type { FleetView } from './fleet-view.ts';
import { resolveTarget, type SubmitDeployment, type TargetDeps } from './job-target.ts';
import { ensureServed } from './serving-check.ts';

/** What admission reads: queue depths, and (for a fallback) the registry, deployments and workers. */
export type AdmissionDeps = TargetDeps & { jobs: Pick<JobQueue, 'depth'>; fleet?: FleetView };

/**
 * Step 2: admission against the deployment's backlog bound (only when it has one, so unbounded
 * deployments pay no extra Redis round trip).
 */
export async function admit(
  deps: AdmissionDeps,
  deployment: SubmitDeployment | null,
  degradable: boolean,
): Promise<'normal' | 'low' | 'fallback'> {
  if (deployment?.backlogMax === undefined) return 'normal';
  const depth = await deploymentBacklog(deployment, (m, v) => deps.jobs.depth(m, v));
  const fallbackOk = degradable && deployment.fallback !== undefined && (await fallbackUsable(deps, deployment.fallback));
  const decision = checkAdmission({ depth, backlogMax: deployment.backlogMax, lowPriorityOk: degradable, fallbackOk });
  if (!decision.admit) {
    const hint = degradable
      ? ''
      : ` (or send "degradable": true to ${deployment.fallback ? 'be served by its fallback model' : 'queue at low priority'})`;
    throw new OverloadedError(
      'backlog_full',
      `${deployment.model} has ${depth} jobs queued, at its bound of ${deployment.backlogMax}; retry after ${decision.retryAfterS} s${hint}`,
      decision.retryAfterS,
    );
  }
  return decision.fallback ? 'fallback' : decision.priority === 'low' ? 'low' : 'normal';
}

/**
 * A fallback missing from the registry, or one nothing serves (serving-check.ts), counts as
 * none: the request is not the caller's mistake, and a job sent where no worker runs would never
 * end.
 */ async function fallbackUsable(deps: AdmissionDeps, fallback: Fallback): Promise<boolean> {
  try {
    const target = await resolveTarget(deps, fallback.model, fallback.version);
    await ensureServed(deps, target.manifest, target.deployment);
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    if (err instanceof InvalidInputError && err.code === 'model_not_deployed') return false;
    throw err;
  }
}

/** The fallback's own bound, with no further degradation (no fallback of a fallback). */
export async function admitStrictly(
  deps: Pick<AdmissionDeps, 'jobs'>,
  deployment: SubmitDeployment | null,
  primary: string,
): Promise<void> {
  if (deployment?.backlogMax === undefined) return;
  const depth = await deploymentBacklog(deployment, (m, v) => deps.jobs.depth(m, v));
  const decision = checkAdmission({ depth, backlogMax: deployment.backlogMax });
  if (decision.admit) return;
  throw new OverloadedError(
    'backlog_full',
    `${primary} is at its backlog bound, and so is its fallback ${deployment.model} (${depth} jobs queued, bound ${deployment.backlogMax}); retry after ${decision.retryAfterS} s`,
    decision.retryAfterS,
  );
}
