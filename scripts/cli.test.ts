/**
 * Help and unknown flags on every command, answered by main() in this process: `--help` prints
 * the command's table (every option its parser takes) and exits 0; `-h` and `help <command>` are
 * `--help` by other names; an unknown flag is one line naming the command's help, exit 2. None of
 * them starts anything (the leak check would see a Redis connection or a child left behind).
 * test/cli-help.test.ts runs the same through the real bin/warmpool.mjs on a few commands, in a
 * folder whose dev.env names dead endpoints: the bin's way to main() is the same for every one.
 */
import { describe, expect, it, vi } from 'vitest';
import { main } from './cli.ts';
import { COMMANDS, GROUPS } from './commands/cli-options.ts';

/** What main() writes to stdout and stderr, and its exit code. */
async function answer(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const write = (into: 'out' | 'err') => (chunk: string | Uint8Array) => {
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    if (into === 'out') stdout += text;
    else stderr += text;
    return true;
  };
  vi.spyOn(process.stdout, 'write').mockImplementation(write('out'));
  vi.spyOn(process.stderr, 'write').mockImplementation(write('err'));
  try {
    const code = await main(argv, {});
    return { code, stdout, stderr };
  } finally {
    vi.restoreAllMocks();
  }
}

describe('help aliases', () => {
  it.each(COMMANDS.map((c) => [c.path, c]))(
    "warmpool %s --help: the command's usage and every option in its table; -h and help <command> print the same",
    async (path, spec) => {
      const words = path.split(' ');
      const long = await answer([...words, '--help']);
      expect(long.code).toBe(0);
      expect(long.stderr).toBe('');
      expect(long.stdout).toContain(`Usage: warmpool ${path}`);
      for (const name of [...Object.keys(spec.options), 'help', 'debug']) expect(long.stdout, `${path} --${name}`).toContain(`--${name}`);
      expect(await answer([...words, '-h'])).toEqual(long);
      expect(await answer(['help', ...words])).toEqual(long);
    },
  );

  it.each(COMMANDS.map((c) => [c.path]))("warmpool %s --no-such-flag: one line naming the command's help, exit 2", async (path) => {
    expect(await answer([...path.split(' '), '--no-such-flag'])).toEqual({
      code: 2,
      stderr: `warmpool ${path}: unknown option '--no-such-flag'\nsee 'warmpool ${path} --help'\n`,
      stdout: '',
    });
  });

  it.each(GROUPS.map((g) => [g.path]))('warmpool %s: help <group> prints what <group> --help prints', async (path) => {
    const long = await answer([path, '--help']);
    expect(long.code).toBe(0);
    expect(await answer([path, '-h'])).toEqual(long);
    expect(await answer(['help', path])).toEqual(long);
  });
});
