/**
 * `warmpool s3 ls|cp` through the real bin/warmpool.mjs against the suite's real S3 server (the
 * same s3rver `warmpool dev` embeds): files up, listed, and back down byte for byte, a directory
 * with --recursive, stdout with -, and the mistakes a user makes answered in one line.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { loadConfig } from '../infra/kernel/config.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { runCli } from './support/cli-child.ts';
import { testEnv, testServices } from './support/services.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

const env = testEnv();
const config = loadConfig(env);
const store = createS3ObjectStore(config.s3);
const bucket = config.s3.bucket;
/** This file's own folder in the shared bucket. */
const root = `${config.s3.prefix}/cli-s3/`;
const s3 = (key = '') => `s3://${bucket}/${root}${key}`;
let dir: string;
const ROWS = '{"id":"a","features":[1,2]}\n{"id":"b","features":[3,4]}\n';
const CSV = 'id,f0,f1\nc,5,6\n';
const size = (text: string) => Buffer.byteLength(text);

function cli(...args: string[]): Promise<Result> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, 's3', ...args], { env, cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    // bin/warmpool.mjs's notice when another edit in this checkout made dist/ stale is not the command's output.
    child.once('close', (code) =>
      resolve({ code, stdout, stderr: stderr.replace(/^warmpool: .*(building dist\/|through tsx).*\n/gm, '') }),
    );
  });
}

beforeAll(() => {
  dir = mkdtempSync(path.join(testServices().tmpDir, 'cli-s3-'));
  writeFileSync(path.join(dir, 'rows.jsonl'), ROWS);
  writeFileSync(path.join(dir, 'more.csv'), CSV);
  mkdirSync(path.join(dir, 'inputs', 'day-2'), { recursive: true });
  writeFileSync(path.join(dir, 'inputs', 'one.jsonl'), '{"id":"d"}\n');
  writeFileSync(path.join(dir, 'inputs', 'day-2', 'two.jsonl'), '{"id":"e"}\n');
});

afterAll(() => store.close());

it('cp uploads files into a folder, ls lists this level with folders as PRE, -r every object', async () => {
  const up = await cli('cp', 'rows.jsonl', 'more.csv', s3('in/'));
  expect(up.code, up.stderr).toBe(0);
  expect(up.stdout).toBe(
    `upload: rows.jsonl to ${s3('in/rows.jsonl')} (${size(ROWS)} B)\nupload: more.csv to ${s3('in/more.csv')} (${size(CSV)} B)\n`,
  );
  expect(Buffer.from((await store.getBytes(`${root}in/rows.jsonl`)) ?? []).toString()).toBe(ROWS);
  expect(Buffer.from((await store.getBytes(`${root}in/more.csv`)) ?? []).toString()).toBe(CSV);

  const dirUp = await cli('cp', '--recursive', 'inputs', s3('in/'));
  expect(dirUp.code, dirUp.stderr).toBe(0);
  expect(dirUp.stdout).toContain(`to ${s3('in/day-2/two.jsonl')}`);

  const level = await cli('ls', s3('in/'));
  expect(level.code, level.stderr).toBe(0);
  const lines = level.stdout.trimEnd().split('\n');
  expect(lines[0]).toMatch(/^\s+PRE day-2\/$/);
  expect(lines.slice(1).map((l) => l.split(/\s+/).slice(2))).toEqual([
    [String(size(CSV)), 'more.csv'],
    ['11', 'one.jsonl'],
    [String(size(ROWS)), 'rows.jsonl'],
  ]);
  expect(lines[1]).toMatch(new RegExp(`^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d +${size(CSV)} more\\.csv$`));

  const all = await cli('ls', '-r', s3('in/'));
  expect(
    all.stdout
      .trim()
      .split('\n')
      .map((l) => l.split(/\s+/).at(-1)),
  ).toEqual(['day-2/two.jsonl', 'more.csv', 'one.jsonl', 'rows.jsonl'].map((k) => `${root}in/${k}`));
});

it('cp downloads an object to a file, into a directory, to stdout, and a prefix with -r', async () => {
  await store.put(`${root}out/part-000000.jsonl`, '{"id":"a","score":0.5}\n');
  await store.put(`${root}out/sub/part-000001.jsonl`, '{"id":"b","score":0.25}\n');

  const toFile = await cli('cp', s3('out/part-000000.jsonl'), 'got.jsonl');
  expect(toFile.code, toFile.stderr).toBe(0);
  expect(readFileSync(path.join(dir, 'got.jsonl'), 'utf8')).toBe('{"id":"a","score":0.5}\n');

  mkdirSync(path.join(dir, 'into'));
  expect((await cli('cp', s3('out/part-000000.jsonl'), 'into')).code).toBe(0);
  expect(readFileSync(path.join(dir, 'into', 'part-000000.jsonl'), 'utf8')).toBe('{"id":"a","score":0.5}\n');

  const toStdout = await cli('cp', s3('out/sub/part-000001.jsonl'), '-');
  expect(toStdout.stdout).toBe('{"id":"b","score":0.25}\n');
  expect(toStdout.stderr).toBe('');

  const tree = await cli('cp', '-r', s3('out/'), 'results');
  expect(tree.code, tree.stderr).toBe(0);
  expect(readFileSync(path.join(dir, 'results', 'sub', 'part-000001.jsonl'), 'utf8')).toBe('{"id":"b","score":0.25}\n');
});

it('ls and cp to stdout end quietly when the reader of stdout is gone (`… | head`)', async () => {
  await store.put(`${root}piped/big.bin`, Buffer.alloc(1 << 20, 7));
  for (const args of [
    ['ls', '-r', s3()],
    ['ls', s3('in/')],
    ['cp', s3('piped/big.bin'), '-'],
  ]) {
    const res = await runCli(['s3', ...args], { env, cwd: dir, closeStdout: true });
    expect(res.stderr, args.join(' ')).toBe('');
    expect(res.code, args.join(' ')).toBe(0);
  }
});

it('a single file can go to a key of its own name', async () => {
  expect((await cli('cp', 'more.csv', s3('exact/renamed.csv'))).code).toBe(0);
  expect(Buffer.from((await store.getBytes(`${root}exact/renamed.csv`)) ?? []).toString()).toBe(CSV);
});

it.each([
  [['cp', 'missing.jsonl', '$in'], 2, /^warmpool s3 cp: no such file: missing\.jsonl\n$/],
  [['cp', 'inputs', '$in'], 2, /^warmpool s3 cp: inputs is a directory: add --recursive to copy its files\nsee 'warmpool s3 cp --help'\n$/],
  [['cp', 'rows.jsonl', 'more.csv', '$key'], 2, /several files go into a folder: end the destination with \//],
  [['cp', 'rows.jsonl', 'elsewhere.jsonl'], 2, /copy local files to one s3:\/\/ destination/],
  [
    ['cp', '$key', 'x'],
    1,
    /^warmpool s3 cp: no such object: s3:\/\/.*\/in\/nothing-here \(`warmpool s3 ls s3:\/\/.*\/in\/` lists what is there\)\n$/,
  ],
  [['ls', 'not-a-url'], 2, /name an s3:\/\/bucket\/prefix\/ to list \(got 'not-a-url'\)/],
  [['ls', 's3://no-such-bucket-anywhere/'], 1, /^warmpool s3 ls: S3 bucket "no-such-bucket-anywhere" does not exist at http:/],
])('%j → exit %i, one line', async (args, code, message) => {
  const resolved = args.map((a) => (a === '$in' ? s3('in/') : a === '$key' ? s3('in/nothing-here') : a));
  const res = await cli(...resolved);
  expect(res.code).toBe(code);
  expect(res.stderr).toMatch(message);
  expect(res.stderr).not.toMatch(/\n\s+at /);
});
