/**
 * End to end: single-row requests submitted over HTTP to a stack under test (warmpool's API and
 * worker, or the minimal stack it is compared with), counted until they are done, by request.
 *
 *   max rate    closed-loop submits; completed requests / (last finished − first sent), and the
 *               CPU each of the stack's processes spent per completed request (/proc)
 *   open loop   submits at a fixed rate from a process of its own (open-loop-child.ts); per
 *               request, scheduled send → finished
 *
 * Both stacks are driven by the same load generator (load.ts) with the same bodies
 * (request-bodies.ts) on the same Redis, so their ratio is the cost of what warmpool adds.
 */
import { closedLoopSubmit, type SubmitTarget } from './load.ts';
import { openLoopInChild } from './open-loop-child.ts';
import { startCpuMeter } from './proc-cpu.ts';
import type { RequestWatch } from './queue-watch.ts';
import { type LatencySummary, ratePerS, summarizeMs } from './stats.ts';
import { withSeed } from './submit-target.ts';

export type ApiMode = 'child' | 'in-process';

/** A running stack the bench submits to: its submit route, its queue and its processes. */
export interface StackUnderTest {
  label: string;
  target: SubmitTarget;
  watch: RequestWatch;
  /** Processes whose CPU per request is reported (undefined: not on this host). */
  pids: Record<string, number | undefined>;
  stop(): Promise<void>;
}

/** Seeds of each run's requests start here, a run apart, so no request repeats another's rows. */
export const SEEDS = {
  warmUp: 1_000_000,
  max: 2_000_000,
  latency: 3_000_000,
  search: 4_000_000,
  /** serving_efficiency_binary's search (its rows apart from the JSON search's). */
  searchBinary: 4_500_000,
  /** binary_vs_json's binary runs (its JSON side is the max-rate run above). */
  binaryWarmUp: 5_000_000,
  binary: 5_500_000,
  /** grpc_vs_http: the HTTP and gRPC sync runs. */
  syncWarmUp: 6_000_000,
  http: 6_500_000,
  grpc: 7_000_000,
  /** The light-load ladder (latency-ladder.ts), a rung apart. */
  ladder: 8_000_000,
  /** The edge hop's sync infers (edge-hop.ts), both sides, a run apart. */
  edge: 9_000_000,
} as const;

/** Untimed requests: JIT, first queue and stream reads, connections. The finished sets are emptied after. */
export async function warmUp(stack: StackUnderTest, amount = 300, seed: number = SEEDS.warmUp): Promise<void> {
  const sent = await closedLoopSubmit(withSeed(stack.target, seed), amount, 16);
  await stack.watch.waitFinished(sent.ids.length);
  await stack.watch.reset();
}

export interface MaxRate {
  requestsPerS: number;
  /** The API's accept rate over the run. */
  acceptPerS: number;
  completed: number;
  rejected: number;
  failed: number;
  /** Requests per BullMQ job (entry) over the run. */
  requestsPerJob: number;
  /** CPU ms per completed request, per process of the stack. */
  cpuMsPerRequest: Record<string, number>;
}

export async function measureMaxRate(
  stack: StackUnderTest,
  options: { amount: number; connections: number; seed?: number },
): Promise<MaxRate> {
  const meter = startCpuMeter(stack.pids);
  const closed = await closedLoopSubmit(withSeed(stack.target, options.seed ?? SEEDS.max), options.amount, options.connections);
  const done = await stack.watch.waitFinished(closed.ids.length);
  const cpu = meter.stop();
  await stack.watch.reset();
  return {
    requestsPerS: ratePerS(done.completed, closed.startedAt, done.lastFinishedAt),
    acceptPerS: ratePerS(closed.ids.length, closed.startedAt, closed.endedAt),
    completed: done.completed,
    rejected: closed.rejected,
    failed: done.failed,
    requestsPerJob: done.jobs > 0 ? (done.completed + done.failed) / done.jobs : NaN,
    cpuMsPerRequest: Object.fromEntries(Object.entries(cpu).map(([name, ms]) => [name, ms / done.completed])),
  };
}

export interface OpenLoopRun {
  ratePerS: number;
  /** Scheduled send → finished, per request that succeeded (the failed are counted in `failed`). */
  latency: LatencySummary;
  /** Scheduled send → 202. */
  http: LatencySummary;
  accepted: number;
  rejected: number;
  failed: number;
  requestsPerJob: number;
  maxDispatchLagMs: number;
}

export async function measureOpenLoop(
  stack: StackUnderTest,
  plan: { ratePerS: number; amount: number; connections: number; seed: number },
): Promise<OpenLoopRun> {
  // From a process of its own: the bench's event loop (the S3 server, the queue watch) never delays a send.
  const open = await openLoopInChild(withSeed(stack.target, plan.seed), plan.ratePerS, plan.amount, plan.connections);
  try {
    const done = await stack.watch.waitFinished(open.accepted.length);
    const finished = stack.watch.requests();
    return {
      ratePerS: plan.ratePerS,
      latency: summarizeMs(open.accepted.map((a) => (finished.get(a.id)?.finishedOn ?? NaN) - a.scheduledAt)),
      http: open.http,
      accepted: open.accepted.length,
      rejected: open.rejected,
      failed: done.failed,
      requestsPerJob: done.jobs > 0 ? (done.completed + done.failed) / done.jobs : NaN,
      maxDispatchLagMs: open.maxDispatchLagMs,
    };
  } finally {
    await stack.watch.reset();
  }
}
