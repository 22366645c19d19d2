/**
 * `warmpool bulk` as a user runs it: a real process (stdout is a pipe, so progress comes as plain
 * lines), real Redis, the S3 server and a real worker. Bad flags exit 2 naming the flag; Ctrl-C
 * stops the drive and prints the command that resumes it, and that command finishes the run with
 * every id exactly once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunManifest } from '../infra/bulk/run-manifest.ts';
import type { BulkRunView } from '../infra/contracts/bulk.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { formatRate } from '../infra/kernel/format-figures.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { type BulkIo, bulkMain } from '../scripts/commands/bulk.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { testBulkPrefix } from './support/services.ts';
import { startStack, type TestStack } from './support/stack.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const MODEL = 'bulk-cli-model';
const LATE = 'bulk-cli-late'; // its worker starts only after the interrupted run
const FEATURES = 4;

let stack: TestStack;
let s3: ObjectStore & { close(): void };
let root: string;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(args: string[]): { child: ChildProcess; result: Promise<Result>; stdout: () => string } {
  const child = spawn(process.execPath, [BIN, 'bulk', ...args], { env: stack.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const result = new Promise<Result>((resolve) => child.once('exit', (code) => resolve({ code, stdout, stderr })));
  return { child, result, stdout: () => stdout };
}

const cli = (...args: string[]) => start(args).result;
const s3Url = (prefix: string) => `s3://${stack.config.s3.bucket}/${prefix}`;

async function putRows(prefix: string, object: string, ids: string[]): Promise<void> {
  const lines = ids.map((id, n) => JSON.stringify({ id, features: Array.from({ length: FEATURES }, (_, k) => (n + k) / 10) }));
  await s3.put(`${prefix}${object}.jsonl`, `${lines.join('\n')}\n`);
}

/** Every id in the parts under `prefix`, in the order read (duplicates kept, so a test can see them). */
async function idsInParts(prefix: string): Promise<string[]> {
  const ids: string[] = [];
  for (const { key } of await s3.list(prefix)) {
    if (!/part-\d{6}\.jsonl$/.test(key)) continue;
    const text = Buffer.from((await s3.getBytes(key)) ?? []).toString('utf8');
    for (const line of text.split('\n').filter(Boolean)) ids.push((JSON.parse(line) as { id: string }).id);
  }
  return ids;
}

async function until(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300' });
  s3 = createS3ObjectStore(stack.config.s3);
  root = `${testBulkPrefix(stack.config.s3.prefix, 'tenant-a')}bulk-cli/`;
  const model = buildMlpModel({ features: FEATURES, hidden: 8, layers: 1 });
  for (const name of [MODEL, LATE]) await stack.registry.publish({ name, version: '1', bytes: model, maxBatch: 16 });
  await stack.deployments.put({ model: MODEL, version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker(MODEL, '1');
  await stack.waitForWorkers(MODEL, 'active');
}, 120_000);

afterAll(async () => {
  await stack?.close();
  s3?.close();
});

describe('warmpool bulk run', () => {
  const ids = Array.from({ length: 7 }, (_, i) => `row-${i}`);

  it('prints the run id first, progress lines, and succeeds with every row in the parts', async () => {
    await putRows(`${root}ok/in/`, 'rows', ids);
    const res = await cli(
      'run',
      '--model',
      MODEL,
      '--input',
      s3Url(`${root}ok/in/`),
      '--output',
      s3Url(`${root}ok/out/`),
      '--chunk-rows',
      '3',
    );
    expect(res.code, res.stderr).toBe(0);
    const lines = res.stdout.trim().split('\n');
    const id = /^bulk run (\S+): bulk-cli-model@1, /.exec(lines[0] ?? '')?.[1];
    expect(id, res.stdout).toBeDefined();
    expect(lines.some((l) => l.startsWith(`bulk ${id}: `) && / rows \(\d+\.\d%\)/.test(l))).toBe(true);
    expect(lines.at(-1)).toMatch(new RegExp(`^bulk ${id} succeeded: 7 rows.*manifest s3://.*_manifest\\.json$`));
    expect(res.stdout).not.toContain('\r'); // not a terminal: no bar redraws
    expect((await idsInParts(`${root}ok/out/`)).sort()).toEqual([...ids].sort());
    expect(await s3.head(`${root}ok/out/_manifest.json`)).not.toBeNull();

    const status = await cli('status', id as string);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(`${id}: succeeded`);
    const json = await cli('status', id as string, '--json');
    const view = JSON.parse(json.stdout) as BulkRunView;
    expect(view).toMatchObject({ id, status: 'succeeded', progress: { rowsDone: 7 } });
    // The rate shown is the manifest's (rows ÷ the run's duration), the same figure the run's view gives.
    const manifest = JSON.parse(Buffer.from((await s3.getBytes(`${root}ok/out/_manifest.json`)) ?? []).toString('utf8')) as RunManifest;
    expect(view.progress.rowsPerSecond).toBe(manifest.timings.rowsPerSecond);
    expect(status.stdout).toContain(`(${formatRate(manifest.timings.rowsPerSecond)} rows/s); manifest`);
    const cancel = await cli('cancel', id as string);
    expect(cancel.code).toBe(1);
    expect(cancel.stderr).toContain('already succeeded');
  });

  it('a run whose every row is bad says failed, with the first bad row, and exits 1 (run and status)', async () => {
    const prefix = `${root}all-bad/`;
    await s3.put(`${prefix}in/rows.jsonl`, '{"id":"x","features":"not numbers"}\n{"features":[1,2,3,4]}\nnot json\n');
    const res = await cli(
      'run',
      '--model',
      MODEL,
      '--input',
      s3Url(`${prefix}in/`),
      '--output',
      s3Url(`${prefix}out/`),
      '--run-id',
      'all-bad-1',
    );
    expect(res.code, res.stdout).toBe(1);
    expect(res.stderr).toMatch(
      /^bulk all-bad-1 failed: all 3 rows were bad \(first: s3:\/\/\S+\/all-bad\/in\/rows\.jsonl line 1: .+\); nothing was written$/m,
    );
    expect(`${res.stdout}${res.stderr}`).not.toContain('succeeded');
    const status = await cli('status', 'all-bad-1');
    expect(status.code).toBe(1);
    expect(status.stdout).toContain('failed: all 3 rows were bad (first: ');
    expect(status.stdout).not.toContain('succeeded');
  });

  it('a run failed on its bad-row budget says so in words and stays failed: its --run-id with another --max-bad-rows exits 2 naming it', async () => {
    const prefix = `${root}budget/`;
    const rows = Array.from({ length: 12 }, (_, n) =>
      n % 4 === 2 ? 'not json' : JSON.stringify({ id: `b-${n}`, features: Array.from({ length: FEATURES }, (_, k) => (n + k) / 10) }),
    );
    await s3.put(`${prefix}in/rows.jsonl`, `${rows.join('\n')}\n`);
    const args = ['run', '--model', MODEL, '--input', s3Url(`${prefix}in/`), '--output', s3Url(`${prefix}out/`), '--run-id', 'budget-1'];
    const res = await cli(...args, '--max-bad-rows', '1');
    expect(res.code, res.stdout).toBe(1);
    // No log line of the run's code comes out as JSON, on either stream.
    for (const line of `${res.stdout}\n${res.stderr}`.split('\n')) expect(line.trimStart().startsWith('{'), line).toBe(false);
    const progress = res.stdout.split('\n').filter((l) => l.startsWith('bulk budget-1: '));
    expect(progress.at(-1)).toMatch(/^bulk budget-1: failed at \d+ of ~?\d+ rows, 3 bad$/);
    expect(res.stdout).not.toContain('99.9%');
    expect(res.stderr).toMatch(
      /^bulk budget-1 failed after \d+ of ~?\d+ rows in \S+: too_many_bad_rows: 3 bad rows, more than maxBadRows 1; the first: s3:\/\/\S+\/budget\/in\/rows\.jsonl line 3: /m,
    );
    expect(res.stderr).toContain('--run-id resumes only a run that is still running');

    // The resume: the failed run's id with a larger budget. A conflict, named as flags; the run stays failed.
    const bigger = await cli(...args, '--max-bad-rows', '200');
    expect(bigger.code, bigger.stdout).toBe(2);
    expect(bigger.stderr).toContain(`warmpool bulk run: run budget-1 exists with another spec: --max-bad-rows 200 (the run's: 1)`);
    expect(bigger.stderr).toContain('another --run-id (with an empty --output)');
    expect(bigger.stderr).not.toMatch(/^\s+at /m);
    // The same flags again: shown as it ended, exit 1, nothing driven.
    const same = await cli(...args, '--max-bad-rows', '1');
    expect(same.code).toBe(1);
    expect(same.stderr).toMatch(/^bulk budget-1 failed after /m);
    const status = await cli('status', 'budget-1', '--json');
    expect(status.code).toBe(1);
    expect(JSON.parse(status.stdout)).toMatchObject({ status: 'failed', error: { code: 'too_many_bad_rows' } });
    for (const r of [bigger, same, status]) expect(`${r.stdout}${r.stderr}`).not.toContain('succeeded');
  });

  it('Ctrl-C stops driving and prints the resume command, which then finishes with each id exactly once', async () => {
    await putRows(`${root}resume/in/`, 'rows', ids);
    const runId = 'cli-resume-1';
    const args = [
      'run',
      '--model',
      LATE,
      '--version',
      '1',
      '--input',
      s3Url(`${root}resume/in/`),
      '--output',
      s3Url(`${root}resume/out/`),
      '--chunk-rows',
      '2',
      '--run-id',
      runId,
    ];
    const first = start(args);
    await until(() => first.stdout().includes(`bulk run ${runId}:`), 'the run id');
    first.child.kill('SIGINT');
    const stopped = await first.result;
    expect(stopped.code, stopped.stderr).toBe(130);
    const resume = /Resume here with:\n\s+(.+)\n/.exec(stopped.stderr)?.[1];
    expect(resume).toContain(`--run-id ${runId}`);

    await stack.startWorker(LATE, '1');
    await stack.waitForWorkers(LATE, 'active');
    // The printed command, as a user would paste it (its words need no shell quoting here).
    const words = (resume as string).split(' ');
    expect(words.slice(0, 2)).toEqual(['warmpool', 'bulk']);
    const resumed = await cli(...words.slice(2));
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout.split('\n')[0]).toMatch(new RegExp(`^bulk run ${runId}: `));
    expect((await idsInParts(`${root}resume/out/`)).sort()).toEqual([...ids].sort());
  });
});

describe('bad flags exit 2 naming the flag', () => {
  const base = () => ['run', '--model', MODEL, '--input', s3Url(`${root}ok/in/`), '--output', s3Url(`${root}bad/out/`)];

  /** bulkMain in this process (the flag handling is the same; a process start per case is slow). */
  async function inProcess(args: string[]): Promise<Result> {
    let stdout = '';
    let stderr = '';
    const io: BulkIo = {
      out: (t) => (stdout += t),
      err: (t) => (stderr += t),
      isTTY: false,
      columns: () => 80,
      now: () => Date.now(),
      onInterrupt: () => () => undefined,
    };
    const code = await bulkMain(args, loadConfig(stack.env), io);
    return { code, stdout, stderr };
  }

  it('an unknown flag, through the real binary', async () => {
    const res = await cli(...base(), '--chunk-size', '3');
    expect(res.code).toBe(2);
    expect(res.stderr).toContain("'--chunk-size'");
    expect(res.stdout).toBe('');
  });

  it.each([
    ['a non-numeric --chunk-rows', ['--chunk-rows', 'abc'], '--chunk-rows must be a whole number'],
    ['--chunk-rows 0 (refused by the shared request rules)', ['--chunk-rows', '0'], '--chunk-rows must be an integer'],
    ['an unknown format', ['--format', 'xml'], '--format must be one of'],
    ['an unknown output format', ['--output-format', 'xlsx'], '--output-format must be one of'],
    ['a deadline that is not a time', ['--deadline', 'soon'], '--deadline "soon" is not a date-time'],
    ['a private webhook', ['--webhook', 'http://10.0.0.1/hook'], '--webhook: webhook.url host 10.0.0.1 is blocked'],
    ['a stray argument', ['extra'], "warmpool bulk run: takes no arguments (got 'extra')"],
  ])('%s', async (_, extra, message) => {
    const res = await inProcess([...base(), ...extra]);
    expect(res.code, res.stderr).toBe(2);
    expect(res.stderr).toContain(message);
    expect(res.stdout).toBe('');
  });

  it('a missing --input, a status without an id, an unknown subcommand', async () => {
    const missing = await inProcess(['run', '--model', MODEL, '--output', s3Url(`${root}bad/out/`)]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--input is required');
    const noId = await inProcess(['status']);
    expect(noId.code).toBe(2);
    expect(noId.stderr).toContain('name one run id');
    const unknown = await inProcess(['start']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown subcommand "start"');
  });

  it('status of an unknown run exits 1', async () => {
    const res = await inProcess(['status', 'no-such-run']);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('no bulk run no-such-run for tenant tenant-a');
  });
});
