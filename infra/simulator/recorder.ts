/**
 * What a simulated run measures: per job (queue wait, SLO, delayed by a cold start), per worker
 * state (billed worker-seconds), per scaler action, and a per-minute series for the charts
 * and per-interval series for the charts (arrivals, the rate the scaler planned for, workers by
 * state, queue-wait p95 and p99 of the jobs taken in the interval).
 */
import type { WorkerCounts } from '../contracts/pool.ts';
import { WaitHistogram, type WaitSummary } from './wait-histogram.ts';

export interface WorkerSeconds {
  total: number;
  active: number;
  standby: number;
  starting: number;
}

/**
 * The charts' series, per interval of `intervalMin` minutes (one minute for short replays, up to
 * an hour for long ones, so a chart holds at most about a thousand points). Rates and worker
 * counts are means over the interval's minutes (workers sampled at each minute's end); queue-wait
 * percentiles are exact for the jobs taken in the interval (null when none were).
 */
export interface IntervalSeries {
  intervalMin: number;
  /** Arrivals per minute. */
  arrivals: number[];
  /** Arrivals per minute the scaler planned for (its forecast); null when it plans for none. */
  plannedPerMin: Array<number | null>;
  starting: number[];
  standby: number[];
  active: number[];
  draining: number[];
  queueWaitP95Ms: Array<number | null>;
  queueWaitP99Ms: Array<number | null>;
}

export interface PolicyRun {
  name: string;
  jobs: number;
  sloAttainment: number;
  queueWaitMs: WaitSummary;
  workerSeconds: WorkerSeconds;
  coldStarts: number;
  jobsDelayedByColdStart: number;
  /** Ticks on which the scaler changed the pool (any launch, drain, activation or move to standby). */
  scaleEvents: number;
  series: IntervalSeries;
}

export interface Recorder {
  job(waitMs: number, delayedByColdStart: boolean): void;
  bill(state: 'starting' | 'standby' | 'active', ms: number): void;
  coldStart(): void;
  scaleEvent(): void;
  arrivals(minute: number, count: number): void;
  minuteEnd(minute: number, workers: WorkerCounts, plannedPerSec: number | undefined): void;
  result(): PolicyRun;
}

/** Minutes per chart point: the smallest of 1, 5, 10, 15, 30, 60 that keeps ≤ 1200 points. */
export function chartInterval(minutes: number): number {
  return [1, 5, 10, 15, 30, 60].find((m) => minutes / m <= 1200) ?? 60;
}

type Sums = { arrivals: number; planned: number; plannedSeen: number; starting: number; standby: number; active: number; draining: number };

const zeroSums = (): Sums => ({ arrivals: 0, planned: 0, plannedSeen: 0, starting: 0, standby: 0, active: 0, draining: 0 });

export function createRecorder(name: string, sloMs: number, minutes: number, intervalMin = chartInterval(minutes)): Recorder {
  const all = new WaitHistogram(sloMs);
  const thisInterval = new WaitHistogram(sloMs);
  const billedMs = { starting: 0, standby: 0, active: 0 };
  const points = Math.ceil(minutes / intervalMin);
  const series: IntervalSeries = {
    intervalMin,
    arrivals: new Array<number>(points).fill(0),
    plannedPerMin: new Array<number | null>(points).fill(null),
    starting: new Array<number>(points).fill(0),
    standby: new Array<number>(points).fill(0),
    active: new Array<number>(points).fill(0),
    draining: new Array<number>(points).fill(0),
    queueWaitP95Ms: new Array<number | null>(points).fill(null),
    queueWaitP99Ms: new Array<number | null>(points).fill(null),
  };
  let sums = zeroSums();
  const flush = (lastMinute: number) => {
    const k = Math.floor(lastMinute / intervalMin);
    const n = lastMinute - k * intervalMin + 1;
    series.arrivals[k] = sums.arrivals / n;
    series.plannedPerMin[k] = sums.plannedSeen === 0 ? null : sums.planned / sums.plannedSeen;
    series.starting[k] = sums.starting / n;
    series.standby[k] = sums.standby / n;
    series.active[k] = sums.active / n;
    series.draining[k] = sums.draining / n;
    series.queueWaitP95Ms[k] = thisInterval.count === 0 ? null : thisInterval.percentile(0.95);
    series.queueWaitP99Ms[k] = thisInterval.count === 0 ? null : thisInterval.percentile(0.99);
    thisInterval.reset();
    sums = zeroSums();
  };
  let delayed = 0;
  let coldStarts = 0;
  let scaleEvents = 0;
  return {
    job(waitMs, delayedByColdStart) {
      all.record(waitMs);
      thisInterval.record(waitMs);
      if (delayedByColdStart) delayed++;
    },
    bill(state, ms) {
      billedMs[state] += ms;
    },
    coldStart: () => void coldStarts++,
    scaleEvent: () => void scaleEvents++,
    arrivals(_minute, count) {
      sums.arrivals += count;
    },
    minuteEnd(minute, workers, plannedPerSec) {
      if (plannedPerSec !== undefined) {
        sums.planned += plannedPerSec * 60;
        sums.plannedSeen++;
      }
      sums.starting += workers.starting;
      sums.standby += workers.standby;
      sums.active += workers.active;
      sums.draining += workers.draining;
      if ((minute + 1) % intervalMin === 0 || minute === minutes - 1) flush(minute);
    },
    result() {
      const s = (ms: number) => ms / 1000;
      return {
        name,
        jobs: all.count,
        sloAttainment: all.count === 0 ? 1 : all.withinSlo / all.count,
        queueWaitMs: all.summary(),
        workerSeconds: {
          total: s(billedMs.starting + billedMs.standby + billedMs.active),
          active: s(billedMs.active),
          standby: s(billedMs.standby),
          starting: s(billedMs.starting),
        },
        coldStarts,
        jobsDelayedByColdStart: delayed,
        scaleEvents,
        series,
      };
    },
  };
}
