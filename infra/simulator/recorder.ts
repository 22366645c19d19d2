/**
 * What a simulated run measures: per job (queue wait, SLO, delayed by a cold start), per worker
 * state (billed worker-seconds), per scaler action, and a per-minute series for the charts
 * (arrivals, the rate the scaler planned for, workers by state at the minute's end, the p95
 * queue wait of the jobs taken in that minute).
 */
import type { WorkerCounts } from '../scaler/contracts.ts';
import { WaitHistogram, type WaitSummary } from './wait-histogram.ts';

export interface WorkerSeconds {
  total: number;
  active: number;
  standby: number;
  starting: number;
}

export interface MinuteSeries {
  arrivals: number[];
  /** Arrivals per minute the scaler planned for (its forecast); null when it plans for none. */
  plannedPerMin: Array<number | null>;
  starting: number[];
  standby: number[];
  active: number[];
  draining: number[];
  queueWaitP95Ms: number[];
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
  series: MinuteSeries;
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

export function createRecorder(name: string, sloMs: number, minutes: number): Recorder {
  const all = new WaitHistogram(sloMs);
  const thisMinute = new WaitHistogram(sloMs);
  const billedMs = { starting: 0, standby: 0, active: 0 };
  const series: MinuteSeries = {
    arrivals: new Array<number>(minutes).fill(0),
    plannedPerMin: new Array<number | null>(minutes).fill(null),
    starting: new Array<number>(minutes).fill(0),
    standby: new Array<number>(minutes).fill(0),
    active: new Array<number>(minutes).fill(0),
    draining: new Array<number>(minutes).fill(0),
    queueWaitP95Ms: new Array<number>(minutes).fill(0),
  };
  let delayed = 0;
  let coldStarts = 0;
  let scaleEvents = 0;
  return {
    job(waitMs, delayedByColdStart) {
      all.record(waitMs);
      thisMinute.record(waitMs);
      if (delayedByColdStart) delayed++;
    },
    bill(state, ms) {
      billedMs[state] += ms;
    },
    coldStart: () => void coldStarts++,
    scaleEvent: () => void scaleEvents++,
    arrivals(minute, count) {
      series.arrivals[minute] = count;
    },
    minuteEnd(minute, workers, plannedPerSec) {
      series.plannedPerMin[minute] = plannedPerSec === undefined ? null : plannedPerSec * 60;
      series.starting[minute] = workers.starting;
      series.standby[minute] = workers.standby;
      series.active[minute] = workers.active;
      series.draining[minute] = workers.draining;
      series.queueWaitP95Ms[minute] = thisMinute.percentile(0.95);
      thisMinute.reset();
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
