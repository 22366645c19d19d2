/**
 * Configuration: defaults, then the environment, then validation, once, at start. A bad value
 * fails fast with the variable's name. Units are in the names. Secrets never serialise: API keys,
 * the metrics token and S3 credentials are kept out of `JSON.stringify(config)` and of logs.
 *
 * Each section of `Config` is one zod object over its variables, with the variable's rule and
 * default, and a transform into the shape its consumers read; `Config` is that output type. A
 * check across variables of a section sits in its transform. The defaults other modules need
 * (SCALER_DEFAULTS, CANARY_DEFAULTS, …) are the config of an empty environment, so each default
 * is written once, in its variable's `.default()`; config-readme.test.ts holds README's table to it.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { type ApiKey, parseApiKeys } from './api-keys.ts';
import { type BulkLocationGrant, parseBulkLocations } from './bulk-locations.ts';
import { bool, checked, int, isFailedCheck, list, optionalPort, optionalString, refuse, withHidden } from './config-values.ts';
import { ConfigError } from './errors.ts';
import { DRAIN_LIMIT_MS } from './lifecycle.ts';
import { isClusterUrl } from './redis-url.ts';
import { registryModelsArea } from './s3-location.ts';

export { type ApiKey, MIN_API_KEY_LENGTH, parseApiKeys } from './api-keys.ts';

/**
 * The API's own secrets: what authenticates callers. No other process reads them (a worker, the
 * scaler's children), so a process that starts others leaves them out of the children's
 * environment (infra/pool/local-provider.ts): a worker's environment is readable by whatever
 * runs as its user (/proc/<pid>/environ), and a model's process has no business with keys.
 */
export const API_SECRET_VARIABLES = ['API_KEYS', 'METRICS_TOKEN'] as const;

/** Variables whose value a config error never echoes. */
const SECRET_VARIABLES = new Set<string>([...API_SECRET_VARIABLES, 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN']);

export const EXECUTION_PROVIDER_NAMES = ['cpu', 'cuda', 'tensorrt', 'coreml', 'dml', 'webgpu'] as const;
export const POOL_PROVIDERS = ['local', 'kubernetes', 'aws'] as const;

// Read by two sections (the registry's place bounds bulk locations; a body must fit the byte burst).
const S3_BUCKET = z.string().min(3).default('warmpool');
const S3_PREFIX = z
  .string()
  .default('')
  .transform((p) => p.replace(/^\/+|\/+$/g, ''));
const BODY_LIMIT_BYTES = int(1024).default(8 * 1024 * 1024);

const redisUrl = z
  .object({
    // redis://host:port (one node) or redis+cluster://host:port,host:port (Redis Cluster; infra/redis/client.ts).
    REDIS_URL: z
      .string()
      .default('redis://127.0.0.1:6379')
      .refine(
        (v) => isClusterUrl(v) || z.string().url().safeParse(v).success,
        'expected redis://host:port or redis+cluster://host:port,host:port',
      ),
  })
  .transform((e) => e.REDIS_URL);

const queuePrefix = z
  .object({
    QUEUE_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9_-]+$/)
      .default('warmpool'),
  })
  .transform((e) => e.QUEUE_PREFIX);

const s3 = z
  .object({
    S3_ENDPOINT: optionalString.pipe(z.string().url().optional()),
    S3_BUCKET,
    S3_PREFIX,
    S3_FORCE_PATH_STYLE: bool.optional(),
    AWS_REGION: z.string().default('us-east-1'),
    // Given to the S3 client when both are set in the env loadConfig reads (which may be
    // .warmpool/dev.env's); otherwise the AWS SDK's default chain applies.
    AWS_ACCESS_KEY_ID: z.string().optional(),
    AWS_SECRET_ACCESS_KEY: z.string().optional(),
    AWS_SESSION_TOKEN: z.string().optional(),
  })
  .transform((e) => {
    const { AWS_ACCESS_KEY_ID: accessKeyId, AWS_SECRET_ACCESS_KEY: secretAccessKey, AWS_SESSION_TOKEN: sessionToken } = e;
    const hidden: { credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string } } =
      accessKeyId && secretAccessKey ? { credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } } : {};
    const visible = {
      /** Unset: AWS S3. */
      endpoint: e.S3_ENDPOINT,
      bucket: e.S3_BUCKET,
      prefix: e.S3_PREFIX,
      region: e.AWS_REGION,
      forcePathStyle: e.S3_FORCE_PATH_STYLE ?? e.S3_ENDPOINT !== undefined,
    };
    return withHidden(visible, hidden);
  });

const api = z
  .object({
    HOST: z.string().default('127.0.0.1'),
    PORT: int(0, 65535).default(8080),
    API_KEYS: z.string().default(''),
    ADMIN_TENANTS: z.string().default(''),
    BODY_LIMIT_BYTES,
    SYNC_TIMEOUT_MS: int(1).default(30_000),
    // Transport hygiene (docs/SECURITY.md): slow clients are cut off, failed keys are rate-limited
    // per address, and /metrics needs a key unless served on a port of its own.
    HEADERS_TIMEOUT_MS: int(100, 600_000).default(10_000),
    REQUEST_TIMEOUT_MS: int(100, 3_600_000).default(60_000),
    AUTH_FAILURE_LIMIT_PER_MIN: int(0, 1_000_000).default(30),
    TRUST_PROXY_HOPS: int(0, 16).default(0),
    METRICS_PORT: optionalPort,
    // The Open Inference Protocol over gRPC (api/grpc/), beside HTTP: off unless set; 0 = any free port.
    GRPC_PORT: optionalPort,
    METRICS_TOKEN: optionalString.pipe(z.string().min(16, 'must be 16 characters or more').optional()),
    // What one API process gives one request that holds resources for long (docs/SECURITY.md says
    // why each): the dashboard's simulation (a replay on a worker thread, one at a time) and job
    // event streams (a socket and a watch each, open until the job ends).
    SIMULATION_CPU_BUDGET_MS: int(100, 600_000).default(5_000),
    SIMULATIONS_PER_MIN: int(1, 10_000).default(6),
    MAX_SSE_STREAMS_PER_TENANT: int(1, 1_000_000).default(100),
    MAX_SSE_STREAMS: int(1, 1_000_000).default(1_000),
    // The gRPC listener's transport bounds (api/grpc/server.ts, docs/SECURITY.md): connections in
    // all and per source address, how long a connection may sit with no call, streams per connection.
    GRPC_MAX_CONNECTIONS: int(1, 1_000_000).default(1_000),
    GRPC_MAX_CONNECTIONS_PER_ADDRESS: int(1, 1_000_000).default(100),
    GRPC_IDLE_TIMEOUT_MS: int(1_000, 3_600_000).default(60_000),
    GRPC_MAX_CONCURRENT_STREAMS: int(1, 10_000).default(100),
    // The HTTP listener's connection bounds (api/http/connection-cap.ts): in all and per source
    // address; at a cap the oldest idle keep-alive connection is given back, else the new one refused.
    HTTP_MAX_CONNECTIONS: int(1, 1_000_000).default(16_384),
    HTTP_MAX_CONNECTIONS_PER_ADDRESS: int(1, 1_000_000).default(1_024),
    // Output elements one JSON answer may carry (a job's GET, sync inference); more: 413 with a
    // hint to ask for the binary form. 1 Mi elements is ~20 MB of JSON.
    MAX_JSON_OUTPUT_ELEMENTS: int(1, 1_000_000_000).default(1_048_576),
  })
  .transform((e, ctx) => {
    if (e.HEADERS_TIMEOUT_MS > e.REQUEST_TIMEOUT_MS) {
      return refuse(ctx, 'HEADERS_TIMEOUT_MS: must not be longer than REQUEST_TIMEOUT_MS');
    }
    const hidden: { apiKeys: ApiKey[]; metricsToken?: string } = {
      apiKeys: checked(ctx, () => parseApiKeys(e.API_KEYS)),
      metricsToken: e.METRICS_TOKEN,
    };
    const visible = {
      host: e.HOST,
      port: e.PORT,
      /** Tenants that may change deployments through the API (a deployment serves every tenant). */
      adminTenants: list(e.ADMIN_TENANTS),
      bodyLimitBytes: e.BODY_LIMIT_BYTES,
      syncTimeoutMs: e.SYNC_TIMEOUT_MS,
      /** A client must send its request headers within this (node's headersTimeout), and the whole request within requestTimeoutMs. */
      headersTimeoutMs: e.HEADERS_TIMEOUT_MS,
      requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
      /** Wrong API keys one source address may present per minute before it is answered 429; 0 = no limit. */
      authFailureLimitPerMin: e.AUTH_FAILURE_LIMIT_PER_MIN,
      /** Proxies in front of the API whose X-Forwarded-For entry is trusted; 0 = the socket's address is the client's. */
      trustProxyHops: e.TRUST_PROXY_HOPS,
      ...(e.METRICS_PORT !== undefined
        ? { /** `/metrics` also served, without auth, on this port (0 = any free one); absent = none. */ metricsPort: e.METRICS_PORT }
        : {}),
      ...(e.GRPC_PORT !== undefined
        ? {
            /** The OIP gRPC service (api/grpc/) on this port of `host` (0 = any free one); absent = none. Never on Lambda. */ grpcPort:
              e.GRPC_PORT,
          }
        : {}),
      /** The dashboard's simulation: CPU time one replay may use, and replays a tenant may start per minute. */
      simulation: { cpuBudgetMs: e.SIMULATION_CPU_BUDGET_MS, perTenantPerMin: e.SIMULATIONS_PER_MIN },
      /** Concurrent job event streams one API process serves per tenant, and in all. */
      sse: { maxStreamsPerTenant: e.MAX_SSE_STREAMS_PER_TENANT, maxStreams: e.MAX_SSE_STREAMS },
      /** The gRPC listener's connection, idle and stream bounds (GRPC_PORT). */
      grpc: {
        maxConnections: e.GRPC_MAX_CONNECTIONS,
        maxConnectionsPerAddress: e.GRPC_MAX_CONNECTIONS_PER_ADDRESS,
        idleTimeoutMs: e.GRPC_IDLE_TIMEOUT_MS,
        maxConcurrentStreams: e.GRPC_MAX_CONCURRENT_STREAMS,
      },
      /**
       * The HTTP listener's connections in all and per source address. Behind trusted proxies
       * (trustProxyHops > 0) every connection comes from a proxy, so the per-address cap is the total.
       */
      http: {
        maxConnections: e.HTTP_MAX_CONNECTIONS,
        maxConnectionsPerAddress:
          e.TRUST_PROXY_HOPS > 0 ? e.HTTP_MAX_CONNECTIONS : Math.min(e.HTTP_MAX_CONNECTIONS_PER_ADDRESS, e.HTTP_MAX_CONNECTIONS),
      },
      /** Output elements one JSON answer may carry; larger results are asked for in binary form. */
      maxJsonOutputElements: e.MAX_JSON_OUTPUT_ELEMENTS,
    };
    // apiKeys and metricsToken (a bearer token that may read `/metrics` besides admin tenants' keys): never serialised or logged.
    return withHidden(visible, hidden);
  });

const jobs = z
  .object({
    JOB_RETENTION_S: int(60).default(86_400),
    JOB_ATTEMPTS: int(1, 100).default(3),
    IDEMPOTENCY_TTL_S: int(60).default(86_400),
    // Bounded work per request (docs/SECURITY.md): rows one job may carry, elements one input may
    // declare (a zero-length axis counted as 1), and a tenant's queued + running jobs.
    MAX_ROWS_PER_JOB: int(1, 10_000_000).default(10_000),
    MAX_ELEMENTS_PER_JOB: int(1, 1_000_000_000).default(4_194_304),
    MAX_OPEN_JOBS_PER_TENANT: int(1).default(10_000),
    // BYTES elements one job may carry (each is work per element in the API and the worker).
    MAX_BYTES_ELEMENTS_PER_JOB: int(1, 1_000_000_000).default(65_536),
    // What a tenant's jobs may keep in Redis (packed inputs and outputs, until JOB_RETENTION_S
    // ends them); past it new work is 429 storage_budget_exhausted. 0 = no budget.
    MAX_STORED_BYTES_PER_TENANT: int(0).default(512 * 1024 * 1024),
    // Queue entries (infra/contracts/entry.ts): concurrent requests one entry may carry; 1 = one
    // request per entry. 64: past it an entry's write and its worker's read are no longer the
    // cost that matters (they grow with the bytes, not the count), and a worker's batch is
    // usually no bigger.
    COALESCE_MAX_REQUESTS: int(1, 4096).default(64),
  })
  .transform((e) => ({
    retentionS: e.JOB_RETENTION_S,
    attempts: e.JOB_ATTEMPTS,
    idempotencyTtlS: e.IDEMPOTENCY_TTL_S,
    /** Rows (shape[0]) one job may carry; checked at submit and again by the worker. */
    maxRowsPerJob: e.MAX_ROWS_PER_JOB,
    /** Elements one input may declare, a zero-length axis counted as 1; checked at submit and by the worker. */
    maxElementsPerJob: e.MAX_ELEMENTS_PER_JOB,
    /** A tenant's accepted jobs not yet ended (queued or running); over it, 429 too_many_open_jobs. */
    maxOpenJobsPerTenant: e.MAX_OPEN_JOBS_PER_TENANT,
    /** BYTES elements one job may carry, over every BYTES input; checked at submit and by the worker. */
    maxBytesElementsPerJob: e.MAX_BYTES_ELEMENTS_PER_JOB,
    /** Bytes a tenant's kept inputs and outputs may hold in Redis; 0 = unbounded. */
    maxStoredBytesPerTenant: e.MAX_STORED_BYTES_PER_TENANT,
    /** Concurrent requests one queue entry may carry (infra/queue/entry-writer.ts); 1 = none shared. */
    coalesceMaxRequests: e.COALESCE_MAX_REQUESTS,
  }));

/** Per tenant: requests (rps, burst) and request-body bytes (bytesPerS, bytesBurst; bytesPerS 0: off). */
const rateLimit = z
  .object({
    RATE_LIMIT_RPS: z.coerce.number().positive().default(50),
    RATE_LIMIT_BURST: int(1).default(100),
    // Request-body bytes per tenant (api/http/rate-limit.ts); 0 turns the byte budget off. 32 MiB/s is
    // twice a tenant sending 50 CNN rows a second (~300 KB of JSON each); the burst holds 8 bodies at
    // the 8 MiB limit, so a quiet tenant's largest requests pass at once.
    RATE_LIMIT_BYTES_PER_S: int(0).default(32 * 1024 * 1024),
    RATE_LIMIT_BYTES_BURST: int(0).default(64 * 1024 * 1024),
    BODY_LIMIT_BYTES,
  })
  .transform((e, ctx) => {
    if (e.RATE_LIMIT_BYTES_PER_S > 0 && e.RATE_LIMIT_BYTES_BURST < e.BODY_LIMIT_BYTES) {
      // A body the size of the limit could never be let through.
      return refuse(ctx, 'RATE_LIMIT_BYTES_BURST: must be at least BODY_LIMIT_BYTES (or RATE_LIMIT_BYTES_PER_S 0)');
    }
    return { rps: e.RATE_LIMIT_RPS, burst: e.RATE_LIMIT_BURST, bytesPerS: e.RATE_LIMIT_BYTES_PER_S, bytesBurst: e.RATE_LIMIT_BYTES_BURST };
  });

/** Bulk runs: the S3 locations each tenant may read and write (BULK_LOCATIONS), in normal form. */
const bulk = z
  .object({
    // Where each tenant's bulk runs may read and write (kernel/bulk-locations.ts); none = no bulk
    // runs. None may overlap the registry's models area, hence the bucket and prefix.
    BULK_LOCATIONS: z.string().default(''),
    S3_BUCKET,
    S3_PREFIX,
    // Runs not yet ended, per tenant and in all: each holds chunk jobs, a driver's attention and
    // Redis; past them, 429 / 503 too_many_bulk_runs.
    MAX_ACTIVE_BULK_RUNS_PER_TENANT: int(1, 100_000).default(4),
    MAX_ACTIVE_BULK_RUNS: int(1, 1_000_000).default(64),
    // The largest Parquet footer (file metadata) a driver or worker decodes.
    PARQUET_FOOTER_MAX_BYTES: int(1024, 1024 * 1024 * 1024).default(4 * 1024 * 1024),
  })
  .transform((e, ctx) => {
    if (e.MAX_ACTIVE_BULK_RUNS_PER_TENANT > e.MAX_ACTIVE_BULK_RUNS) {
      return refuse(ctx, 'MAX_ACTIVE_BULK_RUNS_PER_TENANT: must not be more than MAX_ACTIVE_BULK_RUNS');
    }
    return {
      locations: checked(ctx, (): BulkLocationGrant[] =>
        parseBulkLocations(e.BULK_LOCATIONS, registryModelsArea(e.S3_BUCKET, e.S3_PREFIX)),
      ),
      /** Runs not yet ended one tenant may have. */
      maxActiveRunsPerTenant: e.MAX_ACTIVE_BULK_RUNS_PER_TENANT,
      /** Runs not yet ended all tenants together may have. */
      maxActiveRuns: e.MAX_ACTIVE_BULK_RUNS,
      /** The largest Parquet footer decoded; a larger one fails its run, named. */
      parquetFooterMaxBytes: e.PARQUET_FOOTER_MAX_BYTES,
    };
  });

/**
 * The scaler (infra/scaler): how it ticks and the policy's settings. The controller, the CLI's
 * simulator and the dashboard's are given these by their composition roots instead of holding
 * their own (SCALER_DEFAULTS where nothing is configured).
 */
const scaler = z
  .object({
    POOL_PROVIDER: z.enum(POOL_PROVIDERS).default('local'),
    K8S_NAMESPACE: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
      .default('default'),
    SCALER_TICK_MS: int(100).default(2_000),
    SLO_QUEUE_WAIT_MS: int(1).default(2_000),
    COLD_START_DEFAULT_MS: int(0).default(60_000),
    // The forecaster's shortest level half-life (2 minutes, forecast.ts): a surplus must outlast
    // the noise that made it before workers go, or a short cold start's lifetime (below) drains and
    // relaunches for the same swing. Longer holds cost more than they save (docs/SIMULATOR.md).
    SCALE_DOWN_STABILIZATION_MS: int(0).default(120_000),
    // The SLO sizes the pool (infra/scaler/policy.ts); 1 adds no utilisation cap on top of it.
    TARGET_UTILIZATION: z.coerce.number().gt(0).max(1).default(1),
    // A launched worker is kept at least one cold start after it was last wanted: holding an idle
    // worker for as long as a relaunch takes costs what relaunching it does, so this ski-rental
    // rule is within 2× of the best hold in hindsight. Two cold starts (the earlier default) held
    // every noise-driven launch for twice that and cost 5–10 % more on the shared traces for fewer
    // cold starts than the SLO needed (docs/SIMULATOR.md, walk-forward).
    MIN_LIFETIME_COLD_STARTS: z.coerce.number().min(0).max(100).default(1),
    // The share of jobs whose queue wait must stay within SLO_QUEUE_WAIT_MS: what the closed-loop
    // headroom (infra/scaler/slo-control.ts) steers to, and what the self-tuning portfolio's
    // candidates must meet on the replayed window to be adopted (issue 28).
    SCALER_SLO_TARGET: z.coerce.number().gt(0.5).lt(1).default(0.99),
    // Self-tuning from counterfactual replays of each deployment's recent window (issue 28): the
    // live scaler (on a worker thread) and `warmpool simulate` alike. Off by default while the
    // bank of random worlds (docs/SIMULATOR.md) has not shown it wins there.
    SCALER_SELF_TUNING: bool.default(false),
    // How often each deployment's recent window is replayed through the portfolio. The choice
    // holds until the next one; five minutes is short against the hours a window spans.
    SCALER_RETUNE_INTERVAL_MS: int(10_000).default(300_000),
    // CPU one retune may spend (its candidates replay cheapest first and stop there).
    SCALER_TUNING_CPU_MS: int(50).default(2_000),
  })
  .transform((e) => ({
    provider: e.POOL_PROVIDER,
    /** Namespace of the workers' Deployments (POOL_PROVIDER=kubernetes). */
    k8sNamespace: e.K8S_NAMESPACE,
    tickMs: e.SCALER_TICK_MS,
    sloQueueWaitMs: e.SLO_QUEUE_WAIT_MS,
    /** Cold-start time assumed until a worker's is measured. */
    coldStartDefaultMs: e.COLD_START_DEFAULT_MS,
    scaleDownStabilizationMs: e.SCALE_DOWN_STABILIZATION_MS,
    /** A cap on planned utilisation on top of the SLO sizing (1: none). */
    targetUtilization: e.TARGET_UTILIZATION,
    /** A launched worker is kept at least this many cold starts (no launch-then-drain within it). */
    minLifetimeColdStarts: e.MIN_LIFETIME_COLD_STARTS,
    /** The share of jobs to keep within the SLO (closed-loop headroom, the portfolio's bar). */
    sloTarget: e.SCALER_SLO_TARGET,
    /** Whether each deployment's policy is chosen by replaying its recent traffic (issue 28). */
    selfTuning: e.SCALER_SELF_TUNING,
    retuneIntervalMs: e.SCALER_RETUNE_INTERVAL_MS,
    tuningCpuMs: e.SCALER_TUNING_CPU_MS,
  }));

/** The canary guard (infra/canary): when a canary version's share is taken back to 0. */
const canary = z
  .object({
    CANARY_ENABLED: bool.default(true),
    CANARY_WINDOW_MS: int(1000).default(120_000),
    CANARY_MAX_ERROR_RATE_DELTA: z.coerce.number().min(0).max(1).default(0.05),
    CANARY_MAX_LATENCY_RATIO: z.coerce.number().min(1).default(1.5),
    CANARY_MIN_REQUESTS: int(1).default(50),
    CANARY_SUSTAIN_MS: int(0).default(60_000),
    CANARY_LATENCY_FLOOR_MS: z.coerce.number().min(0).default(10),
    CANARY_TICK_MS: int(100).default(5_000),
  })
  .transform((e, ctx) => {
    if (e.CANARY_SUSTAIN_MS >= e.CANARY_WINDOW_MS) return refuse(ctx, 'CANARY_SUSTAIN_MS: must be shorter than CANARY_WINDOW_MS');
    if (e.CANARY_TICK_MS >= Math.max(e.CANARY_SUSTAIN_MS, 1)) return refuse(ctx, 'CANARY_TICK_MS: must be shorter than CANARY_SUSTAIN_MS');
    return {
      /** Whether the dispatcher process runs the guard. */
      enabled: e.CANARY_ENABLED,
      /** Length of the sliding window the figures cover. */
      windowMs: e.CANARY_WINDOW_MS,
      /** Allowed excess of the canary's error rate over the stable's, absolute (0.05 = 5 points). */
      maxErrorRateDelta: e.CANARY_MAX_ERROR_RATE_DELTA,
      /** Allowed ratio of the canary's p95 latency to the stable's. */
      maxLatencyRatio: e.CANARY_MAX_LATENCY_RATIO,
      /** Outcomes each version needs in the window before it is judged at all. */
      minRequests: e.CANARY_MIN_REQUESTS,
      /** How long a breach must persist before the canary is rolled back. */
      sustainMs: e.CANARY_SUSTAIN_MS,
      /**
       * Both p95s are raised to at least this before the ratio: at a few ms, histogram resolution
       * and scheduling noise make ratios meaningless (2 ms vs 1 ms is not "twice as slow").
       */
      latencyFloorMs: e.CANARY_LATENCY_FLOOR_MS,
      /** How often the guard looks. */
      tickMs: e.CANARY_TICK_MS,
    };
  });

const webhooks = z
  .object({
    WEBHOOK_ALLOWED_PRIVATE_HOSTS: z.string().default(''),
    WEBHOOK_TIMEOUT_MS: int(100, 120_000).default(10_000),
    // Attempts one dispatcher has in flight, in all and per tenant (one tenant's hanging receivers
    // hold at most its own share).
    WEBHOOK_CONCURRENCY: int(1, 10_000).default(16),
    WEBHOOK_CONCURRENCY_PER_TENANT: int(1, 10_000).default(4),
    /** Delays before each retry, after the first attempt; default ≈ a day, Svix-like. */
    WEBHOOK_RETRY_SCHEDULE_MS: z
      .string()
      .default('5000,300000,1800000,7200000,18000000,36000000,36000000')
      .refine((v) => v.split(',').every((p) => /^\d+$/.test(p.trim())), 'a comma-separated list of milliseconds'),
  })
  .transform((e, ctx) => {
    if (e.WEBHOOK_CONCURRENCY_PER_TENANT > e.WEBHOOK_CONCURRENCY) {
      return refuse(ctx, 'WEBHOOK_CONCURRENCY_PER_TENANT: must not be more than WEBHOOK_CONCURRENCY');
    }
    return {
      /** Host names (not addresses) webhooks may reach even when they resolve to private ranges. */
      allowedPrivateHosts: list(e.WEBHOOK_ALLOWED_PRIVATE_HOSTS).map((h) => h.toLowerCase()),
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      retryScheduleMs: e.WEBHOOK_RETRY_SCHEDULE_MS.split(',').map((p) => Number(p.trim())),
      /** Attempts in flight at once, in all and per tenant. */
      concurrency: e.WEBHOOK_CONCURRENCY,
      concurrencyPerTenant: e.WEBHOOK_CONCURRENCY_PER_TENANT,
    };
  });

const worker = z
  .object({
    EXECUTION_PROVIDERS: z.string().default('cpu'),
    INTRA_OP_THREADS: int(0, 1024).default(0),
    SESSIONS_PER_WORKER: int(0, 64).default(0),
    MODEL_CACHE_DIR: z.string().default(path.join(os.homedir(), '.cache', 'warmpool', 'models')),
    BATCH_MAX_ROWS: int(0).default(0),
    BATCH_MAX_WAIT_MS: z.coerce.number().min(0).max(10_000).default(5),
    WARMUP_LATENCY_BUDGET_MS: z.coerce.number().positive().default(250),
    WARMUP_ITERATIONS: int(1, 1000).default(20),
    // With the final load and pass at the chosen setting, a PaddleOCR-class CNN (27,648 floats a
    // row, ~1,000 rows/s on 2 cores) is ready in under 2 s, where measuring every size took 3.7–7 s.
    WARMUP_BUDGET_MS: int(0, 600_000).default(1_500),
    WORKER_CONCURRENCY: int(0, 100_000).default(0),
    RESULT_CACHE_TTL_S: int(1).default(3_600),
    RESULT_CACHE_MAX_BYTES: int(0).default(1_048_576),
    LOCK_DURATION_MS: int(1000).default(30_000),
    STALLED_INTERVAL_MS: int(1000).default(30_000),
    HEARTBEAT_INTERVAL_MS: int(100).default(2_000),
    HEARTBEAT_TTL_MS: int(500).default(10_000),
    WORKER_HEALTH_PORT: int(0, 65535).default(0),
    // Keep it under the orchestrator's grace period (deploy/k8s/worker.yaml: 300 s).
    DRAIN_LIMIT_MS: int(1_000, 3_600_000).default(DRAIN_LIMIT_MS),
  })
  .transform((e, ctx) => {
    const providers = list(e.EXECUTION_PROVIDERS).map((p) => p.toLowerCase());
    const unknown = providers.find((p) => !(EXECUTION_PROVIDER_NAMES as readonly string[]).includes(p));
    if (unknown !== undefined) {
      return refuse(ctx, `EXECUTION_PROVIDERS: unknown provider "${unknown}" (known: ${EXECUTION_PROVIDER_NAMES.join(', ')})`);
    }
    if (e.HEARTBEAT_TTL_MS <= e.HEARTBEAT_INTERVAL_MS) return refuse(ctx, 'HEARTBEAT_TTL_MS: must be longer than HEARTBEAT_INTERVAL_MS');
    return {
      executionProviders: providers.length > 0 ? providers : ['cpu'],
      /** 0 = let warm-up choose among the host's options. */
      intraOpThreads: e.INTRA_OP_THREADS,
      /** 0 = one a core (at most 4) for a model that runs one row a pass and gains nothing from intra-op threads, else 1. */
      sessions: e.SESSIONS_PER_WORKER,
      modelCacheDir: e.MODEL_CACHE_DIR,
      /** 0 = the manifest's maxBatch. */
      batchMaxRows: e.BATCH_MAX_ROWS,
      batchMaxWaitMs: e.BATCH_MAX_WAIT_MS,
      warmupLatencyBudgetMs: e.WARMUP_LATENCY_BUDGET_MS,
      /** The most timed passes per batch size; a size stops sooner once its median is steady (worker/warmup-bound.ts). */
      warmupIterations: e.WARMUP_ITERATIONS,
      /** What a warm-up from an empty profile may spend measuring, loads included; 0 = no bound (every size WARMUP_ITERATIONS passes). */
      warmupBudgetMs: e.WARMUP_BUDGET_MS,
      /** Jobs held in flight; 0 = twice the batch size, enough to keep batches full. */
      concurrency: e.WORKER_CONCURRENCY,
      /** Successful results are cached this long for identical requests of the same tenant. */
      resultCacheTtlS: e.RESULT_CACHE_TTL_S,
      /** Larger results are not cached (BullMQ keeps a copy already). */
      resultCacheMaxBytes: e.RESULT_CACHE_MAX_BYTES,
      lockDurationMs: e.LOCK_DURATION_MS,
      stalledIntervalMs: e.STALLED_INTERVAL_MS,
      heartbeatIntervalMs: e.HEARTBEAT_INTERVAL_MS,
      heartbeatTtlMs: e.HEARTBEAT_TTL_MS,
      /** The worker's /live, /ready and /drain endpoint (worker/health-server.ts); 0 = none. */
      healthPort: e.WORKER_HEALTH_PORT,
      /** On SIGTERM a worker finishes what it holds for at most this long, then exits forced (its jobs go back to the queue). */
      drainLimitMs: e.DRAIN_LIMIT_MS,
    };
  });

const logLevel = z
  .object({ LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info') })
  .transform((e) => e.LOG_LEVEL);

/** `Config`'s sections in order, each parsed from the whole environment (it reads its own variables). */
export const CONFIG_SECTIONS = { redisUrl, queuePrefix, s3, api, jobs, rateLimit, bulk, scaler, canary, webhooks, worker, logLevel };

/** Every variable the sections read, in their order: what README's table and the deploy manifests are held to. */
export const CONFIG_VARIABLES: readonly string[] = Object.values(CONFIG_SECTIONS).flatMap((section) => Object.keys(section.in.shape));

const configSchema = z.preprocess(
  (env) => Object.fromEntries(Object.keys(CONFIG_SECTIONS).map((section) => [section, env])),
  z.object(CONFIG_SECTIONS),
);

export type Config = z.output<typeof configSchema>;

/** What the scaler decides with, apart from where its workers run: the part a simulation replays. */
export type ScalerTuning = Omit<Config['scaler'], 'provider' | 'k8sNamespace'>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = configSchema.safeParse(env);
  if (!parsed.success) throw configError(parsed.error.issues, env);
  return parsed.data;
}

/** The first issue as `NAME: message (got "value")`, a value that does not parse before a failed check. */
function configError(issues: readonly z.core.$ZodIssue[], env: NodeJS.ProcessEnv): ConfigError {
  const issue = issues.find((i) => !isFailedCheck(i)) ?? issues[0];
  if (issue && isFailedCheck(issue)) return new ConfigError('invalid_config', issue.message);
  const name = String(issue?.path.at(-1) ?? 'environment');
  const got = SECRET_VARIABLES.has(name) ? 'a value not shown' : JSON.stringify(env[name] ?? null);
  return new ConfigError('invalid_config', `${name}: ${issue?.message ?? 'invalid'} (got ${got})`);
}

/** The config of an empty environment: where the defaults below come from. */
const DEFAULTS = loadConfig({});

/** The scaler's defaults (its variables' `.default()`s), for code given no config: tests, the policy's fallbacks. */
export const SCALER_DEFAULTS: Readonly<Config['scaler']> = Object.freeze(DEFAULTS.scaler);

/** The canary guard's defaults, for a guard or status reader given no policy. */
export const CANARY_DEFAULTS: Readonly<Config['canary']> = Object.freeze(DEFAULTS.canary);

/**
 * `warmpool simulate`'s scaler where its flags say nothing: an offline study, not the live
 * scaler. The CLI has always replayed a 5 s tick against a 30 s SLO (docs/SIMULATOR.md and the
 * figures in docs/simulator/ were made so); everything else is SCALER_DEFAULTS. The dashboard's
 * simulator replays the live settings (`Config['scaler']`) instead.
 */
export const SIMULATE_DEFAULTS: Readonly<ScalerTuning> = Object.freeze({ ...SCALER_DEFAULTS, tickMs: 5_000, sloQueueWaitMs: 30_000 });

/** The API's limits on requests that hold resources for long (the dashboard's simulation, job event streams), for an app given none. */
export const API_LIMIT_DEFAULTS: Readonly<Pick<Config['api'], 'simulation' | 'sse'>> = {
  simulation: DEFAULTS.api.simulation,
  sse: DEFAULTS.api.sse,
};
