/**
 * `warmpool simulate --bank N [--seed S] [--days D | --quick] [--cell-budget-s N] …`: N random
 * worlds (infra/simulator/world-bank.ts) through the default policy, walk-forward, judged against
 * the simple baselines and the oracle at the SLO target (infra/simulator/bank.ts). A line per
 * world on stderr as it finishes; the table on stdout; bank.md and bank.json in --out. The flags
 * are read by simulate.ts; this runs what they say.
 */
import { type BankOptions, bankMarkdown, bankSummary, generateBank, runBank, writeBank } from '../../infra/simulator/index.ts';
import type { SimulateOut } from './simulate-out.ts';
import { withProgress } from './simulate-progress.ts';

export interface BankInput extends Omit<BankOptions, 'onWorld'> {
  worlds: number;
  seed: number;
  days: number;
  dir: string;
}

export async function bankMain(input: BankInput, out: SimulateOut): Promise<number> {
  const started = performance.now();
  const worlds = generateBank(input.worlds, input.seed, { days: input.days });
  const result = await withProgress(out, 'worlds', worlds.length, (progress) =>
    runBank(worlds, input.seed, {
      ...input,
      onWorld: (c, done, total) => {
        progress.note(
          `[${done}/${total}] ${c.world} cold start ${c.coldStartS.toFixed(0)} s, SLO ${c.sloS.toFixed(1)} s: ${c.misses.length === 0 ? 'meets every target' : c.misses.join('; ')}\n`,
        );
        progress.done();
      },
    }),
  );
  writeBank(input.dir, result);
  const all = bankSummary(result).find((s) => s.family === 'all');
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  out.out(
    `${bankMarkdown(result)}\n${all?.met ?? 0} of ${all?.worlds ?? 0} worlds meet every target; ${seconds} s; wrote ${input.dir}/bank.md and ${input.dir}/bank.json\n`,
  );
  return 0;
}
