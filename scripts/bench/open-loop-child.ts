/**
 * The open-loop load generator (load.ts's openLoopSubmit) in a process of its own. In the
 * bench's process it shared an event loop with the S3 server, the queue watch and the result
 * bookkeeping, so a send could leave late behind them and a latency floor could be the bench's
 * own (issue 34). Here its loop does nothing but send on schedule and read answers; it is
 * measured from each request's scheduled time, so a late send still counts against the stack.
 *
 *   parent ──fork (IPC)──▶ child: { recipe, ratePerS, amount, maxSockets }
 *   child  ──────────────▶ parent: the OpenLoopResult (accepted ids with their scheduled time)
 *
 * The target travels as its recipe (submit-target.ts): the child makes the same bodies.
 * `scheduledAt` is the child's wall clock, the same host's as the stack's finish times.
 */
import { fork } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { type OpenLoopResult, openLoopSubmit, type SubmitTarget, type TargetRecipe } from './load.ts';
import { targetFrom } from './submit-target.ts';

const SELF = fileURLToPath(import.meta.url);

interface Plan {
  recipe: TargetRecipe;
  ratePerS: number;
  amount: number;
  maxSockets: number;
}

type Reply = { ok: true; result: OpenLoopResult } | { ok: false; error: string };

/** `amount` submits at `ratePerS` from a child process; rejects if the child fails or exits without an answer. */
export function openLoopInChild(target: SubmitTarget, ratePerS: number, amount: number, maxSockets: number): Promise<OpenLoopResult> {
  const recipe = target.recipe;
  if (!recipe) return Promise.reject(new Error('open loop: the target has no recipe, so another process cannot make its bodies'));
  return new Promise((resolve, reject) => {
    const child = fork(SELF, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2048);
    });
    let reply: Reply | undefined;
    child.once('message', (m) => {
      reply = m as Reply;
      child.disconnect();
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (reply?.ok) resolve(reply.result);
      else
        reject(
          new Error(
            `open loop child: ${reply ? reply.error : `exited (${code ?? signal}) without a result`}${stderr ? `\n${stderr}` : ''}`,
          ),
        );
    });
    child.send({ recipe, ratePerS, amount, maxSockets } satisfies Plan);
  });
}

async function main(): Promise<void> {
  const plan = await new Promise<Plan>((resolve) => process.once('message', (m) => resolve(m as Plan)));
  let reply: Reply;
  try {
    reply = { ok: true, result: await openLoopSubmit(targetFrom(plan.recipe), plan.ratePerS, plan.amount, plan.maxSockets) };
  } catch (err) {
    reply = { ok: false, error: errorMessage(err) };
  }
  await new Promise<void>((resolve) => process.send?.(reply, () => resolve()));
  process.disconnect?.();
}

if (process.send && process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
