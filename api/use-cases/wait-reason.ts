/**
 * Why a job waits, in words a caller can act on: for a queued job's view (GET /v1/jobs/{id}),
 * its event stream, and a sync inference that timed out (the 504's message). Read from the
 * workers' heartbeats through fleet-view.ts, the queue's depth, the deployment and the cold start
 * the scaler measured, only when asked for a waiting job, so a request answered in time pays
 * nothing for it.
 *
 *   a worker took the job                    → running: a worker is running it (the model is slow on it)
 *   no live worker of M@V                    → no_worker: none for M@V yet (the deployment's min is 0:
 *                                              the scaler is starting one) — or, with min > 0, the
 *                                              scaler is replacing one; with no deployment, the
 *                                              worker that served it is gone
 *   workers, none active, one starting       → worker_starting, in its phase (downloading, loading,
 *                                              warming up) and for how long
 *   workers, none active, all standby        → standby: warmed, not yet activated
 *   active workers                           → busy: N requests queued ahead
 *
 * Where the scaler has measured the model's cold starts (their planning quantile), the reason
 * says how long one takes and `expectedInMs` estimates when a worker will serve: a cold start
 * from now with none started, what is left of one for a starting worker (0 once overdue).
 *
 * A read that fails leaves the reason out: a view or a 504 must not become a 500 for want of a why.
 */
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import type { JobView } from '../ports.ts';
import type { FleetView, WorkerSighting } from './fleet-view.ts';
import type { SubmitDeployment } from './job-target.ts';
import type { SubmitJobDeps } from './submit-job.ts';

export type WaitReasonDeps = Pick<SubmitJobDeps, 'jobs' | 'deployments' | 'clock'> & { fleet?: FleetView };

export const WAIT_CODES = ['running', 'no_worker', 'worker_starting', 'standby', 'busy'] as const;
export type WaitCode = (typeof WAIT_CODES)[number];

/** Why a job waits (see the header). */
export interface WaitReason {
  code: WaitCode;
  /** A clause: "a worker is starting (loading the model, 3.0 s in; a cold start of m takes about 5.2 s)". */
  message: string;
  /** worker_starting: the phase of the starting worker furthest along. */
  phase?: WorkerState;
  /** Estimated time until a worker serves, from the measured cold start; absent when none is measured or it does not apply. */
  expectedInMs?: number;
  /** busy: jobs queued for this version besides this one. */
  queued?: number;
}

/** The reason, as a clause (for the sync 504); undefined when it could not be read. */
export async function timeoutReason(
  deps: WaitReasonDeps,
  job: { model: string; version: string },
  status: JobView['status'],
): Promise<string | undefined> {
  return (await waitReason(deps, job, status))?.message;
}

/** Why a queued or running job waits; undefined when it could not be read or the job no longer waits. */
export async function waitReason(
  deps: WaitReasonDeps,
  job: { model: string; version: string },
  status: JobView['status'],
): Promise<WaitReason | undefined> {
  if (status === 'running') return { code: 'running', message: 'a worker is running it (the model has not finished)' };
  if (status !== 'queued' || !deps.fleet) return undefined;
  const fleet = deps.fleet;
  try {
    const [workers, deployment, coldStartMs] = await Promise.all([
      fleet.workers(job.model, job.version),
      deps.deployments.get(job.model),
      fleet.coldStartMs ? fleet.coldStartMs(job.model).catch(() => undefined) : undefined,
    ]);
    const took = coldStartMs === undefined ? '' : `; a cold start of ${job.model} takes about ${secs(coldStartMs)}`;
    if (workers.length === 0) {
      const reason: WaitReason = { code: 'no_worker', message: `${noWorker(job, deployment)}${took}` };
      return deployment && coldStartMs !== undefined ? { ...reason, expectedInMs: coldStartMs } : reason;
    }
    if (workers.some((w) => w.state === 'active')) {
      const queued = Math.max(0, (await deps.jobs.depth(job.model, job.version)) - 1);
      return { code: 'busy', message: `workers are busy: ${queued} ${queued === 1 ? 'request' : 'requests'} queued ahead`, queued };
    }
    const furthest = furthestStarting(workers);
    if (!furthest) return { code: 'standby', message: 'a worker is in standby and the scaler has not activated it yet' };
    return startingReason(furthest, coldStartMs, took, deps.clock.now());
  } catch {
    return undefined;
  }
}

const PHASE_WORDS: Partial<Record<WorkerState, string>> = {
  launching: 'launching',
  downloading: 'downloading the model',
  loading: 'loading the model',
  warming: 'warming up',
};
/** Starting phases, in order: the furthest along is the one to wait for. */
const STARTING: readonly WorkerState[] = ['launching', 'downloading', 'loading', 'warming'];

function furthestStarting(workers: readonly WorkerSighting[]): WorkerSighting | undefined {
  let best: WorkerSighting | undefined;
  for (const w of workers) {
    const rank = STARTING.indexOf(w.state);
    if (rank >= 0 && (!best || rank > STARTING.indexOf(best.state))) best = w;
  }
  return best;
}

function startingReason(w: WorkerSighting, coldStartMs: number | undefined, took: string, now: number): WaitReason {
  const phaseSince = w.stateSince !== undefined ? ` for ${secs(Math.max(0, now - w.stateSince))}` : '';
  const reason: WaitReason = {
    code: 'worker_starting',
    message: `a worker is starting (${PHASE_WORDS[w.state] ?? w.state}${phaseSince}${took})`,
    phase: w.state,
  };
  if (coldStartMs === undefined || w.startedAt === undefined) return reason;
  return { ...reason, expectedInMs: Math.max(0, coldStartMs - Math.max(0, now - w.startedAt)) };
}

function noWorker(job: { model: string; version: string }, deployment: SubmitDeployment | null): string {
  const which = `${job.model}@${job.version}`;
  if (!deployment) return `no worker for ${which} (the worker that served it has stopped, and ${job.model} is not deployed)`;
  if (deployment.min === 0) return `no worker for ${which} yet (the deployment's min is 0: the scaler is starting one)`;
  return `no worker for ${which} yet (the scaler is starting one)`;
}

function secs(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}
