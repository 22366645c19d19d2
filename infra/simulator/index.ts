/** The simulator (DESIGN §8): arrival traces replayed through the live scaler's policy; the public surface for the CLI and the dashboard. */

export { type ArrivalPattern, minuteArrivals, realiseCounts } from './arrivals.ts';
export {
  AT_SLO_BASELINES,
  AT_SLO_REPLAYS,
  type AtSlo,
  type AtSloReport,
  baselinesAtSlo,
  DEFAULT_SLO_TARGET,
  inThisThread,
  type Replay,
} from './at-slo.ts';
export { type BankCell, type BankOptions, type BankResult, bankMarkdown, bankSummary, runBank, writeBank } from './bank.ts';
export {
  type BoundedReplayOptions,
  createReplayThreads,
  ReplayBudgetError,
  type ReplayTask,
  type ReplayThreads,
  replayBounded,
  searchAtSloBounded,
} from './bounded-replay.ts';
export { type Calibration, calibrate, figures, type MeasuredJob } from './calibration.ts';
export { coldStartModel, PHASES, type Phase, parsePhases } from './cold-start.ts';
export { compare, defaultSettings, POLICY_NAMES, type PolicyReport, type SimulationSettings } from './compare.ts';
export {
  comparePool,
  POOL_POLICY_NAMES,
  POOL_REPLAYS,
  type PoolComparison,
  type PoolSettings,
  type PoolWorldInput,
} from './many-model-compare.ts';
export { type GeneratedWorld, generateManyModelWorld } from './many-model-generator.ts';
export { type PoolWorldInfo, poolChecks, poolTable, writePoolReport } from './many-model-report.ts';
export { type ManyModelTrace, readManyModelTraceFile, splitIntoModels } from './many-model-trace.ts';
export type { ModelSpec } from './many-model-world.ts';
export {
  type MatrixOptions,
  type MatrixResult,
  type MatrixTrace,
  matrixMarkdown,
  matrixTable,
  matrixWorlds,
  QUICK_MINUTES,
  runMatrix,
  traceWorld,
  writeMatrix,
} from './matrix.ts';
export { readPolicyFile } from './policy-file.ts';
export { NO_COUNT, type ReplayCounter } from './replay-counter.ts';
export { withReplayThreads } from './replay-pool.ts';
export { atSloTable, type Report, reportTable, type TraceInfo, writeReport } from './report.ts';
export type { SelfTuningOptions } from './self-tuning.ts';
export { type BatchPoint, batchPointsFrom } from './service.ts';
export { type PolicySummary, parseSweep, runSweep, sweepReplays } from './sweep.ts';
export { cheapestLine, sweepTable, writeSweep } from './sweep-report.ts';
export { parseTime, readTraceFile, type Trace } from './trace.ts';
export { createTuner } from './tuner.ts';
export {
  DEFAULT_TRAIN_FRACTION,
  DEFAULT_WALK_FORWARD_SWEEP,
  runWalkForward,
  TUNED_POLICY,
  type WalkForward,
  walkForwardReplays,
  walkForwardTable,
  writeWalkForward,
} from './walk-forward.ts';
export { MINUTE_MS } from './world.ts';
export { BANK_FAMILIES, type BankFamily, type BankWorld, generateBank } from './world-bank.ts';
