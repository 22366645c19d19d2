/**
 * `warmpool bulk run|status|cancel` (DESIGN §7). `run` starts a run (or resumes the one named by
 * `--run-id` while it runs; one that ended is shown as it ended, and the id with other flags is
 * refused naming them), prints its id first so it can always be resumed, and drives it in this
 * process with a progress bar (a TTY) or a line every few seconds (anything else). When another live
 * process holds the run's lease, it watches instead, and takes over if that lease lapses.
 * Ctrl-C stops driving (the run stays resumable; a running `warmpool dispatcher` adopts it once
 * the lease lapses) and prints how to resume.
 *
 * Exit codes: 0 succeeded; 1 failed, canceled or every row bad (with the reason); 2 bad flags;
 * 130 interrupted. `status` exits 1 too for a run that ended so, so a script can test it.
 * Like `warmpool deploy`, it talks to Redis and S3 directly with the environment's config.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { RedisOptions } from 'ioredis';
import { checkWebhookUrl } from '../../api/use-cases/bulk-runs.ts';
import { BULK_PROGRESS_WEBHOOK_INTERVAL_MS, createBulkNotifier } from '../../api/webhooks/bulk-notifier.ts';
import { createDeliveryStore } from '../../api/webhooks/delivery-store.ts';
import { createBulkRuns, createBulkWiring, driveBulkRun } from '../../infra/bulk/index.ts';
import type { BulkRunRequest, BulkRuns, BulkRunView } from '../../infra/contracts/bulk.ts';
import type { Config } from '../../infra/kernel/config.ts';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { type BulkDisplay, type BulkIo, createBulkDisplay, processBulkIo } from './bulk-display.ts';
import { createBulkLog } from './bulk-log.ts';
import { allRowsBad, endedBadly, formatBadRows, formatProgressLine, formatSummary } from './bulk-progress.ts';
import { BULK_CANCEL, BULK_RUN, BULK_STATUS } from './cli-options.ts';
import { parseCommand, UsageError } from './cli-spec.ts';

export type { BulkIo };

const USAGE = "see 'warmpool bulk run --help'";

/** Request fields as the CLI's flags, for messages from the shared request parser. */
const FLAG_OF: Record<string, string> = {
  model: '--model',
  version: '--version',
  input: '--input',
  output: '--output',
  format: '--format',
  outputFormat: '--output-format',
  columns: '--columns',
  idColumn: '--id-column',
  chunkRows: '--chunk-rows',
  deadline: '--deadline',
  'webhook.url': '--webhook',
  webhook: '--webhook',
  maxBadRows: '--max-bad-rows',
  runId: '--run-id',
};

/** How often a watcher looks at a run another process drives (and tries to take it over). */
const WATCH_INTERVAL_MS = 2_000;

interface Session {
  io: BulkIo;
  /** Progress, notes and the run's log lines (bulk-log.ts), each where it belongs on the terminal. */
  display: BulkDisplay;
  tenant: string;
  bulkRuns: BulkRuns;
  wiring: ReturnType<typeof createBulkWiring>;
}

export async function bulkMain(args: string[], config: Config, io: BulkIo = processBulkIo()): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'run' && sub !== 'status' && sub !== 'cancel') {
    io.err(
      `warmpool bulk: ${sub ? `unknown subcommand "${sub}"` : 'name a subcommand'} (run, status, cancel)\nsee 'warmpool bulk --help'\n`,
    );
    return 2;
  }
  try {
    if (sub === 'run') return await runCommand(rest, config, io);
    return await idCommand(sub, rest, config, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`${err.message}\n`);
      return 2;
    }
    const message = usageError(err);
    if (message === undefined) throw err;
    io.err(`warmpool bulk ${sub}: ${message}\n`);
    return 2;
  }
}

/** The message of a mistake in the command line (or the request it makes); undefined for anything else. */
function usageError(err: unknown): string | undefined {
  if (err instanceof InvalidInputError || err instanceof NotFoundError) {
    return err.message.replace(/"([A-Za-z.]+)"/g, (whole, field: string) => FLAG_OF[field] ?? whole);
  }
  return undefined;
}

async function runCommand(args: string[], config: Config, io: BulkIo): Promise<number> {
  const { values } = parseCommand(BULK_RUN, args);
  const request = toRequest(values);
  try {
    checkWebhookUrl(request, config.webhooks.allowedPrivateHosts);
  } catch (err) {
    if (err instanceof InvalidInputError) throw new InvalidInputError(err.code, `--webhook: ${err.message}`, { cause: err });
    throw err;
  }
  // A run is driven for long: its connection waits out a Redis restart (Ctrl-C stops it; it stays resumable).
  return withSession(config, io, values.tenant, {}, async (s) => {
    // Listening before the id is printed: a Ctrl-C from then on stops the drive, not the process.
    const stop = new AbortController();
    const offInterrupt = io.onInterrupt(() => stop.abort());
    try {
      const started = await s.bulkRuns.start(s.tenant, request);
      // First, before anything can go wrong: the id is what resumes the run.
      io.out(`bulk run ${started.id}: ${started.model}@${started.version}, ${started.input} → ${started.output}\n`);
      if (started.status !== 'running') return finish(io, started);
      const run = await drive(s, started, stop.signal);
      return run.status === 'running' ? interrupted(io, run, resumeCommand(args, started.id)) : finish(io, run);
    } finally {
      offInterrupt();
    }
  });
}

/** Flags → the request the API would get; values are checked by the shared parser, named as flags. */
function toRequest(values: Record<string, string | undefined>): BulkRunRequest {
  for (const flag of ['model', 'input', 'output'] as const) {
    if (values[flag] === undefined) throw new InvalidInputError('invalid_argument', `--${flag} is required\n${USAGE}`);
  }
  const request: Record<string, unknown> = { model: values.model, input: values.input, output: values.output };
  const copy: Array<[string, keyof BulkRunRequest]> = [
    ['version', 'version'],
    ['format', 'format'],
    ['output-format', 'outputFormat'],
    ['columns', 'columns'],
    ['id-column', 'idColumn'],
    ['deadline', 'deadline'],
    ['run-id', 'runId'],
  ];
  for (const [flag, field] of copy) if (values[flag] !== undefined) request[field] = values[flag];
  if (values['chunk-rows'] !== undefined) request.chunkRows = toInt('--chunk-rows', values['chunk-rows']);
  if (values['max-bad-rows'] !== undefined) request.maxBadRows = toInt('--max-bad-rows', values['max-bad-rows']);
  if (values.webhook !== undefined) request.webhook = { url: values.webhook };
  return request as unknown as BulkRunRequest; // its shape is the shared parser's to check, in start()
}

function toInt(flag: string, raw: string): number {
  if (!/^\d+$/.test(raw.trim())) throw new InvalidInputError('invalid_argument', `${flag} must be a whole number (got "${raw}")`);
  return Number(raw);
}

/** Drives until the run ends or Ctrl-C; watches (and retries taking over) while another process holds it. */
async function drive(s: Session, started: BulkRunView, signal: AbortSignal): Promise<BulkRunView> {
  const { display } = s;
  const owner = `cli:${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  let run = started;
  let watching = false;
  try {
    display.update(run);
    while (run.status === 'running' && !signal.aborted) {
      const result = await driveBulkRun(
        s.wiring.deps,
        { tenant: s.tenant, id: run.id },
        {
          owner,
          signal,
          onProgress: (view) => display.update(view),
          progressIntervalMs: s.io.isTTY ? 250 : 1_000,
          webhookIntervalMs: BULK_PROGRESS_WEBHOOK_INTERVAL_MS,
        },
      );
      run = result.run;
      if (result.leaseHeldBy === undefined || run.status !== 'running') continue;
      if (!watching) display.note(`${result.leaseHeldBy} is driving run ${run.id}; watching it (Ctrl-C stops watching, not the run)`);
      watching = true;
      await sleep(WATCH_INTERVAL_MS, signal);
      run = (await s.bulkRuns.get(s.tenant, run.id)) ?? run;
      display.update(run);
    }
    if (run.status !== 'running') display.update(run);
    return run;
  } finally {
    display.close();
  }
}

function finish(io: BulkIo, run: BulkRunView): number {
  if (!endedBadly(run)) {
    io.out(`${formatSummary(run)}\n`);
    if (run.badRowSamples.length > 0) io.out(`bad rows (first ${run.badRowSamples.length}):\n${formatBadRows(run).join('\n')}\n`);
    return 0;
  }
  io.err(`${formatSummary(run)}\n`);
  if (run.badRowSamples.length > 0) io.err(`bad rows (first ${run.badRowSamples.length}):\n${formatBadRows(run).join('\n')}\n`);
  io.err(`${ENDED_FOR_GOOD}\n`);
  return 1;
}

/** After a run that failed or was canceled: a run's end is final (infra/bulk bulk-runs.ts), so the way on is a new run. */
const ENDED_FOR_GOOD =
  'The run has ended for good: --run-id resumes only a run that is still running. To score the input again, ' +
  'start a new run (a new --run-id, or none) with an empty --output.';

function interrupted(io: BulkIo, run: BulkRunView, resume: string): number {
  io.err(
    `stopped driving bulk run ${run.id} at ${formatProgressLine(run).replace(/^bulk \S+: /, '')}\n` +
      `It stays resumable (parts written are kept; a running \`warmpool dispatcher\` takes it over). Resume here with:\n  ${resume}\n`,
  );
  return 130;
}

/** The command line that resumes this run: the same flags, with `--run-id`. */
export function resumeCommand(args: readonly string[], runId: string): string {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--run-id') i++;
    else if (!arg.startsWith('--run-id=')) kept.push(arg);
  }
  return ['warmpool', 'bulk', 'run', ...kept, '--run-id', runId].map(shellQuote).join(' ');
}

function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

async function idCommand(sub: 'status' | 'cancel', args: string[], config: Config, io: BulkIo): Promise<number> {
  const { values, positionals } = sub === 'status' ? parseCommand(BULK_STATUS, args) : parseCommand(BULK_CANCEL, args);
  const id = positionals[0];
  if (!id) throw new InvalidInputError('invalid_argument', `name one run id, e.g. warmpool bulk ${sub} nightly-1`);
  const json = 'json' in values && values.json === true;
  // One-shot reads and writes: a Redis gone mid-command fails them in a few retries, not a wait.
  return withSession(config, io, values.tenant, { maxRetriesPerRequest: 2 }, async (s) => {
    const before = await s.bulkRuns.get(s.tenant, id);
    if (!before) {
      io.err(`warmpool bulk ${sub}: no bulk run ${id} for tenant ${s.tenant}\n`);
      return 1;
    }
    if (sub === 'status') return status(io, before, json);
    if (before.status === 'succeeded' || before.status === 'failed') {
      io.err(`warmpool bulk cancel: run ${id} has already ${before.status}\n`);
      return 1;
    }
    const run = (await s.bulkRuns.cancel(s.tenant, id)) ?? before;
    io.out(`${formatSummary(run)}\n`);
    return run.status === 'canceled' ? 0 : 1;
  });
}

function status(io: BulkIo, run: BulkRunView, json: boolean): number {
  const code = endedBadly(run) ? 1 : 0;
  if (json) {
    io.out(`${JSON.stringify(run, null, 2)}\n`);
    return code;
  }
  const lines = [
    `${run.id}: ${allRowsBad(run) ? 'failed (every row was bad)' : run.status}${run.priority === 'urgent' ? ' (urgent)' : ''}`,
    `  ${run.model}@${run.version}, ${run.input} → ${run.output}, ${run.chunkRows} rows per chunk`,
    `  ${run.status === 'running' ? formatProgressLine(run) : formatSummary(run)}`,
  ];
  if (run.deadline !== undefined) lines.push(`  deadline ${new Date(run.deadline).toISOString()}`);
  if (run.badRowSamples.length > 0) lines.push('  bad rows:', ...formatBadRows(run).map((l) => `  ${l}`));
  io.out(`${lines.join('\n')}\n`);
  return code;
}

async function withSession(
  config: Config,
  io: BulkIo,
  tenantFlag: string | undefined,
  redisOptions: RedisOptions,
  body: (s: Session) => Promise<number>,
): Promise<number> {
  const redis = createRedis(config.redisUrl, redisOptions);
  const display = createBulkDisplay(io);
  // What the run's code logs is for the person at the terminal: a line of its own, never JSON inside the bar.
  const log = createBulkLog(config.logLevel === 'info' ? 'warn' : config.logLevel, (line) => display.log(line));
  // A CLI-driven run's webhooks go through the dispatcher's store like any other.
  const notify = createBulkNotifier({ store: createDeliveryStore(redis, config.queuePrefix), clock: { now: () => Date.now() } });
  const wiring = createBulkWiring(config, { redis, log, notify });
  const tenant = tenantFlag ?? config.api.apiKeys[0]?.tenant ?? 'cli';
  try {
    return await body({ io, display, tenant, bulkRuns: createBulkRuns(wiring.deps), wiring });
  } finally {
    display.close();
    wiring.close();
    await closeRedis(redis);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
