/**
 * The scaler's settings from config: what the live controller and both simulators (the CLI's and
 * the dashboard's) replay with. Its own module, so a simulator takes them without loading the
 * controller.
 */
import type { PolicySettings } from '../contracts/pool.ts';
import type { ScalerTuning } from '../kernel/config.ts';

/** The settings the controller supplies; min, max and standby come from each deployment. */
export type ScalerSettings = Omit<PolicySettings, 'min' | 'max' | 'standby'>;

/** The controller's settings from the config's `scaler` section (infra/kernel/config.ts holds the defaults). */
export function scalerSettingsFrom(t: ScalerTuning): ScalerSettings {
  return {
    sloQueueWaitMs: t.sloQueueWaitMs,
    coldStartMs: t.coldStartDefaultMs,
    scaleDownStabilizationMs: t.scaleDownStabilizationMs,
    targetUtilization: t.targetUtilization,
    minLifetimeColdStarts: t.minLifetimeColdStarts,
  };
}
