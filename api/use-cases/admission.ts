/**
 * Admission control: a per-deployment bound on backlog, so overload turns into fast, honest
 * refusals (503 + Retry-After) instead of a queue that grows without limit and jobs that wait
 * for minutes. Pure: the API measures depth and calls this per submission.
 *
 *   depth < backlogMax                          → admit
 *   depth ≥ backlogMax, request is degradable
 *     and the deployment has a fallback model   → admit to the fallback (its queue, not this one)
 *   depth ≥ backlogMax, request is degradable
 *     and depth < backlogMax × overflowFactor   → admit at low priority (behind every normal job)
 *   otherwise                                   → refuse with retryAfterS
 *
 * Degradable requests still meet a hard ceiling (overflowFactor × backlogMax), so "accept at
 * low priority" cannot grow the queue without limit either. Sending them to the fallback adds
 * nothing to this backlog, so no ceiling applies here (the fallback's own bound does).
 *
 * Retry-After: the jobs that must drain before one more fits, divided by the measured drain rate:
 *   retryAfterS = clamp(ceil((depth − backlogMax + 1) / drainRatePerS), 1, maxRetryAfterS)
 * With no measurement the answer is `fallbackRetryAfterS`; with a measured rate of 0 (nothing is
 * draining: no worker up) it is `maxRetryAfterS`.
 */
import type { VersionWeight } from '../../infra/deployments/deployment-store.ts';

export interface AdmissionInput {
  /** The deployment's backlog now: jobs not yet finished, over all its versions. */
  depth: number;
  /** The deployment's bound; absent = no bound, everything is admitted. */
  backlogMax?: number;
  /** The request accepts low priority rather than a refusal. */
  lowPriorityOk?: boolean;
  /** The request is degradable and the deployment has a fallback model to take it. */
  fallbackOk?: boolean;
  /** Measured jobs/s the deployment completes; absent when unknown. */
  drainRatePerS?: number;
}

export type Admission = { admit: true; priority?: 'low'; fallback?: true } | { admit: false; retryAfterS: number };

export interface AdmissionOptions {
  /** Degradable requests are admitted up to this multiple of backlogMax (default 2). */
  overflowFactor?: number;
  /** Retry-After when no drain rate is known (default 5 s). */
  fallbackRetryAfterS?: number;
  /** Retry-After ceiling (default 300 s). */
  maxRetryAfterS?: number;
}

export function checkAdmission(input: AdmissionInput, options: AdmissionOptions = {}): Admission {
  const { overflowFactor = 2, fallbackRetryAfterS = 5, maxRetryAfterS = 300 } = options;
  const { depth, backlogMax } = input;
  if (backlogMax === undefined || depth < backlogMax) return { admit: true };
  if (input.fallbackOk) return { admit: true, fallback: true };
  if (input.lowPriorityOk && depth < backlogMax * overflowFactor) return { admit: true, priority: 'low' };
  return { admit: false, retryAfterS: retryAfter(depth - backlogMax + 1, input.drainRatePerS, fallbackRetryAfterS, maxRetryAfterS) };
}

function retryAfter(excess: number, rate: number | undefined, fallbackS: number, maxS: number): number {
  const clamp = (s: number) => Math.min(maxS, Math.max(1, Math.ceil(s)));
  if (rate === undefined || !Number.isFinite(rate) || rate < 0) return clamp(fallbackS);
  if (rate === 0) return clamp(maxS);
  return clamp(excess / rate);
}

/**
 * A deployment's backlog: the depth of every listed version's queue summed (a version at weight
 * 0 takes no new jobs but its queued ones still wait in front of the workers).
 */
export async function deploymentBacklog(
  deployment: { model: string; versions: readonly VersionWeight[] },
  depth: (model: string, version: string) => Promise<number>,
): Promise<number> {
  const depths = await Promise.all(deployment.versions.map((v) => depth(deployment.model, v.version)));
  return depths.reduce((sum, d) => sum + d, 0);
}
