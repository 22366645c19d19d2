/**
 * `warmpool simulate`'s progress line (scripts/commands/simulate-progress.ts) as a user meets it:
 * through the real bin/warmpool.mjs, on a terminal and off one. On a pipe (a log, CI, this test's
 * capture) stderr stays empty; on a terminal — a pseudo-terminal from util-linux `script` — the
 * line counts the replays up to the planned total and is cleared before the table.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { BIN, runCli } from './support/cli-child.ts';
import { testServices } from './support/services.ts';

let dir: string;
const ARGS = ['simulate', '--trace', 'trace.csv', '--count-col', 'count', '--threads', '1', '--sweep', 'standby=0,1'];

beforeAll(() => {
  dir = mkdtempSync(path.join(testServices().tmpDir, 'simulate-progress-'));
  const rows = Array.from({ length: 120 }, (_, m) => `${new Date(Date.UTC(2024, 0, 1, 0, m)).toISOString()},${(m % 7) + 1}`);
  writeFileSync(path.join(dir, 'trace.csv'), `time,count\n${rows.join('\n')}\n`);
});

it('prints no progress when stderr is not a terminal', async () => {
  const res = await runCli(ARGS, { env: process.env, cwd: dir, timeoutMs: 120_000 });
  expect(res.code, res.stderr).toBe(0);
  expect(res.stderr).toBe('');
  expect(res.stdout).toContain('wrote simulation/sweep.json');
});

const hasScript = spawnSync('script', ['--version']).status === 0;

it.skipIf(!hasScript)('draws the replays done of planned on a terminal, and clears the line before the table', () => {
  const command = [process.execPath, BIN, ...ARGS].map((a) => `'${a}'`).join(' ');
  const tty = execFileSync('script', ['-qec', command, '/dev/null'], { cwd: dir, encoding: 'utf8', timeout: 120_000 });
  // What follows each clearing of the line: the line redrawn, and at the end the table.
  const frames = tty.split('\r\x1b[2K').slice(1);
  // The sweep: three baselines in one task, then one replay per point.
  expect(frames[0]).toMatch(/^simulate: 0\/5 replays \(0%\), \d+s, ETA \?$/);
  expect(frames.at(-2)).toMatch(/^simulate: 5\/5 replays \(100%\), \d+s, ETA 0s$/);
  expect(frames.at(-1)).toMatch(/^\| # \| standby \|/);
});
