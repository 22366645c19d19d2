/**
 * Where a model no worker holds goes when its first request arrives (issue 31 §3): the pool
 * controller's placement at once, between ticks. Pure, on the same PoolWorkerViews the planner
 * takes, and in the planner's order (pool-plan.ts rule 4) so the tick that follows agrees with it:
 *
 *   1. a warm worker already holding (or loading) the model → nothing to do;
 *   2. the least-loaded warm worker that holds models and has room for this one within the
 *      memory budget (fewest jobs in flight, then fewest models);
 *   3. a standby: a warm worker holding no model;
 *   4. the least-loaded warm worker at all: the worker evicts least-recently-used models to make
 *      room itself (infra/fleet/pool-holdings.ts askLoad), never one with jobs in flight;
 *   5. no warm worker → none: the caller launches one if the pool may grow, and the tick places
 *      the model once it is warm (its queued job is the demand).
 */

import type { PoolWorkerView } from './pool-plan.ts';

export type Landing = { kind: 'held'; workerId: string } | { kind: 'load'; workerId: string; why: string } | { kind: 'none' };

/**
 * `memoryMbOf`: a model's resident memory (measured, else the caller's default); `budgetMb`: each
 * worker's budget for its models.
 */
export function chooseLanding(
  workers: readonly PoolWorkerView[],
  model: string,
  memoryMbOf: (model: string) => number,
  budgetMb: number,
): Landing {
  const warm = workers.filter((w) => w.state === 'warm');
  const holder = warm.find((w) => w.models.some((h) => h.model === model));
  if (holder) return { kind: 'held', workerId: holder.id };
  const need = memoryMbOf(model);
  const used = (w: PoolWorkerView) => w.models.reduce((t, h) => t + memoryMbOf(h.model), 0);
  const load = (w: PoolWorkerView) => w.models.reduce((t, h) => t + h.inFlight, 0);
  const byLoad = (a: PoolWorkerView, b: PoolWorkerView) =>
    load(a) - load(b) || a.models.length - b.models.length || a.id.localeCompare(b.id);
  const roomy = warm.filter((w) => w.models.length > 0 && used(w) + need <= budgetMb).sort(byLoad)[0];
  if (roomy) return { kind: 'load', workerId: roomy.id, why: 'least-loaded worker with room' };
  const standby = warm.filter((w) => w.models.length === 0).sort(byLoad)[0];
  if (standby) return { kind: 'load', workerId: standby.id, why: 'standby' };
  const any = [...warm].sort(byLoad)[0];
  if (any) return { kind: 'load', workerId: any.id, why: 'least-loaded worker (evicts LRU to make room)' };
  return { kind: 'none' };
}
