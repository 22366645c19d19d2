/**
 * Help as a user types it, through the real bin/warmpool.mjs: `warmpool <command> --help`, `-h`
 * and `warmpool help <command>` print the command's table (every option its parser takes) and
 * exit 0 at once, starting nothing, even with Redis and S3 unreachable and a `.warmpool/dev.env`
 * naming dead ports; an unknown flag is one line naming the command's help, exit 2, before
 * anything starts; every group and the overview list their commands. Commands are sampled here
 * (BIN_SAMPLE); scripts/cli.test.ts answers the same for every command in-process.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS, GROUPS } from '../scripts/commands/cli-options.ts';
import { type CliResult, runCli } from './support/cli-child.ts';
import { testServices } from './support/services.ts';

let cwd: string;
let env: NodeJS.ProcessEnv;
const DEV_ENV = () => path.join(cwd, '.warmpool', 'dev.env');

/** The real CLI in `cwd`; one that should stop at once and does not is killed (its signal says so). */
function cli(...args: string[]): Promise<CliResult> {
  return runCli(args, { env, cwd });
}

/** At most three CLIs at a time (a two-core machine). */
async function each<T, R>(items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += 3) results.push(...(await Promise.all(items.slice(i, i + 3).map(run))));
  return results;
}

beforeAll(async () => {
  cwd = mkdtempSync(path.join(testServices().tmpDir, 'cli-help-'));
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const dead = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  // What a stopped `warmpool dev` leaves behind: every command would find dead endpoints here.
  mkdirSync(path.join(cwd, '.warmpool'));
  writeFileSync(
    DEV_ENV(),
    `REDIS_URL=redis://127.0.0.1:${dead}\nS3_ENDPOINT=http://127.0.0.1:${dead}\nWARMPOOL_URL=http://127.0.0.1:${dead}\n`,
  );
  env = { ...process.env };
  for (const name of ['REDIS_URL', 'S3_ENDPOINT', 'S3_BUCKET', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'PORT', 'WARMPOOL_DEBUG'])
    delete env[name];
});

const paths = COMMANDS.map((c) => c.path);
/**
 * The commands run through the real bin: one that would start a stack, a subcommand, one with
 * many options, and ones that reach Redis, S3 or the API once running. scripts/cli.test.ts shows
 * in-process that every command answers help and an unknown flag so; the bin's way to main() is
 * the same for every command.
 */
const BIN_SAMPLE = ['dev', 'bulk run', 'simulate', 'worker', 'models publish', 's3 ls'];

describe.each([
  ['<command> --help', BIN_SAMPLE, (p: string) => [...p.split(' '), '--help']],
  ['<command> -h', BIN_SAMPLE.slice(0, 3), (p: string) => [...p.split(' '), '-h']],
  ['help <command>', BIN_SAMPLE.slice(0, 3), (p: string) => ['help', ...p.split(' ')]],
])('warmpool %s', (_, commands, argsOf) => {
  it("prints the command's usage and every option in its table, exit 0, starting nothing", async () => {
    const before = readFileSync(DEV_ENV(), 'utf8');
    const results = await each(commands, (p) => cli(...argsOf(p)));
    for (const [i, res] of results.entries()) {
      const spec = COMMANDS.find((c) => c.path === commands[i]) as (typeof COMMANDS)[number];
      expect({ command: spec.path, code: res.code, signal: res.signal, stderr: res.stderr }).toEqual({
        command: spec.path,
        code: 0,
        signal: null,
        stderr: '',
      });
      expect(res.stdout).toContain(`Usage: warmpool ${spec.path}`);
      for (const name of [...Object.keys(spec.options), 'help', 'debug'])
        expect(res.stdout, `${spec.path} --${name}`).toContain(`--${name}`);
    }
    // `dev --help` started no second stack: the folder's dev.env is as it was, no state appeared.
    expect(readFileSync(DEV_ENV(), 'utf8')).toBe(before);
    expect(existsSync(path.join(cwd, '.warmpool', 'redis'))).toBe(false);
    expect(existsSync(path.join(cwd, '.warmpool', 's3'))).toBe(false);
  });
});

it('a group and the overview list their commands; `warmpool help nope` is an unknown command', async () => {
  for (const group of GROUPS) {
    for (const args of [
      [group.path, '--help'],
      ['help', group.path],
    ]) {
      const res = await cli(...args);
      expect(res.code, args.join(' ')).toBe(0);
      for (const sub of group.subcommands) expect(res.stdout).toContain(`warmpool ${sub.path}`);
    }
    const bare = await cli(group.path);
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain(`warmpool ${group.path}: name a subcommand`);
  }
  const overview = await cli('--help');
  expect(overview.code).toBe(0);
  for (const p of paths) expect(overview.stdout).toContain(`  ${p} `);
  expect((await cli('help')).stdout).toBe(overview.stdout);
  const unknown = await cli('help', 'nope');
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toBe(`warmpool help: unknown command "nope"\nsee 'warmpool --help'\n`);
  const unknownSub = await cli('bulk', 'start');
  expect(unknownSub.code).toBe(2);
  expect(unknownSub.stderr).toContain('unknown bulk subcommand "start" (run, status, cancel)');
});

it("an unknown flag: one line naming the command's help, exit 2, nothing started", async () => {
  const results = await each(BIN_SAMPLE, (p) => cli(...p.split(' '), '--no-such-flag'));
  for (const [i, res] of results.entries()) {
    const p = BIN_SAMPLE[i] as string;
    expect({ command: p, code: res.code, stderr: res.stderr, stdout: res.stdout }).toEqual({
      command: p,
      code: 2,
      stderr: `warmpool ${p}: unknown option '--no-such-flag'\nsee 'warmpool ${p} --help'\n`,
      stdout: '',
    });
  }
});

it('--help wins over anything else on the line, and is not mistaken for a value after --', async () => {
  const res = await cli('bulk', 'run', '--no-such-flag', '--model', 'x', '--help');
  expect(res.code).toBe(0);
  expect(res.stdout).toContain('Usage: warmpool bulk run');
  const literal = await cli('simulate', '--', '--help');
  expect(literal.code).toBe(2);
  expect(literal.stdout).not.toContain('Usage:');
});
