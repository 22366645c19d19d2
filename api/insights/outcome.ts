/**
 * What actually happened to a deployment over a window, in the simulator's terms (cost and SLO),
 * so the simulator view can put a replayed policy next to it: pure, from the scaler's decision
 * records and the dashboard's pool samples.
 *
 * - Worker-seconds by state: the worker counts seen (decision records and samples merged, by
 *   time) held until the next observation, at most `maxGapMs` (a longer silence is not billed:
 *   nothing says what ran then). The scaler records an unchanged decision once per heartbeat
 *   (infra/scaler/decision-log.ts), so the default allows a heartbeat and a few ticks. Cost weighs them as the simulator does: active + starting +
 *   standby × standbyPrice.
 * - Queue waits: the sampled interval histograms summed; SLO attainment is the share of jobs
 *   taken within the SLO (linear within a histogram bucket, so approximate), null with no jobs.
 */
import type { WorkerCounts } from '../../infra/contracts/pool.ts';
import { DECISION_HEARTBEAT_MS, type DecisionRecord } from '../../infra/scaler/index.ts';
import { addHistograms, fractionAtMost, type Histogram, type PoolSample, quantile, round } from './series.ts';

export interface Outcome {
  /** Minutes of the window something was observed in. */
  observedMinutes: number;
  workerSeconds: { active: number; standby: number; starting: number; total: number };
  cost: number;
  /** Jobs taken by workers in the window (sampled). */
  jobs: number;
  sloAttainment: number | null;
  queueWaitP95Ms: number | null;
  /** Samples in the window that carry queue waits (0: none were recorded, as opposed to no jobs). */
  waitSamples: number;
}

export interface OutcomeInput {
  decisions: readonly DecisionRecord[];
  samples: readonly PoolSample[];
  fromMs: number;
  toMs: number;
  sloMs: number;
  standbyPrice?: number;
  /** Default: a decision heartbeat plus 30 s (ticks may land just after it). */
  maxGapMs?: number;
}

/** Worker counts over time, oldest first, from both sources (live decisions only, unless only shadow ones exist). */
export function workerTimeline(
  decisions: readonly DecisionRecord[],
  samples: readonly PoolSample[],
): Array<{ at: number; workers: WorkerCounts }> {
  const live = decisions.filter((d) => !d.shadow);
  const fromDecisions = (live.length > 0 ? live : decisions).map((d) => ({ at: d.at, workers: d.workers }));
  return [...fromDecisions, ...samples.map((s) => ({ at: s.at, workers: s.workers }))].sort((a, b) => a.at - b.at);
}

export function actualOutcome(input: OutcomeInput): Outcome {
  const maxGapMs = input.maxGapMs ?? DECISION_HEARTBEAT_MS + 30_000;
  const timeline = workerTimeline(input.decisions, input.samples).filter((p) => p.at >= input.fromMs && p.at <= input.toMs);
  const seconds = { active: 0, standby: 0, starting: 0 };
  const minutes = new Set<number>();
  for (const [i, point] of timeline.entries()) {
    const next = timeline[i + 1]?.at ?? input.toMs;
    const heldS = Math.min(maxGapMs, Math.max(0, next - point.at)) / 1000;
    seconds.active += point.workers.active * heldS;
    seconds.standby += point.workers.standby * heldS;
    seconds.starting += point.workers.starting * heldS;
    minutes.add(Math.floor(point.at / 60_000));
  }
  let waits: Histogram | undefined;
  let waitSamples = 0;
  for (const s of input.samples) {
    if (s.at < input.fromMs || s.at > input.toMs || !s.queueSeconds) continue;
    waits = addHistograms(waits, s.queueSeconds);
    waitSamples++;
  }
  const p95 = quantile(waits, 0.95);
  const attainment = fractionAtMost(waits, input.sloMs / 1000);
  return {
    observedMinutes: minutes.size,
    workerSeconds: {
      active: round(seconds.active, 1),
      standby: round(seconds.standby, 1),
      starting: round(seconds.starting, 1),
      total: round(seconds.active + seconds.standby + seconds.starting, 1),
    },
    cost: round(seconds.active + seconds.starting + seconds.standby * (input.standbyPrice ?? 1), 1),
    jobs: waits?.count ?? 0,
    sloAttainment: attainment === null ? null : round(attainment, 4),
    queueWaitP95Ms: p95 === null ? null : round(p95 * 1000, 1),
    waitSamples,
  };
}
