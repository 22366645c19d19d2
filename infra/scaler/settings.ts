/**
 * The scaler's settings from config: what the live controller and both simulators (the CLI's and
 * the dashboard's) replay with. Its own module, so a simulator takes them without loading the
 * controller.
 */
import type { ScalerTuning } from '../kernel/config.ts';

/**
 * What the controller gives the policy from the config's `scaler` section (min, max and standby
 * come from each deployment): its tuning but the tick, which is the controller's own, with the
 * cold start assumed until one is measured under the name the policy and a deployment's `policy`
 * overrides use, `coldStartMs`.
 */
export type ScalerSettings = Omit<ScalerTuning, 'tickMs' | 'coldStartDefaultMs' | keyof SelfTuningSettings> & { coldStartMs: number };

/** How the controller runs the self-tuning portfolio (issue 28): not the policy's settings. */
export type SelfTuningSettings = Pick<ScalerTuning, 'selfTuning' | 'retuneIntervalMs' | 'tuningCpuMs'>;

/** The controller's settings from the config's `scaler` section (infra/kernel/config.ts holds the defaults). */
export function scalerSettingsFrom(t: ScalerTuning): ScalerSettings {
  return {
    sloQueueWaitMs: t.sloQueueWaitMs,
    coldStartMs: t.coldStartDefaultMs,
    scaleDownStabilizationMs: t.scaleDownStabilizationMs,
    targetUtilization: t.targetUtilization,
    minLifetimeColdStarts: t.minLifetimeColdStarts,
    sloTarget: t.sloTarget,
  };
}

/** The settings a deployment's `policy` object may override. */
const SETTING_NAMES = [
  'sloQueueWaitMs',
  'coldStartMs',
  'scaleDownStabilizationMs',
  'targetUtilization',
  'minLifetimeColdStarts',
  'sloTarget',
] as const satisfies Array<keyof ScalerSettings>;

/** The numeric settings a deployment's `policy` object may override (others are ignored). */
export function overridesOf(policy: Record<string, unknown> | undefined): Partial<ScalerSettings> {
  const out: Partial<ScalerSettings> = {};
  if (!policy) return out;
  for (const key of SETTING_NAMES) {
    const v = policy[key];
    if (typeof v === 'number' && Number.isFinite(v) && v > 0) out[key] = v;
  }
  return out;
}
