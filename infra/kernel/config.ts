/**
 * Configuration: defaults, then the environment, then validation, once, at start. A bad value
 * fails fast with the variable's name. Units are in the names. Secrets never serialise: API keys
 * are kept out of `JSON.stringify(config)` and of logs.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { type BulkLocationGrant, parseBulkLocations } from './bulk-locations.ts';
import { ConfigError } from './errors.ts';
import { isClusterUrl } from './redis-url.ts';
import { registryModelsArea } from './s3-location.ts';
import { TENANT_PATTERN } from './tenant.ts';

const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => v === 'true' || v === '1' || v === 'yes');
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

/**
 * The scaler's defaults, the one copy (README's config table documents them): the schema below
 * falls back to them, and the controller, the simulator and the dashboard's simulator are given
 * settings by their composition roots instead of holding their own.
 */
export const SCALER_DEFAULTS: Readonly<Config['scaler']> = {
  provider: 'local',
  k8sNamespace: 'default',
  tickMs: 2_000,
  sloQueueWaitMs: 2_000,
  coldStartDefaultMs: 60_000,
  // The forecaster's shortest level half-life (2 minutes, forecast.ts): a surplus must outlast
  // the noise that made it before workers go, or a short cold start's lifetime (below) drains and
  // relaunches for the same swing. Longer holds cost more than they save (docs/SIMULATOR.md).
  scaleDownStabilizationMs: 120_000,
  // The SLO sizes the pool (infra/scaler/policy.ts); 1 adds no utilisation cap on top of it.
  targetUtilization: 1,
  // A launched worker is kept at least one cold start after it was last wanted: holding an idle
  // worker for as long as a relaunch takes costs what relaunching it does, so this ski-rental
  // rule is within 2× of the best hold in hindsight. Two cold starts (the earlier default) held
  // every noise-driven launch for twice that and cost 5–10 % more on the shared traces for fewer
  // cold starts than the SLO needed (docs/SIMULATOR.md, walk-forward).
  minLifetimeColdStarts: 1,
};

/**
 * `warmpool simulate`'s scaler where its flags say nothing: an offline study, not the live
 * scaler. The CLI has always replayed a 5 s tick against a 30 s SLO (docs/SIMULATOR.md and the
 * figures in docs/simulator/ were made so); everything else is SCALER_DEFAULTS. The dashboard's
 * simulator replays the live settings (`Config['scaler']`) instead.
 */
export const SIMULATE_DEFAULTS: Readonly<ScalerTuning> = { ...SCALER_DEFAULTS, tickMs: 5_000, sloQueueWaitMs: 30_000 };

/**
 * What one API process gives one request that holds resources for long (docs/SECURITY.md says
 * why each): the dashboard's simulation (a replay on a worker thread, one at a time) and job
 * event streams (a socket and a watch each, open until the job ends).
 */
export const API_LIMIT_DEFAULTS: Readonly<Pick<Config['api'], 'simulation' | 'sse'>> = {
  simulation: { cpuBudgetMs: 5_000, perTenantPerMin: 6 },
  sse: { maxStreamsPerTenant: 100, maxStreams: 1_000 },
};

/** Every variable warmpool reads, with its default. README's config table mirrors this. */
const schema = z.object({
  // redis://host:port (one node) or redis+cluster://host:port,host:port (Redis Cluster; infra/redis/client.ts).
  REDIS_URL: z
    .string()
    .default('redis://127.0.0.1:6379')
    .refine(
      (v) => isClusterUrl(v) || z.string().url().safeParse(v).success,
      'expected redis://host:port or redis+cluster://host:port,host:port',
    ),
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_-]+$/)
    .default('warmpool'),
  S3_ENDPOINT: optionalString.pipe(z.string().url().optional()),
  S3_BUCKET: z.string().min(3).default('warmpool'),
  S3_PREFIX: z
    .string()
    .default('')
    .transform((p) => p.replace(/^\/+|\/+$/g, '')),
  S3_FORCE_PATH_STYLE: bool.optional(),
  AWS_REGION: z.string().default('us-east-1'),
  HOST: z.string().default('127.0.0.1'),
  PORT: int(0, 65535).default(8080),
  API_KEYS: z.string().default(''),
  ADMIN_TENANTS: z.string().default(''),
  // Where each tenant's bulk runs may read and write (kernel/bulk-locations.ts); none = no bulk runs.
  BULK_LOCATIONS: z.string().default(''),
  // Transport hygiene (docs/SECURITY.md): slow clients are cut off, failed keys are rate-limited
  // per address, and /metrics needs a key unless served on a port of its own.
  HEADERS_TIMEOUT_MS: int(100, 600_000).default(10_000),
  REQUEST_TIMEOUT_MS: int(100, 3_600_000).default(60_000),
  AUTH_FAILURE_LIMIT_PER_MIN: int(0, 1_000_000).default(30),
  TRUST_PROXY_HOPS: int(0, 16).default(0),
  METRICS_PORT: optionalString
    .refine((v) => v === undefined || (/^\d{1,5}$/.test(v) && Number(v) <= 65535), 'a port from 0 to 65535')
    .transform((v) => (v === undefined ? undefined : Number(v))),
  // The Open Inference Protocol over gRPC (api/grpc/), beside HTTP: off unless set; 0 = any free port.
  GRPC_PORT: optionalString
    .refine((v) => v === undefined || (/^\d{1,5}$/.test(v) && Number(v) <= 65535), 'a port from 0 to 65535')
    .transform((v) => (v === undefined ? undefined : Number(v))),
  METRICS_TOKEN: optionalString.pipe(z.string().min(16, 'must be 16 characters or more').optional()),
  SIMULATION_CPU_BUDGET_MS: int(100, 600_000).default(API_LIMIT_DEFAULTS.simulation.cpuBudgetMs),
  SIMULATIONS_PER_MIN: int(1, 10_000).default(API_LIMIT_DEFAULTS.simulation.perTenantPerMin),
  MAX_SSE_STREAMS_PER_TENANT: int(1, 1_000_000).default(API_LIMIT_DEFAULTS.sse.maxStreamsPerTenant),
  MAX_SSE_STREAMS: int(1, 1_000_000).default(API_LIMIT_DEFAULTS.sse.maxStreams),
  BODY_LIMIT_BYTES: int(1024).default(8 * 1024 * 1024),
  SYNC_TIMEOUT_MS: int(1).default(30_000),
  JOB_RETENTION_S: int(60).default(86_400),
  JOB_ATTEMPTS: int(1, 100).default(3),
  // Bounded work per request (docs/SECURITY.md): rows one job may carry, elements one input may
  // declare (a zero-length axis counted as 1), and a tenant's queued + running jobs.
  MAX_ROWS_PER_JOB: int(1, 10_000_000).default(10_000),
  MAX_ELEMENTS_PER_JOB: int(1, 1_000_000_000).default(4_194_304),
  MAX_OPEN_JOBS_PER_TENANT: int(1).default(10_000),
  // Queue entries (infra/contracts/entry.ts): concurrent requests one entry may carry; 1 = one
  // request per entry. 64: past it an entry's write and its worker's read are no longer the
  // cost that matters (they grow with the bytes, not the count), and a worker's batch is
  // usually no bigger.
  COALESCE_MAX_REQUESTS: int(1, 4096).default(64),
  EXECUTION_PROVIDERS: z.string().default('cpu'),
  INTRA_OP_THREADS: int(0, 1024).default(0),
  MODEL_CACHE_DIR: z.string().default(path.join(os.homedir(), '.cache', 'warmpool', 'models')),
  BATCH_MAX_ROWS: int(0).default(0),
  BATCH_MAX_WAIT_MS: z.coerce.number().min(0).max(10_000).default(5),
  WARMUP_LATENCY_BUDGET_MS: z.coerce.number().positive().default(250),
  WARMUP_ITERATIONS: int(1, 1000).default(5),
  WORKER_CONCURRENCY: int(0, 100_000).default(0),
  RESULT_CACHE_TTL_S: int(1).default(3_600),
  RESULT_CACHE_MAX_BYTES: int(0).default(1_048_576),
  LOCK_DURATION_MS: int(1000).default(30_000),
  STALLED_INTERVAL_MS: int(1000).default(30_000),
  HEARTBEAT_INTERVAL_MS: int(100).default(2_000),
  HEARTBEAT_TTL_MS: int(500).default(10_000),
  WORKER_HEALTH_PORT: int(0, 65535).default(0),
  WEBHOOK_ALLOWED_PRIVATE_HOSTS: z.string().default(''),
  WEBHOOK_TIMEOUT_MS: int(100, 120_000).default(10_000),
  /** Delays before each retry, after the first attempt; default ≈ a day, Svix-like. */
  WEBHOOK_RETRY_SCHEDULE_MS: z
    .string()
    .default('5000,300000,1800000,7200000,18000000,36000000,36000000')
    .refine((v) => v.split(',').every((p) => /^\d+$/.test(p.trim())), 'a comma-separated list of milliseconds'),
  RATE_LIMIT_RPS: z.coerce.number().positive().default(50),
  RATE_LIMIT_BURST: int(1).default(100),
  // Request-body bytes per tenant (api/http/rate-limit.ts); 0 turns the byte budget off. 32 MiB/s is
  // twice a tenant sending 50 CNN rows a second (~300 KB of JSON each); the burst holds 8 bodies at
  // the 8 MiB limit, so a quiet tenant's largest requests pass at once.
  RATE_LIMIT_BYTES_PER_S: int(0).default(32 * 1024 * 1024),
  RATE_LIMIT_BYTES_BURST: int(0).default(64 * 1024 * 1024),
  IDEMPOTENCY_TTL_S: int(60).default(86_400),
  POOL_PROVIDER: z.enum(['local', 'kubernetes', 'aws']).default(SCALER_DEFAULTS.provider),
  K8S_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
    .default(SCALER_DEFAULTS.k8sNamespace),
  SCALER_TICK_MS: int(100).default(SCALER_DEFAULTS.tickMs),
  SLO_QUEUE_WAIT_MS: int(1).default(SCALER_DEFAULTS.sloQueueWaitMs),
  COLD_START_DEFAULT_MS: int(0).default(SCALER_DEFAULTS.coldStartDefaultMs),
  SCALE_DOWN_STABILIZATION_MS: int(0).default(SCALER_DEFAULTS.scaleDownStabilizationMs),
  TARGET_UTILIZATION: z.coerce.number().gt(0).max(1).default(SCALER_DEFAULTS.targetUtilization),
  MIN_LIFETIME_COLD_STARTS: z.coerce.number().min(0).max(100).default(SCALER_DEFAULTS.minLifetimeColdStarts),
  CANARY_ENABLED: bool.default(true),
  CANARY_WINDOW_MS: int(1000).default(120_000),
  CANARY_MAX_ERROR_RATE_DELTA: z.coerce.number().min(0).max(1).default(0.05),
  CANARY_MAX_LATENCY_RATIO: z.coerce.number().min(1).default(1.5),
  CANARY_MIN_REQUESTS: int(1).default(50),
  CANARY_SUSTAIN_MS: int(0).default(60_000),
  CANARY_LATENCY_FLOOR_MS: z.coerce.number().min(0).default(10),
  CANARY_TICK_MS: int(100).default(5_000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export interface ApiKey {
  tenant: string;
  key: string;
}

export interface Config {
  redisUrl: string;
  queuePrefix: string;
  s3: {
    endpoint?: string;
    bucket: string;
    prefix: string;
    region: string;
    forcePathStyle: boolean;
    /** From AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY when both are set in the env given to
     * loadConfig; otherwise undefined and the AWS SDK's default chain applies. Non-enumerable. */
    readonly credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  };
  api: {
    host: string;
    port: number;
    /** Non-enumerable: never serialised or logged. */
    readonly apiKeys: ApiKey[];
    /** Tenants that may change deployments through the API (a deployment serves every tenant). */
    adminTenants: string[];
    bodyLimitBytes: number;
    syncTimeoutMs: number;
    /** A client must send its request headers within this (node's headersTimeout), and the whole request within requestTimeoutMs. */
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    /** Wrong API keys one source address may present per minute before it is answered 429; 0 = no limit. */
    authFailureLimitPerMin: number;
    /** Proxies in front of the API whose X-Forwarded-For entry is trusted; 0 = the socket's address is the client's. */
    trustProxyHops: number;
    /** `/metrics` also served, without auth, on this port (0 = any free one); absent = none. */
    metricsPort?: number;
    /** The OIP gRPC service (api/grpc/) on this port of `host` (0 = any free one); absent = none. Never on Lambda. */
    grpcPort?: number;
    /** A bearer token that may read `/metrics` on the API's port besides admin tenants' keys. Non-enumerable. */
    readonly metricsToken?: string;
    /** The dashboard's simulation: CPU time one replay may use, and replays a tenant may start per minute. */
    simulation: { cpuBudgetMs: number; perTenantPerMin: number };
    /** Concurrent job event streams one API process serves per tenant, and in all. */
    sse: { maxStreamsPerTenant: number; maxStreams: number };
  };
  jobs: {
    retentionS: number;
    attempts: number;
    idempotencyTtlS: number;
    /** Rows (shape[0]) one job may carry; checked at submit and again by the worker. */
    maxRowsPerJob: number;
    /** Elements one input may declare, a zero-length axis counted as 1; checked at submit and by the worker. */
    maxElementsPerJob: number;
    /** A tenant's accepted jobs not yet ended (queued or running); over it, 429 too_many_open_jobs. */
    maxOpenJobsPerTenant: number;
    /** Concurrent requests one queue entry may carry (infra/queue/entry-writer.ts); 1 = none shared. */
    coalesceMaxRequests: number;
  };
  /** Per tenant: requests (rps, burst) and request-body bytes (bytesPerS, bytesBurst; bytesPerS 0: off). */
  rateLimit: { rps: number; burst: number; bytesPerS: number; bytesBurst: number };
  /** Bulk runs: the S3 locations each tenant may read and write (BULK_LOCATIONS), in normal form. */
  bulk: { locations: BulkLocationGrant[] };
  /** The scaler (infra/scaler): how it ticks and the policy's settings. */
  scaler: {
    provider: 'local' | 'kubernetes' | 'aws';
    /** Namespace of the workers' Deployments (POOL_PROVIDER=kubernetes). */
    k8sNamespace: string;
    tickMs: number;
    sloQueueWaitMs: number;
    /** Cold-start time assumed until a worker's is measured. */
    coldStartDefaultMs: number;
    scaleDownStabilizationMs: number;
    /** A cap on planned utilisation on top of the SLO sizing (1: none). */
    targetUtilization: number;
    /** A launched worker is kept at least this many cold starts (no launch-then-drain within it). */
    minLifetimeColdStarts: number;
  };
  /** The canary guard (infra/canary): when a canary version's share is taken back to 0. */
  canary: {
    enabled: boolean;
    windowMs: number;
    maxErrorRateDelta: number;
    maxLatencyRatio: number;
    minRequests: number;
    sustainMs: number;
    latencyFloorMs: number;
    tickMs: number;
  };
  webhooks: {
    /** Host names (not addresses) webhooks may reach even when they resolve to private ranges. */
    allowedPrivateHosts: string[];
    timeoutMs: number;
    retryScheduleMs: number[];
  };
  worker: {
    executionProviders: string[];
    /** 0 = let warm-up choose among the host's options. */
    intraOpThreads: number;
    modelCacheDir: string;
    /** 0 = the manifest's maxBatch. */
    batchMaxRows: number;
    batchMaxWaitMs: number;
    warmupLatencyBudgetMs: number;
    warmupIterations: number;
    /** Jobs held in flight; 0 = twice the batch size, enough to keep batches full. */
    concurrency: number;
    /** Successful results are cached this long for identical requests of the same tenant. */
    resultCacheTtlS: number;
    /** Larger results are not cached (BullMQ keeps a copy already). */
    resultCacheMaxBytes: number;
    lockDurationMs: number;
    stalledIntervalMs: number;
    heartbeatIntervalMs: number;
    heartbeatTtlMs: number;
    /** The worker's /live, /ready and /drain endpoint (worker/health-server.ts); 0 = none. */
    healthPort: number;
  };
  logLevel: string;
}

/** What the scaler decides with, apart from where its workers run: the part a simulation replays. */
export type ScalerTuning = Omit<Config['scaler'], 'provider' | 'k8sNamespace'>;

/** Variables whose value a config error never echoes. */
const SECRET_VARIABLES = new Set(['API_KEYS', 'METRICS_TOKEN']);

export const EXECUTION_PROVIDER_NAMES = ['cpu', 'cuda', 'tensorrt', 'coreml', 'dml', 'webgpu'] as const;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const name = String(issue?.path[0] ?? 'environment');
    const got = SECRET_VARIABLES.has(name) ? 'a value not shown' : JSON.stringify(env[name] ?? null);
    throw new ConfigError('invalid_config', `${name}: ${issue?.message ?? 'invalid'} (got ${got})`);
  }
  const e = parsed.data;
  const providers = e.EXECUTION_PROVIDERS.split(',')
    .map((p) => p.trim().toLowerCase())
    .filter(Boolean);
  for (const p of providers) {
    if (!(EXECUTION_PROVIDER_NAMES as readonly string[]).includes(p)) {
      throw new ConfigError(
        'invalid_config',
        `EXECUTION_PROVIDERS: unknown provider "${p}" (known: ${EXECUTION_PROVIDER_NAMES.join(', ')})`,
      );
    }
  }
  if (e.CANARY_SUSTAIN_MS >= e.CANARY_WINDOW_MS) {
    throw new ConfigError('invalid_config', 'CANARY_SUSTAIN_MS: must be shorter than CANARY_WINDOW_MS');
  }
  if (e.CANARY_TICK_MS >= Math.max(e.CANARY_SUSTAIN_MS, 1)) {
    throw new ConfigError('invalid_config', 'CANARY_TICK_MS: must be shorter than CANARY_SUSTAIN_MS');
  }
  if (e.HEADERS_TIMEOUT_MS > e.REQUEST_TIMEOUT_MS) {
    throw new ConfigError('invalid_config', 'HEADERS_TIMEOUT_MS: must not be longer than REQUEST_TIMEOUT_MS');
  }
  if (e.RATE_LIMIT_BYTES_PER_S > 0 && e.RATE_LIMIT_BYTES_BURST < e.BODY_LIMIT_BYTES) {
    // A body the size of the limit could never be let through.
    throw new ConfigError('invalid_config', 'RATE_LIMIT_BYTES_BURST: must be at least BODY_LIMIT_BYTES (or RATE_LIMIT_BYTES_PER_S 0)');
  }
  if (e.HEARTBEAT_TTL_MS <= e.HEARTBEAT_INTERVAL_MS) {
    throw new ConfigError('invalid_config', 'HEARTBEAT_TTL_MS: must be longer than HEARTBEAT_INTERVAL_MS');
  }
  const api = {
    host: e.HOST,
    port: e.PORT,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    syncTimeoutMs: e.SYNC_TIMEOUT_MS,
    headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    authFailureLimitPerMin: e.AUTH_FAILURE_LIMIT_PER_MIN,
    trustProxyHops: e.TRUST_PROXY_HOPS,
    simulation: { cpuBudgetMs: e.SIMULATION_CPU_BUDGET_MS, perTenantPerMin: e.SIMULATIONS_PER_MIN },
    sse: { maxStreamsPerTenant: e.MAX_SSE_STREAMS_PER_TENANT, maxStreams: e.MAX_SSE_STREAMS },
    ...(e.METRICS_PORT !== undefined ? { metricsPort: e.METRICS_PORT } : {}),
    ...(e.GRPC_PORT !== undefined ? { grpcPort: e.GRPC_PORT } : {}),
    adminTenants: e.ADMIN_TENANTS.split(',')
      .map((t) => t.trim())
      .filter(Boolean),
  } as Config['api'];
  Object.defineProperty(api, 'apiKeys', { value: parseApiKeys(e.API_KEYS), enumerable: false });
  if (e.METRICS_TOKEN !== undefined) Object.defineProperty(api, 'metricsToken', { value: e.METRICS_TOKEN, enumerable: false });
  const s3 = {
    endpoint: e.S3_ENDPOINT,
    bucket: e.S3_BUCKET,
    prefix: e.S3_PREFIX,
    region: e.AWS_REGION,
    forcePathStyle: e.S3_FORCE_PATH_STYLE ?? e.S3_ENDPOINT !== undefined,
  } as Config['s3'];
  if (env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY) {
    const credentials = {
      accessKeyId: env.AWS_ACCESS_KEY_ID,
      secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
      ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
    };
    Object.defineProperty(s3, 'credentials', { value: credentials, enumerable: false });
  }
  return {
    redisUrl: e.REDIS_URL,
    queuePrefix: e.QUEUE_PREFIX,
    s3,
    api,
    jobs: {
      retentionS: e.JOB_RETENTION_S,
      attempts: e.JOB_ATTEMPTS,
      idempotencyTtlS: e.IDEMPOTENCY_TTL_S,
      maxRowsPerJob: e.MAX_ROWS_PER_JOB,
      maxElementsPerJob: e.MAX_ELEMENTS_PER_JOB,
      maxOpenJobsPerTenant: e.MAX_OPEN_JOBS_PER_TENANT,
      coalesceMaxRequests: e.COALESCE_MAX_REQUESTS,
    },
    rateLimit: {
      rps: e.RATE_LIMIT_RPS,
      burst: e.RATE_LIMIT_BURST,
      bytesPerS: e.RATE_LIMIT_BYTES_PER_S,
      bytesBurst: e.RATE_LIMIT_BYTES_BURST,
    },
    bulk: { locations: parseBulkLocations(e.BULK_LOCATIONS, registryModelsArea(e.S3_BUCKET, e.S3_PREFIX)) },
    scaler: {
      provider: e.POOL_PROVIDER,
      k8sNamespace: e.K8S_NAMESPACE,
      tickMs: e.SCALER_TICK_MS,
      sloQueueWaitMs: e.SLO_QUEUE_WAIT_MS,
      coldStartDefaultMs: e.COLD_START_DEFAULT_MS,
      scaleDownStabilizationMs: e.SCALE_DOWN_STABILIZATION_MS,
      targetUtilization: e.TARGET_UTILIZATION,
      minLifetimeColdStarts: e.MIN_LIFETIME_COLD_STARTS,
    },
    canary: {
      enabled: e.CANARY_ENABLED,
      windowMs: e.CANARY_WINDOW_MS,
      maxErrorRateDelta: e.CANARY_MAX_ERROR_RATE_DELTA,
      maxLatencyRatio: e.CANARY_MAX_LATENCY_RATIO,
      minRequests: e.CANARY_MIN_REQUESTS,
      sustainMs: e.CANARY_SUSTAIN_MS,
      latencyFloorMs: e.CANARY_LATENCY_FLOOR_MS,
      tickMs: e.CANARY_TICK_MS,
    },
    webhooks: {
      allowedPrivateHosts: e.WEBHOOK_ALLOWED_PRIVATE_HOSTS.split(',')
        .map((h) => h.trim().toLowerCase())
        .filter(Boolean),
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      retryScheduleMs: e.WEBHOOK_RETRY_SCHEDULE_MS.split(',').map((p) => Number(p.trim())),
    },
    worker: {
      executionProviders: providers.length > 0 ? providers : ['cpu'],
      intraOpThreads: e.INTRA_OP_THREADS,
      modelCacheDir: e.MODEL_CACHE_DIR,
      batchMaxRows: e.BATCH_MAX_ROWS,
      batchMaxWaitMs: e.BATCH_MAX_WAIT_MS,
      warmupLatencyBudgetMs: e.WARMUP_LATENCY_BUDGET_MS,
      warmupIterations: e.WARMUP_ITERATIONS,
      concurrency: e.WORKER_CONCURRENCY,
      resultCacheTtlS: e.RESULT_CACHE_TTL_S,
      resultCacheMaxBytes: e.RESULT_CACHE_MAX_BYTES,
      lockDurationMs: e.LOCK_DURATION_MS,
      stalledIntervalMs: e.STALLED_INTERVAL_MS,
      heartbeatIntervalMs: e.HEARTBEAT_INTERVAL_MS,
      heartbeatTtlMs: e.HEARTBEAT_TTL_MS,
      healthPort: e.WORKER_HEALTH_PORT,
    },
    logLevel: e.LOG_LEVEL,
  };
}

/**
 * Shortest API key accepted. Failed keys are rate-limited per address, but a valid key keeps
 * working while its address is limited (api/http/auth-failures.ts), so the limit does not stop
 * guessing by itself: length does. 16 characters of even a 36-letter alphabet are ~8e24 keys.
 */
export const MIN_API_KEY_LENGTH = 16;

/** `tenant:key` pairs, comma-separated. A key may contain ':' after the first one. */
export function parseApiKeys(raw: string): ApiKey[] {
  const keys: ApiKey[] = [];
  for (const pair of raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = pair.indexOf(':');
    const tenant = at > 0 ? pair.slice(0, at) : '';
    const key = at > 0 ? pair.slice(at + 1) : '';
    // The entry itself is never echoed: it holds a key.
    if (!TENANT_PATTERN.test(tenant)) {
      throw new ConfigError(
        'invalid_config',
        `API_KEYS: each entry must be tenant:key, tenant of [A-Za-z0-9_-], key of ${MIN_API_KEY_LENGTH} characters or more`,
      );
    }
    if (key.length < MIN_API_KEY_LENGTH) {
      throw new ConfigError(
        'invalid_config',
        `API_KEYS: the key of tenant ${tenant} has ${key.length} characters; keys must have ${MIN_API_KEY_LENGTH} or more`,
      );
    }
    keys.push({ tenant, key });
  }
  return keys;
}
