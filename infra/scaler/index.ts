/** The scaler (DESIGN §8): forecast, policy, controller, decision log; the public surface for the API, the simulator and the CLI. */

export { type BusyWindow, createBusyWindow } from './busy-window.ts';
export { decideCandidate, REACTIVE_RATE_WINDOW_MS, REACTIVE_STABILIZATION_MS, REACTIVE_UTILIZATION } from './candidates.ts';
export { coldStartEstimateMs } from './cold-start-estimate.ts';
export { countWorkers, type ObservedWorker, RATE_EWMA_ALPHA } from './controller-observe.ts';
export { planVersion } from './controller-plan.ts';
export { RETUNES_PER_WINDOW, retuneSpacingMs, STALE_RETUNES } from './controller-tuning.ts';
export { createDecisionLog, DECISION_HEARTBEAT_MS, type DecisionRecord, type ScalerAction } from './decision-log.ts';
export { forecastArrivals } from './forecast.ts';
export { decide } from './policy.ts';
export { createPoolDecisionLog, type PoolAction, type PoolDecisionLog, type PoolDecisionRecord } from './pool-decisions.ts';
export {
  emptyPoolPlanMemory,
  type HeldModel,
  keepMs,
  type PlacementAction,
  type PoolModelInput,
  type PoolPlan,
  type PoolPlanInput,
  type PoolPlanMemory,
  type PoolPlanSettings,
  type PoolPlanTerms,
  type PoolWorkerView,
  planPool,
} from './pool-plan.ts';
export { overridesOf, type ScalerSettings, scalerSettingsFrom } from './settings.ts';
export { emptyTickDispersion, noteTick, type TickDispersionState, tickDispersion } from './tick-dispersion.ts';
