/**
 * A deployment's recent history for the dashboard's charts (api/insights/series.ts shapes it):
 * per-minute arrivals (online requests' rows that need a worker), the rows the result cache answered
 * at submit (no worker saw them, so the forecast leaves them out), the rows the workers served (online and bulk: bulk
 * rows are not arrivals, the scaler sizes for them from the runs' deadlines), the scaler's
 * forecast from its decision records, and the pool samples —
 * taking one first when it is due, so an open dashboard keeps the record going
 * (api/insights/samples.ts).
 */

import type { ArrivalSeries } from '../../infra/contracts/pool.ts';
import type { Deployment } from '../../infra/deployments/deployment-store.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import type { DecisionRecord } from '../../infra/scaler/index.ts';
import type { PoolSamples } from '../insights/samples.ts';
import { type SeriesView, shapeSeries } from '../insights/series.ts';

export const MAX_SERIES_MINUTES = 1440;

export interface DeploymentSeriesDeps {
  deployments: { get(model: string): Promise<Deployment | null> };
  arrivals: {
    series(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
    /** Rows served per minute, online and bulk (the workers' completions). */
    completions(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
    /** Rows the result cache answered at submit, per minute. */
    cached(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
  };
  /** The model's decision records taken at or after `fromMs`, oldest first. */
  decisionsSince(model: string, fromMs: number): Promise<DecisionRecord[]>;
  samples: PoolSamples;
  clock: Clock;
}

export async function deploymentSeries(deps: DeploymentSeriesDeps, model: string, minutes: number): Promise<SeriesView> {
  checkMinutes(minutes);
  const deployment = await deployedOrThrow(deps, model);
  await deps.samples.sampleIfDue({ model, versions: deployment.versions.map((v) => v.version) });
  const at = deps.clock.now();
  // The current minute is included (so far): a burst shows at once, not a minute later.
  const fromMs = at - (minutes - 1) * 60_000;
  const [arrivals, served, cached, decisions, samples] = await Promise.all([
    deps.arrivals.series(model, fromMs, at),
    deps.arrivals.completions(model, fromMs, at),
    deps.arrivals.cached(model, fromMs, at),
    deps.decisionsSince(model, fromMs - 60_000),
    deps.samples.read(model, fromMs, at),
  ]);
  return shapeSeries({ model, at, minutes, arrivals, served, cached, decisions, samples });
}

export function checkMinutes(minutes: number, max = MAX_SERIES_MINUTES): void {
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > max) {
    throw new InvalidInputError('invalid_query', `minutes must be an integer between 1 and ${max} (got ${minutes})`);
  }
}

export async function deployedOrThrow(deps: { deployments: { get(model: string): Promise<Deployment | null> } }, model: string) {
  const deployment = await deps.deployments.get(model);
  if (!deployment) throw new NotFoundError('deployment_not_found', `model ${model} is not deployed`);
  return deployment;
}
