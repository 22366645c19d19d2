import { simulateMain } from '../../scripts/commands/simulate.ts';

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
