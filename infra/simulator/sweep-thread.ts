/**
 * A sweep thread: holds the trace it was started with and runs the tasks it is sent, one at a
 * time, answering each with the policies' figures (without chart series unless the task asks
 * for them; with the baselines searched at an SLO target when it gives one, at-slo.ts). It first
 * says it is ready, naming its OS thread where the OS lets it be read (/proc on Linux), so a
 * parent can meter the CPU time this thread uses (bounded-replay.ts).
 */
import { readlinkSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { AT_SLO_BASELINES, baselinesAtSlo, inThisThread } from './at-slo.ts';
import { compare } from './compare.ts';
import type { SweepReply, SweepTask, ThreadReady } from './sweep.ts';
import type { Trace } from './trace.ts';

const { trace } = workerData as { trace: Trace };

parentPort?.on('message', async (task: SweepTask) => {
  let reply: SweepReply;
  try {
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

parentPort?.postMessage({ ready: true, osThreadId: osThreadId() } satisfies ThreadReady);

/** `/proc/thread-self` links to `<pid>/task/<tid>`; null where there is no /proc. */
function osThreadId(): number | null {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isInteger(tid) && tid > 0 ? tid : null;
  } catch {
    return null;
  }
}
