/**
 * Submit → done latency at light, fixed rates (5–50 requests/s: what a product team's traffic
 * mostly is), for warmpool and the minimal stack side by side in one bench run (issue 34). Each
 * rung is an open-loop run from the generator's own process (open-loop-child.ts), measured from
 * each request's scheduled time; a rung past 80 % of a stack's measured maximum is not light
 * load for it and is left out (the e2e_latency row at 80 % and the serving search cover that).
 *
 *   light_load_p99_ms            warmpool's worst p99 over its rungs
 *   light_load_p99_vs_minimal    that ÷ the minimal stack's worst p99 over the same rungs
 */
import { measureOpenLoop, type OpenLoopRun, SEEDS, type StackUnderTest } from './e2e.ts';
import type { BenchRow } from './report.ts';

export interface LadderPlan {
  /** Offered rates, requests/s, lightest first. */
  rates: readonly number[];
  /** Requests per rung at the least (a rung lasts max(this ÷ rate, durationS) seconds). */
  minRequests: number;
  durationS: number;
}

export interface LadderRung {
  ratePerS: number;
  run?: OpenLoopRun;
  /** Why the rung was not run, or failed. */
  skipped?: string;
}

/** A rung's requests are this far apart in seed from the next rung's (more than any rung sends). */
const RUNG_SEEDS = 100_000;
const LIGHT_SHARE = 0.8;

/** Runs each rung in turn on `stack`; `maxPerS` is its measured maximum (rungs past 80 % of it are skipped). */
export async function climbLadder(
  stack: StackUnderTest,
  plan: LadderPlan,
  maxPerS: number,
  out: (line: string) => void,
): Promise<LadderRung[]> {
  const rungs: LadderRung[] = [];
  for (const [i, ratePerS] of plan.rates.entries()) {
    if (Number.isFinite(maxPerS) && ratePerS > LIGHT_SHARE * maxPerS) {
      rungs.push({ ratePerS, skipped: `past 80% of its max (${Math.round(maxPerS)}/s)` });
      continue;
    }
    const amount = Math.max(plan.minRequests, Math.round(ratePerS * plan.durationS));
    try {
      const run = await measureOpenLoop(stack, { ratePerS, amount, connections: 32, seed: SEEDS.ladder + i * RUNG_SEEDS });
      rungs.push({ ratePerS, run });
      out(
        `  ${stack.label} at ${ratePerS}/s: submit → done p50 ${ms(run.latency.p50)} p99 ${ms(run.latency.p99)} ms (202 p99 ${ms(run.http.p99)})`,
      );
    } catch (err) {
      rungs.push({ ratePerS, skipped: err instanceof Error ? err.message.split('\n')[0] : String(err) });
    }
  }
  return rungs;
}

export function ladderRows(m: string, warmpool: LadderRung[], minimal: LadderRung[] | undefined): BenchRow[] {
  const worst = (rungs: LadderRung[] | undefined) => Math.max(...(rungs ?? []).flatMap((r) => (r.run ? [r.run.latency.p99] : [])));
  const ours = worst(warmpool);
  // The same rungs on both sides: a rate warmpool left out (past 80% of its max) is left out of the minimal stack's too.
  const ran = new Set(warmpool.flatMap((r) => (r.run ? [r.ratePerS] : [])));
  const theirs = worst(minimal?.filter((r) => ran.has(r.ratePerS)));
  const detail = `submit → done by offered rate, open loop from its own process; warmpool | minimal stack: ${describe(warmpool, minimal)}`;
  return [
    { name: `${m}.light_load_p99_ms`, value: ran.size > 0 ? ours : NaN, unit: 'ms', detail },
    {
      name: `${m}.light_load_p99_vs_minimal`,
      value: ran.size > 0 && Number.isFinite(theirs) && theirs > 0 ? ours / theirs : NaN,
      unit: 'ratio',
      detail: `warmpool's worst p99 over the rungs ÷ the minimal stack's (${ms(ours)} vs ${ms(theirs)} ms)`,
    },
  ];
}

function describe(warmpool: LadderRung[], minimal: LadderRung[] | undefined): string {
  const one = (r: LadderRung | undefined) =>
    !r ? 'n/a' : r.run ? `p50 ${ms(r.run.latency.p50)} p99 ${ms(r.run.latency.p99)} ms ×${r.run.latency.count}` : `— (${r.skipped})`;
  return warmpool.map((r) => `${r.ratePerS}/s ${one(r)} | ${one(minimal?.find((x) => x.ratePerS === r.ratePerS))}`).join('; ');
}

function ms(v: number): string {
  return Number.isFinite(v) ? (v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString('en-US')) : 'n/a';
}
