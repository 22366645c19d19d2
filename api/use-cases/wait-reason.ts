/**
 * Why a sync inference timed out, in words a caller can act on. Read only once it has timed
 * out (the workers' heartbeats through fleet-view.ts, the queue's depth, the deployment), so a
 * request answered in time pays nothing for it.
 *
 *   a worker took the job                    → a worker is running it (the model is slow on it)
 *   no live worker of M@V                    → no worker for M@V yet (the deployment's min is 0: the
 *                                              scaler is starting one) — or, with min > 0, the scaler
 *                                              is replacing one; with no deployment, the worker
 *                                              that served it is gone
 *   workers, none active, one starting       → a worker is starting (warming up)
 *   workers, none active, all standby        → a worker is in standby, not yet activated
 *   active workers                           → workers are busy: N requests queued ahead
 *
 * A read that fails leaves the reason out: the 504 must not become a 500 for want of a why.
 */
import type { JobView } from '../ports.ts';
import type { FleetView, WorkerSighting } from './fleet-view.ts';
import type { SubmitDeployment } from './job-target.ts';
import type { SubmitJobDeps } from './submit-job.ts';

export type TimeoutReasonDeps = Pick<SubmitJobDeps, 'jobs' | 'deployments'> & { fleet?: FleetView };

/** The reason, as a clause ("workers are busy: 12 requests queued ahead"); undefined when it could not be read. */
export async function timeoutReason(
  deps: TimeoutReasonDeps,
  job: { model: string; version: string },
  status: JobView['status'],
): Promise<string | undefined> {
  if (status === 'running') return 'a worker is running it (the model has not finished)';
  if (!deps.fleet) return undefined;
  try {
    const [workers, deployment] = await Promise.all([deps.fleet.workers(job.model, job.version), deps.deployments.get(job.model)]);
    if (workers.length === 0) return noWorker(job, deployment);
    if (workers.some((w) => w.state === 'active')) {
      const ahead = Math.max(0, (await deps.jobs.depth(job.model, job.version)) - 1);
      return `workers are busy: ${ahead} ${ahead === 1 ? 'request' : 'requests'} queued ahead`;
    }
    return starting(workers) ? 'a worker is starting (warming up)' : 'a worker is in standby and the scaler has not activated it yet';
  } catch {
    return undefined;
  }
}

function noWorker(job: { model: string; version: string }, deployment: SubmitDeployment | null): string {
  const which = `${job.model}@${job.version}`;
  if (!deployment) return `no worker for ${which} (the worker that served it has stopped, and ${job.model} is not deployed)`;
  if (deployment.min === 0) return `no worker for ${which} yet (the deployment's min is 0: the scaler is starting one)`;
  return `no worker for ${which} yet (the scaler is starting one)`;
}

function starting(workers: readonly WorkerSighting[]): boolean {
  return workers.some((w) => w.state !== 'standby');
}
