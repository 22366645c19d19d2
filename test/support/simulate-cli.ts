import { simulateMain } from '../../scripts/commands/simulate.ts';
import { runCli } from './cli-child.ts';

/** `warmpool simulate ARGS` in this process: its exit code and what it wrote to stdout and stderr. */
export async function runSimulate(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await simulateMain(args, {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
  });
  return { code, out, err };
}

/**
 * `warmpool simulate ARGS` as a user runs it, through bin/warmpool.mjs in a process of its own.
 * For runs that start replay threads (`--threads`, `--matrix`): there each thread loads the
 * built sweep thread, where in a test process every one compiles the simulator through tsx
 * (about 1.4 s of CPU a thread; a matrix starts two a cell).
 */
export async function runSimulateCli(args: string[], cwd: string): Promise<{ code: number | null; out: string; err: string }> {
  const r = await runCli(['simulate', ...args], { env: process.env, cwd, timeoutMs: 280_000 });
  return { code: r.code, out: r.stdout, err: r.stderr };
}
