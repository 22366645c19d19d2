/**
 * A sweep thread: holds the trace it was started with and runs the tasks it is sent, one at a
 * time, answering each with the policies' figures (without chart series: they stay here).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { compare } from './compare.ts';
import type { SweepReply, SweepTask } from './sweep.ts';
import type { Trace } from './trace.ts';

const { trace } = workerData as { trace: Trace };

parentPort?.on('message', (task: SweepTask) => {
  let reply: SweepReply;
  try {
    const c = compare(trace, task.settings, task.only);
    reply = { id: task.id, policies: c.policies.map(({ series: _series, ...p }) => p) };
  } catch (err) {
    reply = { id: task.id, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
  }
  parentPort?.postMessage(reply);
});
