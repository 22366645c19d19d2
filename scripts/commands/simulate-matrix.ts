/**
 * `warmpool simulate --matrix --traces DIR | --trace FILE [--quick] [--cell-budget-s N] …`: every
 * trace through the grid of worlds with the default policy, walk-forward (infra/simulator/matrix.ts).
 * Prints the table and writes matrix.md and matrix.json to --out. The flags are read by
 * simulate.ts; this runs what they say.
 */
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { errorMessage, InvalidInputError } from '../../infra/kernel/errors.ts';
import {
  type MatrixOptions,
  type MatrixTrace,
  matrixMarkdown,
  matrixWorlds,
  readTraceFile,
  runMatrix,
  traceWorld,
  writeMatrix,
} from '../../infra/simulator/index.ts';
import type { SimulateOut } from './simulate-out.ts';
import { withProgress } from './simulate-progress.ts';

/** runMatrix's options as the flags give them, and where the traces are and the table goes. */
export interface MatrixInput
  extends Pick<MatrixOptions, 'scaler' | 'given' | 'coldStartCv' | 'trainFraction' | 'sloTarget' | 'threads' | 'cellCpuBudgetMs'> {
  /** Trace files, in the order they are reported. */
  files: string[];
  timeColumn?: string;
  countColumn?: string;
  quick: boolean;
  dir: string;
}

/** `--traces DIR`: every .csv file in it, by name; a file given instead is taken as it is. */
export function traceFiles(where: string): string[] {
  let isDir: boolean;
  try {
    isDir = statSync(where).isDirectory();
  } catch (err) {
    throw new InvalidInputError('invalid_flag', `--traces ${where}: ${errorMessage(err)}`, { cause: err });
  }
  if (!isDir) return [where];
  const files = readdirSync(where)
    .filter((f) => f.endsWith('.csv'))
    .sort()
    .map((f) => path.join(where, f));
  if (files.length === 0) throw new InvalidInputError('invalid_flag', `--traces ${where}: no .csv file in it`);
  return files;
}

export async function matrixMain(input: MatrixInput, out: SimulateOut): Promise<number> {
  const traces: MatrixTrace[] = input.files.map((file) => {
    const name = path.basename(file);
    const known = traceWorld(name);
    return {
      name,
      trace: readTraceFile(file, { timeColumn: input.timeColumn, countColumn: input.countColumn }),
      scale: input.given.scale ?? known.scale,
      pattern: input.given.pattern ?? known.pattern,
    };
  });
  const started = performance.now();
  const result = await withProgress(out, 'cells', traces.length * matrixWorlds().length, (progress) =>
    runMatrix(traces, {
      ...input,
      onCell: (c, done, total) => {
        progress.note(
          `[${done}/${total}] ${c.trace} cold start ${c.coldStartS} s, SLO ${c.sloS} s, ${c.jobs}: ${c.misses.length === 0 ? 'meets every target' : c.misses.join('; ')}\n`,
        );
        progress.done();
      },
    }),
  );
  writeMatrix(input.dir, result);
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  out.out(
    `${matrixMarkdown(result)}\n${result.cells.length} cells in ${seconds} s; wrote ${input.dir}/matrix.md and ${input.dir}/matrix.json\n`,
  );
  return 0;
}
