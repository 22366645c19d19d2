/**
 * Cold starts of simulated workers (issue 5 §2): the live worker's phases — launching (pod or
 * process start), downloading (weights from S3), loading (session create), warming (warm-up
 * batches, which also measure the batch profile) — each a distribution of its own.
 *
 * A phase is a mean and a coefficient of variation: CV 0 is a fixed time; CV > 0 draws from a
 * lognormal with that mean and CV (times are positive and right-skewed: a slow image pull or a
 * slow S3 read takes several times the median, never less than nothing). A warm-pool state skips
 * phases: a standby worker has done all four, and activating it is the world's `activateMs`.
 *
 * Deterministic: the n-th cold start of a run draws from its own generator seeded by (seed, n),
 * so every policy's n-th launch takes the same time (common random numbers again).
 */
import { InvalidInputError } from '../kernel/errors.ts';
import { seededRandom } from '../kernel/seeded-random.ts';

export const PHASES = ['launching', 'downloading', 'loading', 'warming'] as const;
export type Phase = (typeof PHASES)[number];

export interface PhaseTime {
  meanMs: number;
  /** Coefficient of variation; 0 = always meanMs. */
  cv: number;
}

export type ColdStartModel = Record<Phase, PhaseTime>;

/** The share of a cold start each phase takes by default (a rough shape of a pod start). */
export const DEFAULT_PHASE_SHARES: Record<Phase, number> = { launching: 0.2, downloading: 0.3, loading: 0.2, warming: 0.3 };

/** A cold start of `totalMs` on average, split by DEFAULT_PHASE_SHARES, every phase with `cv`. */
export function coldStartModel(totalMs: number, cv = 0): ColdStartModel {
  const phase = (p: Phase): PhaseTime => ({ meanMs: totalMs * DEFAULT_PHASE_SHARES[p], cv });
  return { launching: phase('launching'), downloading: phase('downloading'), loading: phase('loading'), warming: phase('warming') };
}

export function meanColdStartMs(model: ColdStartModel): number {
  return PHASES.reduce((sum, p) => sum + model[p].meanMs, 0);
}

/** Total ms of the n-th cold start of a run. */
export function drawColdStart(model: ColdStartModel, seed: number, n: number): number {
  const random = seededRandom((Math.imul(seed ^ 0x2545f491, 0x9e3779b1) ^ Math.imul(n + 1, 0x85ebca77)) >>> 0);
  return PHASES.reduce((sum, p) => sum + drawPhase(model[p], random), 0);
}

function drawPhase({ meanMs, cv }: PhaseTime, random: () => number): number {
  if (cv <= 0 || meanMs <= 0) return Math.max(0, meanMs);
  // Lognormal with mean m and CV c: σ² = ln(1 + c²), μ = ln m − σ²/2.
  const s2 = Math.log(1 + cv * cv);
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.exp(Math.log(meanMs) - s2 / 2 + Math.sqrt(s2) * z);
}

/**
 * Parses `launching=12,downloading=18,loading=10,warming=20` (seconds, optionally `:cv` each,
 * e.g. `downloading=18:0.5`); phases not named keep their share of `fallback`.
 */
export function parsePhases(text: string, fallback: ColdStartModel): ColdStartModel {
  const model = { ...fallback };
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const m = /^([a-z]+)=([0-9.]+)(?::([0-9.]+))?$/.exec(part);
    const phase = PHASES.find((p) => p === m?.[1]);
    const seconds = Number(m?.[2]);
    const cv = m?.[3] === undefined ? (phase ? model[phase].cv : 0) : Number(m[3]);
    if (!m || !phase || !Number.isFinite(seconds) || !Number.isFinite(cv)) {
      throw new InvalidInputError(
        'invalid_flag',
        `cannot read cold-start phase "${part}" (expected PHASE=SECONDS[:CV], PHASE one of ${PHASES.join(', ')})`,
      );
    }
    model[phase] = { meanMs: seconds * 1000, cv };
  }
  return model;
}
