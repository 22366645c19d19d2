/**
 * The `warmpool` CLI dispatcher (DESIGN §2). In order, for every command line:
 *
 * 1. `--help`, `-h` or `warmpool help <command>`: the command's help, printed from the same table
 *    its parser uses (scripts/commands/cli-options.ts), exit 0. Nothing is loaded or started.
 * 2. The arguments are checked against that table: an unknown flag is one line naming the
 *    command's help, exit 2, before anything starts.
 * 3. `.warmpool/dev.env` from the working directory fills variables that are unset (not for dev,
 *    bench and simulate, which start or need their own), so a second terminal beside
 *    `warmpool dev` just works; config is validated once.
 * 4. A command that needs Redis checks it answers first (redis-check.ts), so a stopped stack is
 *    a one-line error in a second, not a retry loop.
 * 5. Failures print as one line with a hint (scripts/commands/cli-errors.ts); a stack trace only
 *    with --debug or WARMPOOL_DEBUG=1.
 *
 * The process's entry is `cliMain`: every command's stdout and stderr end it quietly when their
 * reader goes away (`warmpool s3 ls … | head`, scripts/commands/closed-output.ts).
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { inspect } from 'node:util';
import { type Config, loadConfig } from '../infra/kernel/config.ts';
import { describeFailure, type FailureContext, type SettingSource, unexpectedFailure } from './commands/cli-errors.ts';
import { COMMANDS, resolveCommand } from './commands/cli-options.ts';
import {
  type CommandSpec,
  formatGroupHelp,
  formatHelp,
  formatOverview,
  parseArgsMessage,
  parseCommand,
  usageError,
  wantsHelp,
} from './commands/cli-spec.ts';
import { endQuietlyWhenClosed } from './commands/closed-output.ts';

export const DEV_ENV_FILE = path.join('.warmpool', 'dev.env');

type Runner = (args: string[], config: () => Config) => Promise<number>;

/** Each command's code, loaded only when it runs. */
const RUNNERS: Record<string, Runner> = {
  dev: async (args) => (await import('./dev/main.ts')).devMain(args),
  api: async (_, config) => (await import('../api/main.ts')).apiMain(config()),
  worker: async (args, config) => (await import('../worker/main.ts')).workerMain(args, config()),
  dispatcher: async (_, config) => (await import('../api/dispatcher/main.ts')).dispatcherMain(config()),
  scaler: async (args, config) => {
    const c = config();
    const { scalerMain } = await import('../infra/scaler/main.ts');
    // The tuner is the simulator's portfolio on a worker thread: loaded only when it is used.
    const createTuner = c.scaler.selfTuning ? (await import('../infra/simulator/index.ts')).createTuner : undefined;
    return scalerMain(args, c, createTuner ? { createTuner } : {});
  },
  'models publish': async (args, config) => (await import('./commands/models-cli.ts')).modelsMain(['publish', ...args], config()),
  'models list': async (args, config) => (await import('./commands/models-cli.ts')).modelsMain(['list', ...args], config()),
  'models show': async (args, config) => (await import('./commands/models-cli.ts')).modelsMain(['show', ...args], config()),
  deploy: async (args, config) => (await import('./commands/deploy.ts')).deployMain('deploy', args, config()),
  deployments: async (args, config) => (await import('./commands/deploy.ts')).deployMain('deployments', args, config()),
  rollback: async (args, config) => (await import('./commands/deploy.ts')).rollbackMain(args, config()),
  'pool set': async (args, config) => (await import('./commands/pool.ts')).poolMain('set', args, config()),
  'pool list': async (args, config) => (await import('./commands/pool.ts')).poolMain('list', args, config()),
  'pool show': async (args, config) => (await import('./commands/pool.ts')).poolMain('show', args, config()),
  'pool delete': async (args, config) => (await import('./commands/pool.ts')).poolMain('delete', args, config()),
  'migrate-keys': async (args, config) => (await import('./commands/migrate-keys.ts')).migrateKeysMain(args, config()),
  simulate: async (args) => (await import('./commands/simulate.ts')).simulateMain(args),
  'simulate calibrate': async (args) => (await import('./commands/simulate.ts')).simulateMain(['calibrate', ...args]),
  'bulk run': async (args, config) => (await import('./commands/bulk.ts')).bulkMain(['run', ...args], config()),
  'bulk status': async (args, config) => (await import('./commands/bulk.ts')).bulkMain(['status', ...args], config()),
  'bulk cancel': async (args, config) => (await import('./commands/bulk.ts')).bulkMain(['cancel', ...args], config()),
  's3 ls': async (args, config) => (await import('./commands/s3.ts')).s3Main('ls', args, config()),
  's3 cp': async (args, config) => (await import('./commands/s3.ts')).s3Main('cp', args, config()),
  'edge build': async (args) => (await import('./commands/edge.ts')).edgeMain('build', args, process.env),
  'edge serve': async (args) => (await import('./commands/edge.ts')).edgeMain('serve', args, process.env),
  bench: async (args) => (await import('./bench.ts')).benchMain(args),
};

const out = (text: string) => process.stdout.write(text);
const err = (text: string) => process.stderr.write(text);

/** The process's entry (bin/warmpool.mjs): main() with the process's own streams guarded, once. */
export function cliMain(argv: string[]): Promise<number> {
  const io = { err, exit: (code: number) => process.exit(code) };
  endQuietlyWhenClosed(process.stdout, 'stdout', io);
  endQuietlyWhenClosed(process.stderr, 'stderr', io);
  return main(argv);
}

export async function main(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { args, debug } = takeDebug(argv, env);
  const [first] = args;
  if (first === undefined) {
    err(formatOverview(COMMANDS));
    return 2;
  }
  if (first === '--help' || first === '-h') {
    out(formatOverview(COMMANDS));
    return 0;
  }
  if (first === 'help') return help(args.slice(1));
  const resolved = resolveCommand(args);
  if (resolved.kind === 'unknown') {
    err(`warmpool: ${resolved.message}\nsee 'warmpool --help'\n`);
    return 2;
  }
  if (resolved.kind === 'group') {
    if (wantsHelp(resolved.args)) {
      out(formatGroupHelp(resolved.group));
      return 0;
    }
    err(`warmpool ${resolved.group.path}: name a subcommand\n\n${formatGroupHelp(resolved.group)}`);
    return 2;
  }
  const { spec } = resolved;
  if (wantsHelp(resolved.args)) {
    out(formatHelp(spec));
    return 0;
  }
  return run(spec, resolved.args, env, debug);
}

async function run(spec: (typeof COMMANDS)[number], args: string[], env: NodeJS.ProcessEnv, debug: boolean): Promise<number> {
  const devEnv = spec.devEnv === false ? undefined : loadDevEnv(env);
  try {
    parseCommand(spec, args);
    if (spec.redis === 'always' || (spec.redis === 'dev-env' && devEnv?.taken.has('REDIS_URL'))) {
      await (await import('./commands/redis-check.ts')).checkRedisReachable(loadConfig(env).redisUrl);
    }
    const runner = RUNNERS[spec.path];
    if (!runner) throw new Error(`no runner for "${spec.path}"`);
    return await runner(args, () => loadConfig(env));
  } catch (thrown) {
    return report(asUsage(spec, thrown), failureContext(spec, env, devEnv), debug);
  }
}

/** `warmpool help [command …]`. */
function help(words: string[]): number {
  if (words.length === 0) {
    out(formatOverview(COMMANDS));
    return 0;
  }
  const resolved = resolveCommand(words);
  if (resolved.kind === 'unknown') {
    err(`warmpool help: ${resolved.message}\nsee 'warmpool --help'\n`);
    return 2;
  }
  out(resolved.kind === 'group' ? formatGroupHelp(resolved.group) : formatHelp(resolved.spec));
  return 0;
}

/** `--debug` anywhere before a `--` (taken out: commands never see it), or WARMPOOL_DEBUG=1. */
function takeDebug(argv: string[], env: NodeJS.ProcessEnv): { args: string[]; debug: boolean } {
  const end = argv.indexOf('--');
  const head = end < 0 ? argv : argv.slice(0, end);
  const args = [...head.filter((a) => a !== '--debug'), ...(end < 0 ? [] : argv.slice(end))];
  const fromEnv = env.WARMPOOL_DEBUG !== undefined && !['', '0', 'false'].includes(env.WARMPOOL_DEBUG);
  return { args, debug: fromEnv || args.length !== argv.length };
}

/** A parse error thrown by a command's own parser (outside this table's check) reads like ours. */
function asUsage(spec: CommandSpec, thrown: unknown): unknown {
  const code = thrown instanceof Error && 'code' in thrown ? String(thrown.code) : '';
  if (!code.startsWith('ERR_PARSE_ARGS')) return thrown;
  return usageError(spec, parseArgsMessage(spec, thrown));
}

function report(thrown: unknown, ctx: FailureContext, debug: boolean): number {
  const failure = describeFailure(thrown, ctx) ?? unexpectedFailure(thrown, ctx.command, debug);
  err(`${failure.lines.join('\n')}\n`);
  if (debug) err(`${inspect(thrown, { depth: 6 })}\n`);
  return failure.exitCode;
}

/** Where the endpoints came from, for the messages: the environment, dev.env, or the defaults. */
function failureContext(spec: CommandSpec, env: NodeJS.ProcessEnv, devEnv: DevEnv | undefined): FailureContext {
  const source = (name: string): SettingSource => (devEnv?.taken.has(name) ? 'dev-env' : env[name] ? 'env' : 'default');
  let config: Config | undefined;
  try {
    config = loadConfig(env);
  } catch {
    // A configuration error is itself the failure being reported; the raw variables will do.
  }
  const endpoint = config?.s3.endpoint ?? env.S3_ENDPOINT;
  return {
    command: spec.path,
    redis: { url: config?.redisUrl ?? env.REDIS_URL ?? 'redis://127.0.0.1:6379', source: source('REDIS_URL') },
    s3: {
      ...(endpoint ? { endpoint } : {}),
      bucket: config?.s3.bucket ?? env.S3_BUCKET ?? 'warmpool',
      source: source('S3_ENDPOINT'),
      credentialsSource: source('AWS_ACCESS_KEY_ID'),
    },
    devEnvFile: DEV_ENV_FILE,
    ...(devEnv ? { devEnvWrittenAt: devEnv.writtenAt } : {}),
    now: Date.now(),
  };
}

interface DevEnv {
  /** The variables taken from the file (the ones that were unset). */
  taken: Set<string>;
  writtenAt: number;
}

function loadDevEnv(env: NodeJS.ProcessEnv): DevEnv | undefined {
  if (!existsSync(DEV_ENV_FILE)) return undefined;
  return { taken: loadEnvFile(DEV_ENV_FILE, env), writtenAt: statSync(DEV_ENV_FILE).mtimeMs };
}

/** KEY=VALUE lines; only variables not already set are taken. Returns the names taken. */
export function loadEnvFile(file: string, env: NodeJS.ProcessEnv): Set<string> {
  const taken = new Set<string>();
  if (!existsSync(file)) return taken;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^\s*([A-Z_][A-Z0-9_]*)\s*=\s*(.*)\s*$/.exec(line);
    if (!m || m[1] === undefined || env[m[1]] !== undefined) continue;
    env[m[1]] = (m[2] ?? '').replace(/^'(.*)'$/, '$1');
    taken.add(m[1]);
  }
  return taken;
}
