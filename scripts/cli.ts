/**
 * The `warmpool` CLI dispatcher (DESIGN §2). Every subcommand but `dev` first loads
 * `.warmpool/dev.env` from the working directory for variables that are unset, so a second
 * terminal beside `warmpool dev` just works; then config is validated once.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { type Config, loadConfig } from '../infra/kernel/config.ts';
import { ConfigError } from '../infra/kernel/errors.ts';

const USAGE = `warmpool — autoscaling ONNX inference workers behind a queue

Usage:
  warmpool dev                              the whole stack on this machine (= npm start)
  warmpool api                              the HTTP API alone
  warmpool worker --model M [--version V]   one worker for a model version
  warmpool dispatcher                       the webhook dispatcher (and canary guard) alone
  warmpool scaler [--shadow]                the scaler alone (--shadow: decide and record, change nothing)
  warmpool models publish FILE.onnx --name M --version V [--max-batch N] [--warmup-batches 1,8,32]
                    [--warmup-shape [INPUT:]3,48,192 …]   (an input's size for warm-up, where it is dynamic)
  warmpool models list | models show M [--version V]
  warmpool deploy M [--version V | --split V1=90,V2=10] [--min N] [--max N] [--standby N]
                    [--backlog-max N|off] [--policy FILE]   (flags not given keep their value)
  warmpool rollback M                       restore the deployment's previous revision
  warmpool deployments                      list deployments
  warmpool migrate-keys [--dry-run] [--force]
                                            move a deployment's Redis keys to the Redis Cluster layout
                                            (on the old single node, every process stopped)
  warmpool simulate --trace FILE.csv [--scale X] [--policy FILE.json] [--slo-ms N] [--cold-start-s N]
                    [--worker-rps N] [--batch-profile FILE] [--job-overhead-ms N] [--out DIR]
                    [--sweep NAME=V1,V2 …]   replay arrivals through the scaler's policy and baselines
  warmpool simulate calibrate [--trace FILE.csv]   the simulator's prediction vs a real worker
  warmpool bulk run --model M [--version V] --input s3://bucket/in/ --output s3://bucket/out/
                    [--format jsonl|csv] [--chunk-rows N] [--deadline HH:MM|ISO] [--webhook URL]
                    [--run-id ID] [--max-bad-rows N] [--tenant T]
                                            score every row under a prefix into parts; resumable by --run-id
  warmpool bulk status ID | bulk cancel ID  a bulk run's progress, or cancel it
  warmpool bench [--quick] [--json FILE] [--model FILE.onnx [--input-shape 3,48,192]] [--no-cluster]
                                            warmpool vs raw ONNX Runtime and a minimal hono + BullMQ
                                            stack, measured side by side (docs/BENCHMARKS.md)

Configuration comes from environment variables (see README), validated at start.`;

export const DEV_ENV_FILE = path.join('.warmpool', 'dev.env');

export async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv;
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(`${USAGE}\n`);
    return command ? 0 : 2;
  }
  if (command !== 'dev') loadEnvFile(DEV_ENV_FILE, process.env);
  try {
    switch (command) {
      case 'dev':
        return await (await import('./dev/main.ts')).devMain(args);
      case 'api':
        return await (await import('../api/main.ts')).apiMain(config());
      case 'scaler':
        return await (await import('../infra/scaler/main.ts')).scalerMain(args, config());
      case 'dispatcher':
        return await (await import('../api/webhooks/main.ts')).dispatcherMain(config());
      case 'worker':
        return await (await import('../worker/main.ts')).workerMain(args, config());
      case 'models':
        return await (await import('./commands/models-cli.ts')).modelsMain(args, config());
      case 'deploy':
      case 'deployments':
        return await (await import('./commands/deploy.ts')).deployMain(command, args, config());
      case 'migrate-keys':
        return await (await import('./commands/migrate-keys.ts')).migrateKeysMain(args, config());
      case 'rollback':
        return await (await import('./commands/deploy.ts')).rollbackMain(args, config());
      case 'bulk':
        return await (await import('./commands/bulk.ts')).bulkMain(args, config());
      case 'simulate':
        return await (await import('./commands/simulate.ts')).simulateMain(args);
      case 'bench':
        return await (await import('./bench.ts')).benchMain(args);
      default:
        process.stderr.write(`warmpool: unknown command "${command}"\n\n${USAGE}\n`);
        return 2;
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`warmpool: configuration error: ${err.message}\n`);
      return 2;
    }
    if (err instanceof Error && err.name === 'TypeError' && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`warmpool ${command}: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
}

function config(): Config {
  return loadConfig(process.env);
}

/** KEY=VALUE lines; only variables not already set are taken. */
export function loadEnvFile(file: string, env: NodeJS.ProcessEnv): void {
  if (!existsSync(file)) return;
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^\s*([A-Z_][A-Z0-9_]*)\s*=\s*(.*)\s*$/.exec(line);
    if (!m || m[1] === undefined || env[m[1]] !== undefined) continue;
    env[m[1]] = (m[2] ?? '').replace(/^'(.*)'$/, '$1');
  }
}
