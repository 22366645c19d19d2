/**
 * A sweep thread: holds the trace it was started with (or takes each task's own) and runs the
 * tasks it is sent, one at a time (a retune of the self-tuning portfolio too, for the live scaler's tuner, tuner.ts), answering each with the policies' figures (without chart series unless the task asks
 * for them; with the baselines searched at an SLO target when it gives one, at-slo.ts). It first
 * says it is ready, naming its OS thread where the OS lets it be read (/proc on Linux), so a
 * parent can meter the CPU time this thread uses (bounded-replay.ts).
 */
import { readlinkSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { AT_SLO_BASELINES, baselinesAtSlo, inThisThread } from './at-slo.ts';
import { threadCpuMs } from './bounded-replay.ts';
import { compare } from './compare.ts';
import { type ForecastCache, forecastMinute } from './policies.ts';
import { retune, WINDOW_MAX_MINUTES } from './portfolio.ts';
import type { SweepReply, SweepTask, ThreadReady, TuneReply, TuneTask } from './sweep.ts';
import type { Trace } from './trace.ts';
import { MINUTE_MS } from './world.ts';

/** The trace the thread was started with; a thread kept between calls is sent one with each task instead. */
const started = (workerData as { trace: Trace | null }).trace;

/** Per tuning key, the forecasts earlier retunes made: the history before a minute never changes. */
const forecasts = new Map<string, ForecastCache>();

parentPort?.on('message', async (task: SweepTask | TuneTask) => {
  if ('tune' in task) {
    parentPort?.postMessage(tune(task));
    return;
  }
  let reply: SweepReply;
  const trace = task.trace ?? started;
  try {
    if (!trace) throw new Error('a sweep task without a trace, on a thread started without one');
    const c = compare(trace, task.settings, task.only);
    reply = { id: task.id, policies: c.policies.map(({ series: _series, ...p }) => p) };
    if (task.series) reply.series = c.policies.map((p) => p.series);
    if (task.atSloTarget !== undefined) {
      const only = AT_SLO_BASELINES.filter((name) => task.only.includes(name));
      reply.atSlo = await baselinesAtSlo(trace, task.settings, task.atSloTarget, inThisThread(trace), only);
    }
  } catch (err) {
    reply = { id: task.id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
  parentPort?.postMessage(reply);
});

const tid = osThreadId();
parentPort?.postMessage({ ready: true, osThreadId: tid } satisfies ThreadReady);

/** One retune, its CPU time this thread's own (wall time where /proc is missing). */
function tune(task: TuneTask): TuneReply {
  try {
    const cache = forecasts.get(task.key) ?? new Map();
    forecasts.set(task.key, cache);
    pruneForecasts(cache, task.tune.now);
    const cpuMs = () => (tid === null ? null : threadCpuMs(tid)) ?? performance.now();
    return { id: task.id, choice: retune({ ...task.tune, cpuMs, forecasts: cache }) ?? null };
  } catch (err) {
    return { id: task.id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
}

/** Forecasts for minutes before the longest window a retune replays are never asked for again. */
function pruneForecasts(cache: ForecastCache, now: number): void {
  const oldest = Math.floor(now / MINUTE_MS) - WINDOW_MAX_MINUTES - 60;
  for (const key of cache.keys()) if (forecastMinute(key) < oldest) cache.delete(key);
}

/** `/proc/thread-self` links to `<pid>/task/<tid>`; null where there is no /proc. */
function osThreadId(): number | null {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(tid) && tid > 0 ? tid : null;
  } catch {
    return null;
  }
}
