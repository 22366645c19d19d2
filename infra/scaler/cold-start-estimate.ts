/**
 * The cold start the policy plans with, learnt from the pool's own recent starts (issue 17): a
 * high quantile of the last COLD_START_SAMPLES launch-to-warmed times, so one slow image pull
 * in ten is planned for (the lead time, the burst standby and the minimum lifetime all scale
 * with it), while a single outlier among twenty is not. The live controller (its cold-start
 * meter, controller-observe.ts) and the simulator's predictive policy both read it here.
 */

/** Recent cold starts kept per model. */
export const COLD_START_SAMPLES = 20;
/** The quantile of them the policy plans with. */
export const COLD_START_QUANTILE = 0.9;

/** The COLD_START_QUANTILE of the newest COLD_START_SAMPLES samples (newest last); undefined with none. */
export function coldStartEstimateMs(samplesMs: readonly number[]): number | undefined {
  const recent = samplesMs.filter((ms) => Number.isFinite(ms) && ms >= 0).slice(-COLD_START_SAMPLES);
  if (recent.length === 0) return undefined;
  recent.sort((a, b) => a - b);
  return recent[Math.min(recent.length - 1, Math.floor(COLD_START_QUANTILE * recent.length))];
}
