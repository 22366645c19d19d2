/**
 * `-h` and `help <command>` are `--help` by other names, for every command: main() answers each
 * with the same text and exit 0 (test/cli-help.test.ts runs `--help` on every command through
 * the real bin/warmpool.mjs, and the aliases there on a few).
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
  it.each(COMMANDS.map((c) => [c.path]))('warmpool %s: -h and help <command> print what --help prints', async (path) => {
    const words = path.split(' ');
    const long = await answer([...words, '--help']);
    expect(long.code).toBe(0);
    expect(long.stderr).toBe('');
    expect(long.stdout).toContain(`Usage: warmpool ${path}`);
    expect(await answer([...words, '-h'])).toEqual(long);
    expect(await answer(['help', ...words])).toEqual(long);
  });

  it.each(GROUPS.map((g) => [g.path]))('warmpool %s: help <group> prints what <group> --help prints', async (path) => {
    const long = await answer([path, '--help']);
    expect(long.code).toBe(0);
    expect(await answer([path, '-h'])).toEqual(long);
    expect(await answer(['help', path])).toEqual(long);
  });
});
