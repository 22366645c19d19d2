/**
 * `warmpool … | head`: the real bin/warmpool.mjs with its stdout a pipe whose reading end is
 * closed before the command writes a byte, as `head` closes it once it has its lines. Every write
 * then fails with EPIPE; the command must end quietly (exit 0, nothing on stderr), never with a
 * stack trace. The S3 listing, which writes a line per object, is in cli-s3.test.ts.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { runCli } from './support/cli-child.ts';
import { testEnv, testServices } from './support/services.ts';

const closed = (args: string[], cwd = process.cwd()) => runCli(args, { env: testEnv(), cwd, closeStdout: true, timeoutMs: 120_000 });

it.each([
  ['the overview', ['--help']],
  ["a command's help", ['simulate', '--help']],
  ['help for a group', ['help', 's3']],
])('%s, its reader gone, ends with exit 0 and nothing on stderr', async (_, args) => {
  const res = await closed(args);
  expect(res.stderr).toBe('');
  expect(res.code).toBe(0);
});

it('a simulation whose reader is gone still writes its report and ends quietly', async () => {
  const dir = mkdtempSync(path.join(testServices().tmpDir, 'closed-stdout-'));
  const rows = Array.from({ length: 120 }, (_, m) => `${new Date(Date.UTC(2024, 0, 1, 0, m)).toISOString()},${(m % 7) + 1}`);
  writeFileSync(path.join(dir, 'trace.csv'), `time,count\n${rows.join('\n')}\n`);
  const res = await closed(['simulate', '--trace', 'trace.csv', '--count-col', 'count', '--threads', '1'], dir);
  expect(res.stderr).toBe('');
  expect(res.code).toBe(0);
  expect(existsSync(path.join(dir, 'simulation', 'report.json'))).toBe(true);
});
