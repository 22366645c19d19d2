/**
 * Every `warmpool` command's table (cli-spec.ts): the options its parser takes and its help text,
 * in one place. Commands parse with their table (`parseCommand(BULK_RUN, args)`); cli.ts checks
 * every command line against it before anything starts and prints `--help` from it.
 *
 * Loaded at every CLI start, so this module imports nothing but types and the pure did-you-mean
 * (infra/kernel/closest-name.ts, no imports of its own): a command's own code is loaded only when
 * it runs.
 */
import { closestName } from '../../infra/kernel/closest-name.ts';
import type { CommandSpec, OptionTable } from './cli-spec.ts';

/** The table as written, its option types kept literal so parseArgs types each value. */
function command<const O extends OptionTable>(spec: CommandSpec<O> & Extras): CommandSpec<O> & Extras {
  return spec;
}

/** What cli.ts needs beyond the help: whether the command reads `.warmpool/dev.env` and needs Redis reachable. */
interface Extras {
  /** Read `.warmpool/dev.env` for unset variables (default true; dev, bench and simulate start their own). */
  devEnv?: boolean;
  /**
   * `always`: a one-shot command that cannot do anything without Redis, checked before it starts
   * so it fails in a second with a hint instead of retrying; `dev-env`: a long-running process,
   * checked only when REDIS_URL came from `.warmpool/dev.env` (a stale file is the likely cause).
   */
  redis?: 'always' | 'dev-env';
}

const TENANT = { type: 'string', value: 'T', help: "act as tenant T (default: API_KEYS' first tenant, else 'cli')" } as const;

export const DEV = command({
  path: 'dev',
  summary: 'the whole stack on this machine (= npm start)',
  usage: '[--fresh]',
  maxPositionals: 0,
  devEnv: false,
  options: {
    fresh: { type: 'boolean', help: 'start from empty state: forget the Redis data in .warmpool/redis (deployments, jobs, bulk runs)' },
  },
  notes: [
    'Starts Redis (the system redis-server) and an embedded S3 server unless REDIS_URL / S3_ENDPOINT are set, publishes and ' +
      'deploys a demo model, and runs the API, the webhook dispatcher, the scaler and local workers. The endpoints go to ' +
      '.warmpool/dev.env, which every other `warmpool` command in this folder reads. Ctrl-C drains and stops.',
  ],
  examples: ['warmpool dev', 'PORT=8081 warmpool dev --fresh'],
});

export const API = command({
  path: 'api',
  summary: 'the HTTP API alone (and gRPC where GRPC_PORT is set)',
  usage: '',
  maxPositionals: 0,
  redis: 'dev-env',
  options: {},
  notes: ['Configuration from the environment (PORT, REDIS_URL, S3_*, API_KEYS …; see README). Runs until SIGINT/SIGTERM.'],
});

export const WORKER = command({
  path: 'worker',
  summary: 'one worker for a model version, or a shared pool worker that holds several',
  usage: '--model M [--version V] [--standby] | --pool NAME [--memory-mb MB]',
  maxPositionals: 0,
  redis: 'dev-env',
  options: {
    model: { type: 'string', value: 'M', help: 'the model to serve (required unless --pool)' },
    version: { type: 'string', value: 'V', help: 'the version to serve (default: the latest in the registry)' },
    standby: {
      type: 'boolean',
      help: 'warm up, then wait in standby until the control channel activates it (also WARMPOOL_START_AS=standby)',
    },
    pool: {
      type: 'string',
      value: 'NAME',
      help: "a worker of shared pool NAME: starts with no model and holds the models its pool's holdings name",
    },
    'memory-mb': {
      type: 'string',
      value: 'MB',
      help: "with --pool: what its models' measured resident memory may add up to (default: half the host's memory)",
    },
  },
  notes: [
    'SIGTERM, or `drain` on the control channel, drains the jobs in hand and exits 0.',
    'A pool worker evicts the least recently used models to make room within --memory-mb, never one with jobs in flight.',
  ],
  examples: ['warmpool worker --model demo-scorer --version 1', 'warmpool worker --pool shared --memory-mb 2048'],
});

export const DISPATCHER = command({
  path: 'dispatcher',
  summary: 'the webhook dispatcher, canary guard and bulk supervisor alone',
  usage: '',
  maxPositionals: 0,
  redis: 'dev-env',
  options: {},
  notes: ['Delivers webhooks, guards canary splits and drives bulk runs nobody else drives. Runs until SIGINT/SIGTERM.'],
});

export const SCALER = command({
  path: 'scaler',
  summary: 'the scaler alone',
  usage: '[--shadow]',
  maxPositionals: 0,
  redis: 'dev-env',
  options: {
    shadow: { type: 'boolean', help: 'decide and record the decisions, change nothing (compare a policy against the live one)' },
  },
});

export const MODELS_PUBLISH = command({
  path: 'models publish',
  summary: 'upload an ONNX model to the registry as a new version',
  usage: 'FILE.onnx --name M --version V [options]',
  maxPositionals: 1,
  options: {
    name: { type: 'string', value: 'M', help: 'model name (required)' },
    version: { type: 'string', value: 'V', help: 'version, e.g. 1 or 2024-06-01 (required)' },
    'max-batch': { type: 'string', value: 'N', help: 'largest batch the worker may run (rows)' },
    'warmup-batches': { type: 'string', value: '1,8,32', help: 'batch sizes the worker profiles at warm-up' },
    'warmup-shape': {
      type: 'string',
      multiple: true,
      value: '[INPUT:]3,48,192',
      help: "an input's non-batch dimensions for warm-up, where they are dynamic (once per input)",
    },
    label: { type: 'string', multiple: true, value: 'k=v', help: 'a label stored in the manifest' },
    outputs: {
      type: 'string',
      value: 'NAME,NAME',
      help: 'serve only these outputs (the others are never computed): a model with a non-tensor output is served by its tensor ones',
    },
    'batch-axis': {
      type: 'string',
      value: 'NAME:AXIS,…',
      help: "where a tensor keeps its rows, where the model's dimension names do not say (AXIS an integer ≥ 0, or none: one value a pass), inputs or outputs",
    },
    'no-batching': { type: 'boolean', help: 'serve every tensor whole: one request a forward pass, its shapes exact' },
    overwrite: { type: 'boolean', help: 'replace the version if it exists' },
  },
  notes: [
    'The batch axis of each input and output is read from the model; --batch-axis and --no-batching say it where it cannot be.',
    'Exit codes: 0 published; 1 the registry refused (invalid model, version exists); 2 bad arguments or file.',
  ],
  examples: [
    'warmpool models publish model.onnx --name my-model --version 1 --max-batch 64',
    'warmpool models publish vad.onnx --name vad --version 1 --batch-axis state:1,sr:none',
  ],
});

export const MODELS_LIST = command({
  path: 'models list',
  summary: 'the models in the registry and their versions',
  usage: '',
  maxPositionals: 0,
  options: {},
});

export const MODELS_SHOW = command({
  path: 'models show',
  summary: "a model version's manifest (inputs, outputs, batching, checksum)",
  usage: 'M [--version V]',
  maxPositionals: 1,
  options: { version: { type: 'string', value: 'V', help: 'the version (default: the latest)' } },
  notes: ['Exit codes: 0 shown; 1 no such model or version.'],
});

export const DEPLOY = command({
  path: 'deploy',
  summary: 'deploy a model (or change its deployment): which versions serve, and how many workers',
  usage: 'M [--version V | --split V1=90,V2=10] [--min N] [--max N] [--standby N] [--backlog-max N|off] [--policy FILE] [--pool NAME|none]',
  maxPositionals: 1,
  redis: 'always',
  options: {
    version: { type: 'string', value: 'V', help: 'serve this version (a first deployment: the latest)' },
    split: { type: 'string', value: 'V1=90,V2=10', help: 'split traffic between versions by percent (sums to 100)' },
    min: { type: 'string', value: 'N', help: 'fewest active workers (a first deployment: 1)' },
    max: { type: 'string', value: 'N', help: 'most workers (a first deployment: max(min, 1))' },
    standby: { type: 'string', value: 'N', help: 'warmed workers kept in standby (a first deployment: 0)' },
    'backlog-max': {
      type: 'string',
      value: 'N|off',
      help: 'refuse new jobs beyond N queued (503 backlog_full, with Retry-After); off: no cap',
    },
    policy: { type: 'string', value: 'FILE', help: "the scaler policy's settings for this model, as JSON" },
    pool: {
      type: 'string',
      value: 'NAME|none',
      help: "serve it from this shared pool (`warmpool pool set`); none: back to a pool of the deployment's own (the default)",
    },
  },
  notes: [
    'Flags not given keep their current value. Every version named must be published, and a --pool must exist. ' +
      "In a shared pool the pool's max/min/standby size the workers; the deployment's own are kept for when it leaves. " +
      'Exit codes: 0 deployed; 2 refused.',
  ],
  examples: [
    'warmpool deploy my-model --version 1 --min 1 --max 4',
    'warmpool deploy my-model --split 1=90,2=10',
    'warmpool deploy my-model --version 1 --pool long-tail',
  ],
});

export const ROLLBACK = command({
  path: 'rollback',
  summary: "restore a deployment's previous revision (as a new revision)",
  usage: 'M',
  maxPositionals: 1,
  redis: 'always',
  options: {},
});

export const DEPLOYMENTS = command({
  path: 'deployments',
  summary: 'list deployments: versions, bounds, revision',
  usage: '',
  maxPositionals: 0,
  redis: 'always',
  options: {},
});

const POOL_NAME_NOTE =
  "A pool name is 1–32 lower-case letters, digits and '-', starting with a letter and not ending with '-'; 'none' is reserved.";

export const POOL_SET = command({
  path: 'pool set',
  summary: 'create or change a shared pool: workers not bound to a model, each holding several',
  usage: 'NAME --max N [--min M] [--standby K] [--memory-mb MB]',
  maxPositionals: 1,
  redis: 'always',
  options: {
    max: { type: 'string', value: 'N', help: 'most workers the pool runs (required for a new pool)' },
    min: { type: 'string', value: 'M', help: 'workers kept running even when idle (a new pool: 1, at most max)' },
    standby: { type: 'string', value: 'K', help: 'warmed workers holding no model, ready to become any member (a new pool: 0)' },
    'memory-mb': { type: 'string', value: 'MB', help: 'per worker, the budget for resident models (at least 64; a new pool: 1024)' },
  },
  notes: [
    'Flags not given keep their current value. Deployments join with `warmpool deploy M --pool NAME`.',
    POOL_NAME_NOTE,
    'Exit codes: 0 set; 2 refused.',
  ],
  examples: ['warmpool pool set long-tail --max 3 --standby 1 --memory-mb 2048', 'warmpool pool set long-tail --standby 0'],
});

export const POOL_LIST = command({
  path: 'pool list',
  summary: 'list shared pools: bounds, memory, the deployments that joined',
  usage: '[--json]',
  maxPositionals: 0,
  redis: 'always',
  options: { json: { type: 'boolean', help: 'the pools as JSON (the API resource)' } },
});

export const POOL_SHOW = command({
  path: 'pool show',
  summary: 'a shared pool and the deployments that joined it',
  usage: 'NAME [--json]',
  maxPositionals: 1,
  redis: 'always',
  options: { json: { type: 'boolean', help: 'the pool as JSON (the API resource)' } },
  notes: ['Exit codes: 0 shown; 1 no such pool; 2 a usage error.'],
});

export const POOL_DELETE = command({
  path: 'pool delete',
  summary: 'delete a shared pool that no deployment names',
  usage: 'NAME',
  maxPositionals: 1,
  redis: 'always',
  options: {},
  notes: [
    'Refused while deployments name the pool (it says which): move each out first with `warmpool deploy M --pool none`.',
    'Exit codes: 0 deleted; 1 no such pool; 2 refused.',
  ],
});

export const MIGRATE_KEYS = command({
  path: 'migrate-keys',
  summary: "move a deployment's Redis keys to the Redis Cluster layout (on the old single node, every process stopped)",
  usage: '[--dry-run] [--force]',
  maxPositionals: 0,
  redis: 'always',
  options: {
    'dry-run': { type: 'boolean', help: 'print the plan, change nothing' },
    force: { type: 'boolean', help: 'migrate although warmpool processes look alive' },
  },
  notes: ['Exit codes: 0 done (or nothing to do); 1 conflicts or processes still running; 2 a usage error.'],
});

export const SIMULATE = command({
  path: 'simulate',
  summary: "replay a trace's arrivals through the scaler's policy and three baselines",
  usage: '--trace FILE.csv [options]',
  maxPositionals: 0,
  devEnv: false,
  options: {
    trace: { type: 'string', value: 'FILE.csv', help: 'arrivals: one row per request or per-minute counts (required)' },
    'time-col': { type: 'string', value: 'NAME', help: 'the time column (default: the first)' },
    'count-col': { type: 'string', value: 'NAME', help: 'a column of counts per row (default: one arrival per row)' },
    scale: { type: 'string', value: 'X', help: 'multiply the arrival rate by X (default 1)' },
    policy: { type: 'string', value: 'FILE.json', help: "the predictive policy's settings" },
    'slo-ms': { type: 'string', value: 'N', help: 'the queue-wait SLO (default 30000)' },
    'cold-start-s': { type: 'string', value: 'N', help: "a worker's mean cold start (default 60)" },
    'worker-rps': { type: 'string', value: 'N', help: "one worker's rows/s at full batch (default 100)" },
    'max-batch': { type: 'string', value: 'N', help: "rows per batch (default 32, or the batch profile's)" },
    'tick-s': { type: 'string', value: 'N', help: "the scaler's tick (default 5)" },
    seed: { type: 'string', value: 'N', help: 'random seed (default 1)' },
    arrivals: { type: 'string', value: 'uniform|poisson|gamma', help: 'arrivals within a minute (default poisson)' },
    cv: { type: 'string', value: 'N', help: "gamma arrivals' coefficient of variation" },
    'history-days': { type: 'string', value: 'N', help: 'days of the trace used as forecast history before the replay' },
    days: { type: 'string', value: 'N', help: 'replay only the first N days' },
    'standby-price': { type: 'string', value: 'X', help: "a standby worker-second's price relative to an active one (default 1)" },
    'cold-start-phases': { type: 'string', value: 'launching=S,…', help: 'the cold start by phase, in seconds' },
    'cold-start-cv': { type: 'string', value: 'X', help: "cold starts' coefficient of variation (default 0)" },
    'batch-profile': { type: 'string', value: 'FILE.json', help: 'a measured batch profile (a heartbeat, or `simulate calibrate --out`)' },
    'job-overhead-ms': { type: 'string', value: 'N', help: 'fixed time per job on top of the batch (default 0)' },
    sweep: { type: 'string', words: true, value: 'NAME=V1,V2', help: 'run the predictive policy over a grid of its settings' },
    'slo-target': {
      type: 'string',
      value: 'X',
      help: 'the SLO attainment the baselines are sized to (every run) and a sweep setting must reach (default 0.99)',
    },
    threads: { type: 'string', value: 'N', help: 'worker threads for the sweep and the baselines at the SLO target (default: the cores)' },
    'self-tuning': {
      type: 'boolean',
      help: 'the predictive policy retunes itself (SCALER_RETUNE_INTERVAL_MS) from replays of its recent window through a portfolio of candidates, as the live scaler does with SCALER_SELF_TUNING=true',
    },
    'walk-forward': { type: 'boolean', help: 'tune (the sweep) on the first part of the replay, report only on the rest' },
    'train-fraction': { type: 'string', value: 'X', help: 'the share of the replay tuned on / used as history (default 0.5)' },
    matrix: { type: 'boolean', help: 'every trace through the grid of worlds (cold start × SLO × jobs), default policy, walk-forward' },
    traces: { type: 'string', value: 'DIR', help: 'with --matrix: every .csv in DIR (or one file)' },
    bank: {
      type: 'string',
      value: 'N',
      help: 'N random worlds (seven families of arrival processes × cold starts, SLOs, jobs; --seed picks them), default policy, walk-forward',
    },
    quick: { type: 'boolean', help: 'with --matrix: cut each trace to its first day; with --bank: one-day worlds' },
    'cell-budget-s': {
      type: 'string',
      value: 'N',
      help: 'with --matrix or --bank: CPU seconds per replay or baseline search (default 600)',
    },
    out: { type: 'string', value: 'DIR', help: 'where the report goes (default ./simulation, ./simulation-matrix with --matrix)' },
    'shared-pool': {
      type: 'boolean',
      help: 'many models on one shared pool: shared (the planner), per-model, keep-alive and oracle, each at the SLO target',
    },
    'model-col': { type: 'string', value: 'NAME', help: "with --shared-pool: the column naming each row's model" },
    'split-models': {
      type: 'string',
      value: 'N',
      help: "with --shared-pool: split a single-model trace's arrivals among N models by Zipf (--seed)",
    },
    'generate-models': {
      type: 'string',
      value: 'N',
      help: 'with --shared-pool: a generated world of N models (Zipf, diurnal phases, bursts; --seed, --rate)',
    },
    rate: { type: 'string', value: 'R', help: "with --generate-models: the pool's mean requests/s over all models (default 20)" },
    'model-load-s': {
      type: 'string',
      value: 'S',
      help: "with --shared-pool: a model's load onto a warm worker (default 3; generated models ×0.5–2)",
    },
    'models-per-worker': {
      type: 'string',
      value: 'K',
      help: 'with --shared-pool: at most K models resident per worker (default: memory alone)',
    },
    'memory-mb': { type: 'string', value: 'MB', help: "with --shared-pool: a worker's memory budget for models (default 8192)" },
    'model-memory-mb': {
      type: 'string',
      value: 'MB',
      help: "with --shared-pool: a loaded model's resident memory (default 256; generated models ×0.5–2)",
    },
  },
  notes: [
    'Writes report.json, report.md and charts to --out; with --sweep, sweep.json, sweep.md and pareto.svg.',
    "With --walk-forward the report covers only the part after --train-fraction; with --matrix, matrix.md and matrix.json; with --bank, bank.md and bank.json (--days sets the worlds' length, default 4).",
    '`warmpool simulate calibrate --help`: the simulator against a real worker.',
  ],
  examples: [
    'warmpool simulate --trace ../shared/traces/nasa_http_1995_per_minute.csv --count-col requests',
    'warmpool simulate --trace t.csv --sweep standby=0,1,2 headroom=0.1,0.3',
    'warmpool simulate --trace t.csv --walk-forward --sweep standby=0,1,2',
    'warmpool simulate --matrix --traces ../shared/traces --quick',
    'warmpool simulate --bank 200 --seed 7',
    'warmpool simulate --shared-pool --generate-models 100 --rate 20 --seed 1',
    'warmpool simulate --shared-pool --trace ../shared/traces/nasa_http_1995_per_minute.csv --count-col requests --split-models 50',
    'warmpool simulate --shared-pool --trace per-model.csv --time-col ts --model-col model',
  ],
});

export const SIMULATE_CALIBRATE = command({
  path: 'simulate calibrate',
  summary: "the simulator's prediction against a real worker, on a real stack",
  usage: '[options]',
  maxPositionals: 0,
  devEnv: false,
  options: {
    trace: { type: 'string', value: 'FILE.csv', help: 'the trace to replay a stretch of (default: the Azure LLM trace)' },
    'from-minute': { type: 'string', value: 'N', help: 'where the stretch starts (default 10)' },
    minutes: { type: 'string', value: 'N', help: 'how long it is (default 2)' },
    load: { type: 'string', value: 'X', help: "the mean arrival rate as a share of the pool's capacity (default 0.6)" },
    workers: { type: 'string', value: 'N', help: 'real workers (default 1)' },
    'rows-per-job': { type: 'string', value: 'N', help: 'rows per job (default 32)' },
    'drain-jobs': { type: 'string', value: 'N', help: 'jobs per capacity burst (default 1500)' },
    seed: { type: 'string', value: 'N', help: 'random seed (default 1)' },
    out: { type: 'string', value: 'DIR', help: 'write calibration.json and batch-profile.json here' },
  },
  notes: ['Starts its own Redis and S3 unless REDIS_URL / S3_ENDPOINT are set.'],
});

export const BULK_RUN = command({
  path: 'bulk run',
  summary: 'score every row under an S3 prefix into parts; resumable by --run-id',
  usage: '--model M --input s3://bucket/in/ --output s3://bucket/out/ [options]',
  maxPositionals: 0,
  redis: 'always',
  options: {
    model: { type: 'string', value: 'M', help: 'the model (required)' },
    version: { type: 'string', value: 'V', help: 'the version (default: the one deployed)' },
    input: { type: 'string', value: 's3://bucket/in/', help: 'where the rows are: .jsonl, .csv or .parquet objects (required)' },
    output: { type: 'string', value: 's3://bucket/out/', help: 'where the parts and _manifest.json go (required)' },
    format: { type: 'string', value: 'jsonl|csv|parquet', help: "the input's format (default: from each object's extension)" },
    'output-format': { type: 'string', value: 'jsonl|csv|parquet', help: "the parts' format (default: the input's)" },
    columns: {
      type: 'string',
      value: 'COLS',
      help: "input columns: 'a,b,c' (the single input's features, in order) or 'x=a,b;y=seq' per input (default: by input name)",
    },
    'id-column': { type: 'string', value: 'NAME', help: "the rows' id column (default id)" },
    'chunk-rows': {
      type: 'string',
      value: 'N',
      help: 'rows per chunk, i.e. per job and per part (default 10000; smaller when the run would have fewer than 16 chunks)',
    },
    deadline: { type: 'string', value: 'HH:MM|ISO', help: 'finish by then: a late run is raised to urgent' },
    webhook: { type: 'string', value: 'URL', help: 'POST bulk.progress / bulk.succeeded / bulk.failed events here' },
    'run-id': { type: 'string', value: 'ID', help: 'name the run; the same id resumes it' },
    'max-bad-rows': { type: 'string', value: 'N', help: 'fail the run past N bad rows (default: 1 % of the rows, at least 100)' },
    tenant: TENANT,
  },
  notes: [
    'Prints the run id first, then progress; Ctrl-C stops driving (the run stays resumable) and prints the command that resumes it.',
    'Exit codes: 0 succeeded; 1 failed, canceled or every row bad; 2 bad flags; 130 interrupted.',
    'Put input files into the embedded S3 with `warmpool s3 cp`.',
  ],
  examples: [
    'warmpool s3 cp rows.jsonl s3://warmpool/bulk/dev/in/',
    'warmpool bulk run --model demo-scorer --input s3://warmpool/bulk/dev/in/ --output s3://warmpool/bulk/dev/out/',
  ],
});

export const BULK_STATUS = command({
  path: 'bulk status',
  summary: "a bulk run's progress, or how it ended",
  usage: 'ID [--tenant T] [--json]',
  maxPositionals: 1,
  redis: 'always',
  options: { tenant: TENANT, json: { type: 'boolean', help: 'the run as JSON (the API resource)' } },
  notes: ['Exit codes: 0 running or succeeded; 1 failed, canceled, every row bad, or no such run.'],
});

export const BULK_CANCEL = command({
  path: 'bulk cancel',
  summary: 'cancel a bulk run (parts written so far are kept)',
  usage: 'ID [--tenant T]',
  maxPositionals: 1,
  redis: 'always',
  options: { tenant: TENANT },
});

export const BENCH = command({
  path: 'bench',
  summary: 'warmpool against raw ONNX Runtime and a minimal hono + BullMQ stack, measured side by side',
  usage: '[--quick] [--json FILE] [--model FILE.onnx [--input-shape 3,48,192]] [--no-cluster]',
  maxPositionals: 0,
  devEnv: false,
  options: {
    quick: { type: 'boolean', help: 'shorter runs (a smoke test, not a measurement)' },
    json: { type: 'string', value: 'FILE', help: 'also write the report as JSON' },
    model: { type: 'string', value: 'FILE.onnx', help: 'bench this model instead of the built-in ones' },
    'input-shape': { type: 'string', value: '3,48,192', help: "--model's dynamic non-batch dimensions" },
    api: { type: 'string', value: 'child|in-process', help: 'run the API as a child process (default) or in this one' },
    'no-cluster': { type: 'boolean', help: 'skip the Redis Cluster row' },
  },
  notes: ['Starts its own Redis and S3 unless REDIS_URL / S3_ENDPOINT are set. What the rows mean: docs/BENCHMARKS.md.'],
});

export const S3_LS = command({
  path: 's3 ls',
  summary: 'list objects under an s3:// prefix (the embedded store of `warmpool dev`, or any S3)',
  usage: 's3://bucket/[prefix/] [--recursive]',
  maxPositionals: 1,
  options: {
    recursive: { type: 'boolean', short: 'r', help: 'every object under the prefix, not just this level' },
  },
  notes: ['Uses S3_ENDPOINT, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and AWS_REGION, from the environment or .warmpool/dev.env.'],
  examples: ['warmpool s3 ls s3://warmpool/bulk/dev/', 'warmpool s3 ls -r s3://warmpool/bulk/dev/out/'],
});

export const S3_CP = command({
  path: 's3 cp',
  summary: 'copy files into S3 (upload) or out of it (download)',
  usage: 'FILE… s3://bucket/prefix/ | s3://bucket/key FILE|DIR|- [--recursive]',
  maxPositionals: Number.POSITIVE_INFINITY,
  options: {
    recursive: { type: 'boolean', short: 'r', help: "a directory's files (upload), or every object under a prefix (download)" },
  },
  notes: [
    'Upload: each FILE goes to prefix/ + its name; a destination without a trailing / is the key itself (one file only). ' +
      "With --recursive a directory's files keep their paths below it. Download: to FILE, into DIR, or to stdout with -.",
    'Uses S3_ENDPOINT, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and AWS_REGION, from the environment or .warmpool/dev.env.',
  ],
  examples: [
    'warmpool s3 cp rows.jsonl more.csv s3://warmpool/bulk/dev/in/',
    'warmpool s3 cp --recursive ./inputs s3://warmpool/bulk/dev/in/',
    'warmpool s3 cp s3://warmpool/bulk/dev/out/part-000000.jsonl .',
    'warmpool s3 cp -r s3://warmpool/bulk/dev/out/ ./results',
  ],
});

const EDGE_OPTIONS = {
  out: { type: 'string', value: 'DIR', help: 'where worker.js and workerd.capnp go (default .warmpool/edge)' },
  region: {
    type: 'string',
    value: 'URL',
    help: 'the regional API the gateway forwards to (default http://127.0.0.1:$PORT, PORT default 8080)',
  },
  port: { type: 'string', value: 'N', help: 'the port workerd listens on, on 127.0.0.1 (default 8787)' },
} as const satisfies OptionTable;

export const EDGE_BUILD = command({
  path: 'edge build',
  summary: 'bundle the edge gateway (api/edge/) for Cloudflare Workers, with a workerd config to run it locally',
  usage: '[--out DIR] [--region URL] [--port N]',
  maxPositionals: 0,
  options: EDGE_OPTIONS,
  notes: [
    'Writes DIR/worker.js (one ES module, nothing from node:) and DIR/workerd.capnp. Deploy to Cloudflare with deploy/edge/wrangler.toml (docs/EDGE.md).',
  ],
  examples: ['warmpool edge build', 'warmpool edge build --out dist/edge --region https://api.eu-west-1.example.com'],
});

export const EDGE_SERVE = command({
  path: 'edge serve',
  summary: 'build the edge gateway and run it under the workerd from npm, in front of a regional API',
  usage: '[--out DIR] [--region URL] [--port N]',
  maxPositionals: 0,
  options: EDGE_OPTIONS,
  notes: ['API_KEYS (from the environment or .warmpool/dev.env) is passed to workerd as a secret binding; it is never written down.'],
  examples: ['warmpool edge serve', 'warmpool edge serve --region http://127.0.0.1:8080 --port 8787'],
});

/** A command with subcommands: `warmpool models` lists them. */
export interface CommandGroup {
  path: string;
  summary: string;
  subcommands: readonly CommandSpec[];
}

export const GROUPS: readonly CommandGroup[] = [
  { path: 'models', summary: 'the model registry', subcommands: [MODELS_PUBLISH, MODELS_LIST, MODELS_SHOW] },
  {
    path: 'pool',
    summary: 'shared pools: workers not bound to a model, that many deployments join',
    subcommands: [POOL_SET, POOL_LIST, POOL_SHOW, POOL_DELETE],
  },
  {
    path: 'bulk',
    summary: 'bulk runs: every row under an S3 prefix, scored into parts',
    subcommands: [BULK_RUN, BULK_STATUS, BULK_CANCEL],
  },
  { path: 'edge', summary: 'the edge gateway on Cloudflare Workers (api/edge/)', subcommands: [EDGE_BUILD, EDGE_SERVE] },
  { path: 's3', summary: 'files in and out of S3 (the embedded store of `warmpool dev`, or any S3)', subcommands: [S3_LS, S3_CP] },
];

/** Every command, in the order the overview lists them. */
export const COMMANDS: readonly (CommandSpec & Extras)[] = [
  DEV,
  API,
  WORKER,
  DISPATCHER,
  SCALER,
  MODELS_PUBLISH,
  MODELS_LIST,
  MODELS_SHOW,
  DEPLOY,
  ROLLBACK,
  DEPLOYMENTS,
  POOL_SET,
  POOL_LIST,
  POOL_SHOW,
  POOL_DELETE,
  MIGRATE_KEYS,
  SIMULATE,
  SIMULATE_CALIBRATE,
  BULK_RUN,
  BULK_STATUS,
  BULK_CANCEL,
  S3_LS,
  S3_CP,
  EDGE_BUILD,
  EDGE_SERVE,
  BENCH,
];

export type Resolved =
  | { kind: 'command'; spec: CommandSpec & Extras; args: string[] }
  | { kind: 'group'; group: CommandGroup; args: string[] }
  | { kind: 'unknown'; message: string };

/**
 * The command the words name and the arguments after them: the longest path that matches
 * (`simulate calibrate` before `simulate`); a group's name alone, or with `--help`, is the group.
 */
export function resolveCommand(argv: readonly string[]): Resolved {
  const [first, second] = argv;
  const two = COMMANDS.find((c) => c.path === `${first} ${second}`);
  if (two) return { kind: 'command', spec: two, args: argv.slice(2) };
  const one = COMMANDS.find((c) => c.path === first);
  if (one) return { kind: 'command', spec: one, args: argv.slice(1) };
  const group = GROUPS.find((g) => g.path === first);
  if (!group) {
    const near = closestName(first ?? '', [...new Set(COMMANDS.map((c) => c.path.split(' ')[0] as string))]);
    return { kind: 'unknown', message: `unknown command "${first}"${near === undefined ? '' : `; did you mean "${near}"?`}` };
  }
  if (second === undefined || second.startsWith('-')) return { kind: 'group', group, args: argv.slice(1) };
  const names = group.subcommands.map((s) => s.path.split(' ')[1] as string);
  const near = closestName(second, names);
  return {
    kind: 'unknown',
    message: `unknown ${group.path} subcommand "${second}" (${names.join(', ')})${near === undefined ? '' : `; did you mean "${near}"?`}`,
  };
}
