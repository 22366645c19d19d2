/**
 * `warmpool simulate calibrate [--trace FILE.csv] [--from-minute N] [--minutes N] [--load X]
 * [--workers N] [--rows-per-job N] [--drain-jobs N] [--seed N] [--out DIR]`
 *
 * Calibrates the simulated worker against a real one (issue 5, "must show"): replays a short
 * stretch of a trace (default: two minutes of the Azure LLM trace, scaled so its mean is `--load`
 * of the pool's capacity, measured by a burst drained just before) against a real stack and real
 * workers, then asks the simulator for the same arrivals with the batch profile the real
 * workers measured in their warm-up, and prints predicted against measured (infra/simulator/
 * calibration.ts says how). With --out, writes calibration.json and batch-profile.json (for
 * `warmpool simulate --batch-profile`).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { errorMessage, InvalidInputError } from '../../infra/kernel/errors.ts';
import {
  type Calibration,
  calibrate,
  figures,
  MINUTE_MS,
  minuteArrivals,
  PHASES,
  type Phase,
  readTraceFile,
  realiseCounts,
} from '../../infra/simulator/index.ts';
import { SIMULATE_CALIBRATE } from './cli-options.ts';
import { type RealRun, runReal } from './simulate-calibrate-run.ts';
import type { SimulateOut } from './simulate-out.ts';

/** Above this the API, not the worker, would be under test (two shared cores; see the run's log). */
const MAX_SUBMIT_PER_SEC = 120;

export const DEFAULT_CALIBRATION_TRACE = fileURLToPath(new URL('../../../shared/traces/azure_llm_2023_conv.csv', import.meta.url));

export interface CalibrateOptions {
  trace: string;
  fromMinute: number;
  minutes: number;
  /** Mean arrival rate as a share of the pool's warm-up capacity. */
  load: number;
  workers: number;
  rowsPerJob: number;
  drainJobs: number;
  seed: number;
}

export interface CalibrationReport {
  options: CalibrateOptions;
  real: Omit<RealRun, 'replay' | 'drains'> & { replayJobs: number; drainJobs: number; drainRates: number[] };
  /** The pool's capacity as the first drain measured it and the mean rate replayed (load × capacity, capped). */
  capacityJobsPerSec: number;
  offeredJobsPerSec: number;
  calibration: Calibration;
}

export async function calibrateMain(args: string[], out: SimulateOut): Promise<number> {
  try {
    const { values } = parseArgs({
      args,
      options: SIMULATE_CALIBRATE.options,
      strict: true,
    });
    const v = values as Record<string, string | undefined>;
    const n = (flag: string, fallback: number, integer = true) => {
      const text = v[flag];
      const x = text === undefined ? fallback : Number(text);
      if (!Number.isFinite(x) || x <= 0 || (integer && !Number.isInteger(x))) {
        throw new InvalidInputError('invalid_flag', `--${flag} must be ${integer ? 'an integer' : 'a number'} > 0, got "${text}"`);
      }
      return x;
    };
    const options: CalibrateOptions = {
      trace: v.trace ?? DEFAULT_CALIBRATION_TRACE,
      fromMinute: v['from-minute'] === undefined ? 10 : n('from-minute', 10),
      minutes: n('minutes', 2, false),
      load: n('load', 0.6, false),
      workers: n('workers', 1),
      rowsPerJob: n('rows-per-job', 32),
      drainJobs: n('drain-jobs', 1500),
      seed: n('seed', 1),
    };
    const report = await runCalibration(options, process.env, (line) => out.err(`${line}\n`));
    out.out(`${calibrationText(report)}\n`);
    if (v.out) {
      mkdirSync(v.out, { recursive: true });
      writeFileSync(path.join(v.out, 'calibration.json'), `${JSON.stringify(report, null, 2)}\n`);
      const profile = { entries: report.real.profile.map((p) => ({ batch: p.batch, p50Ms: p.ms })), chosenBatch: report.real.chosenBatch };
      writeFileSync(path.join(v.out, 'batch-profile.json'), `${JSON.stringify(profile, null, 2)}\n`);
      out.out(`wrote ${v.out}/calibration.json and ${v.out}/batch-profile.json\n`);
    }
    return 0;
  } catch (err) {
    if (err instanceof InvalidInputError || (err instanceof Error && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'))) {
      out.err(`warmpool simulate calibrate: ${errorMessage(err)}\n`);
      return 2;
    }
    throw err;
  }
}

export async function runCalibration(o: CalibrateOptions, env: NodeJS.ProcessEnv, log: (line: string) => void): Promise<CalibrationReport> {
  const trace = readTraceFile(o.trace);
  const minutes = Math.ceil(o.minutes);
  const slice = trace.series.perMinute.slice(o.fromMinute, o.fromMinute + minutes);
  if (slice.length === 0)
    throw new InvalidInputError(
      'invalid_flag',
      `--from-minute ${o.fromMinute} is past the trace's ${trace.series.perMinute.length} minutes`,
    );
  const missing = trace.missing.slice(o.fromMinute, o.fromMinute + minutes);
  const mean = slice.reduce((a, b) => a + b, 0) / slice.length;
  // Scaled from the pool's measured capacity, so the load is the same on any machine.
  const rates = { capacity: 0, offered: 0 };
  const arrivals = (capacityJobsPerSec: number) => {
    rates.capacity = capacityJobsPerSec;
    const perSec = Math.min(o.load * capacityJobsPerSec, MAX_SUBMIT_PER_SEC);
    if (perSec < o.load * capacityJobsPerSec)
      log(`calibrate: load capped at ${MAX_SUBMIT_PER_SEC} jobs/s (what one in-process API submits reliably)`);
    rates.offered = perSec;
    const scale = mean > 0 ? (perSec * 60) / mean : 0;
    const counts = realiseCounts(slice, missing, scale, o.seed);
    const offsets: number[] = [];
    counts.forEach((count, m) => {
      for (const at of minuteArrivals(count, m * MINUTE_MS, m, { kind: 'poisson' }, o.seed)) {
        if (at < o.minutes * MINUTE_MS) offsets.push(at);
      }
    });
    return offsets;
  };
  const real = await runReal({ env, workers: o.workers, rowsPerJob: o.rowsPerJob, features: 64, arrivals, drainJobs: o.drainJobs, log });
  const calibration = calibrate({
    workers: o.workers,
    rowsPerJob: o.rowsPerJob,
    maxBatchRows: real.chosenBatch,
    profile: real.profile,
    replay: real.replay,
    drains: real.drains,
  });
  const { replay, drains, ...rest } = real;
  return {
    options: o,
    real: {
      ...rest,
      replayJobs: replay.length,
      drainJobs: drains.reduce((t, d) => t + d.length, 0),
      drainRates: drains.map((d) => figures(d).jobsPerSec),
    },
    capacityJobsPerSec: rates.capacity,
    offeredJobsPerSec: rates.offered,
    calibration,
  };
}

export function calibrationText(r: CalibrationReport): string {
  const c = r.calibration;
  const f = (x: number) => (Math.abs(x) >= 100 ? x.toFixed(0) : x.toFixed(1));
  const ratio = (sim: number, real: number) => (real > 0 ? `${(sim / real).toFixed(2)}×` : 'n/a');
  const header = `| quantity | measured | simulated: profile only | ratio | simulated: + ${c.fitted.jobOverheadMs.toFixed(2)} ms/job overhead | ratio |`;
  const rows = c.rows.map(
    (row) =>
      `| ${row.what} | ${f(row.measured)} | ${f(row.profileOnly)} | ${ratio(row.profileOnly, row.measured)} | ${f(row.fitted)} | ${ratio(row.fitted, row.measured)} |`,
  );
  const phases = (k: Phase) => r.real.coldStarts.reduce((t, cs) => t + cs[k], 0) / Math.max(1, r.real.coldStarts.length) / 1000;
  const total = PHASES.reduce((t, k) => t + phases(k), 0);
  return [
    `Calibration: ${r.options.workers} real worker(s), ${r.real.replayJobs} replayed jobs and two bursts of ${r.options.drainJobs} (drained at ${r.real.drainRates.map((x) => x.toFixed(1)).join(' and ')} jobs/s), jobs of ${r.options.rowsPerJob} rows, ${r.offeredJobsPerSec.toFixed(0)} jobs/s offered on average = ${(r.offeredJobsPerSec / r.capacityJobsPerSec).toFixed(2)} of the measured capacity (${path.basename(r.options.trace)} minutes ${r.options.fromMinute}–${r.options.fromMinute + r.options.minutes}).`,
    `Warm-up batch profile (rows: p50 ms): ${r.real.profile.map((p) => `${p.batch}: ${p.ms.toFixed(2)}`).join(', ')}; chosen batch ${r.real.chosenBatch} rows, ${r.real.threads} thread(s).`,
    `Cold start measured (mean of ${r.real.coldStarts.length}): ${total.toFixed(1)} s = ${PHASES.map((k) => `${k} ${phases(k).toFixed(2)} s`).join(', ')}`,
    `  → warmpool simulate --cold-start-phases ${PHASES.map((k) => `${k}=${phases(k).toFixed(2)}`).join(',')} --job-overhead-ms ${c.fitted.jobOverheadMs.toFixed(2)}`,
    '',
    header,
    `|${'---|'.repeat(6)}`,
    ...rows,
  ].join('\n');
}
