/**
 * zod schemas of every request and response the HTTP API has, written to match what the routes
 * and use cases actually accept and answer (most validation there is by hand, for precise
 * messages; these mirror it). The OpenAPI document (document.ts) is generated from them, and
 * test/openapi.test.ts checks real responses against them, so a route that changes shape
 * without its schema fails a test.
 *
 * Objects are open (unknown fields allowed) wherever the server ignores unknown fields;
 * `strictObject` where it refuses them (the top level of an inference or job request: 400
 * `unknown_field`; the deployment bodies, a job's `webhook`). Tensors and `parameters` stay open.
 */
import { z } from 'zod';
import { BULK_FORMATS, BULK_RUN_STATUSES, BULK_WEBHOOK_EVENTS } from '../../infra/contracts/bulk.ts';
import { PRIORITIES } from '../../infra/contracts/job.ts';
import { MODEL_NAME_PATTERN, VERSION_PATTERN } from '../../infra/contracts/manifest.ts';
import { DATATYPES } from '../../infra/contracts/oip.ts';
import { POOL_NAME_PATTERN, POOL_NAME_RULE } from '../../infra/contracts/shared-pool.ts';
import { WEBHOOK_EVENTS } from '../../infra/contracts/webhook.ts';
import { WORKER_STATES } from '../../infra/contracts/worker-state.ts';
import { WAIT_CODES } from '../use-cases/wait-reason.ts';
import { DELIVERY_STATES } from '../webhooks/delivery-store.ts';

// ---- Shared pieces ----------------------------------------------------------------------------

const isoTime = z.string().describe('ISO 8601 time, UTC');
const nonNegativeInt = z.number().int().nonnegative();

export const ErrorBody = z
  .object({
    error: z
      .object({
        code: z.string().describe('Stable machine-readable code, e.g. `job_not_found`'),
        message: z.string().describe('What went wrong, for a person'),
        job_id: z.string().optional().describe('On sync inference 500 and 504: the job to poll at `/v1/jobs/{id}`'),
        retry_after_s: z.number().int().optional().describe('On 503 `backlog_full`: the same as the Retry-After header'),
      })
      .catchall(z.unknown()),
  })
  .describe('Every error: `{"error": {"code", "message"}}`');

export const Datatype = z.enum(DATATYPES).describe('Open Inference Protocol tensor datatype');

/** Nested row-major arrays are accepted on input (and flattened); outputs are always flat. */
export type TensorDataValue = number | string | boolean | TensorDataValue[];
export const TensorData: z.ZodType<TensorDataValue[]> = z
  .array(z.union([z.number(), z.string(), z.boolean(), z.lazy(() => TensorData)]))
  .describe('Tensor elements, row-major: flat, or nested by dimension');

const Parameters = z.record(z.string(), z.unknown()).describe('Free-form key/value parameters');

export const ModelName = z.string().regex(MODEL_NAME_PATTERN).describe('Model name');
export const VersionName = z.string().regex(VERSION_PATTERN).describe('Version name, e.g. `1` or `2024-05-01`');

// ---- Open Inference Protocol (KServe v2) ------------------------------------------------------

export const RequestInput = z
  .object({
    name: z.string().describe('An input of the model (see its metadata)'),
    shape: z
      .tuple([z.number().int().min(1).describe('rows (the batch axis)')], nonNegativeInt)
      .describe('Rank and fixed axes must match the model; the first axis is rows, the same for every input'),
    datatype: Datatype.describe("Must equal the model input's datatype"),
    data: TensorData.describe('Exactly product(shape) elements of the datatype (INT64/UINT64 beyond 2^53 as decimal strings)'),
    parameters: Parameters.optional(),
  })
  .describe('$request_input: one input tensor');

export const RequestOutput = z
  .object({
    name: z.string().describe('An output of the model'),
    parameters: z
      .unknown()
      .optional()
      .describe(
        'Per-output parameters (kept when an object, otherwise ignored). Sync inference: `binary_data: true` returns this output as binary tensor data, `false` keeps it JSON under `binary_data_output`',
      ),
  })
  .describe('$request_output: an output to return');

export const InferRequest = z
  .strictObject({
    id: z.string().optional().describe('Echoed back as the response `id`'),
    model_name: z.string().optional().describe('Taken and not read (the model is the path’s): the binary extension’s example sends it'),
    model_version: z.string().optional().describe('Taken and not read (the version is the path’s, or `version`)'),
    parameters: Parameters.optional(),
    inputs: z.array(RequestInput).min(1).describe('Every input of the model, once'),
    outputs: z.array(RequestOutput).optional().describe('Outputs to return; all when absent'),
  })
  .describe('$inference_request (Open Inference Protocol)');

export const WebhookSpec = z
  .strictObject({
    url: z
      .string()
      .min(1)
      .max(2048)
      .describe('http(s) URL; private, loopback and metadata addresses are refused (422) unless allowed by the server'),
    events: z
      .array(z.enum(WEBHOOK_EVENTS))
      .min(1)
      .optional()
      .describe(
        'Default: job.succeeded, job.failed. `job.failed` comes for every end that is not a success, whatever ended it: ' +
          'a worker (`data.status` failed), the deadline passing while queued (error `deadline_exceeded`), a cancel ' +
          '(`data.status` and error code `canceled`)',
      ),
  })
  .describe('Where to POST signed (Standard Webhooks) job events');

/** Options every submission may carry, sync or async (api/use-cases/submit-job.ts). */
const submissionOptions = {
  version: VersionName.optional().describe('Run on this version instead of one drawn by the deployment split'),
  timeoutMs: z
    .number()
    .int()
    .min(1)
    .max(86_400_000)
    .optional()
    .describe('The job must start within this many ms, or it ends failed with `deadline_exceeded`'),
  webhook: WebhookSpec.nullable().optional(),
  degradable: z
    .boolean()
    .optional()
    .describe("When the backlog is full: go to the deployment's fallback model, else queue at low priority, instead of 503"),
  cache: z
    .boolean()
    .optional()
    .describe('Default true: an identical earlier request may be answered from the result cache (never with a webhook)'),
};

/** The request parameters sync inference reads (api/use-cases/infer-sync.ts, infra/contracts/oip-binary.ts); others pass through. */
const SyncParameters = z
  .object({
    priority: z
      .union([z.enum(Object.keys(PRIORITIES) as [keyof typeof PRIORITIES]), z.number().int().nonnegative()])
      .optional()
      .describe('Queue priority: a name, or a Triton-style level (1 high, 2 normal, 3 and above low; 0 the default). Default high'),
    binary_data_output: z
      .boolean()
      .optional()
      .describe("`true`: every output comes back as binary tensor data (an output's own `binary_data: false` keeps it JSON)"),
  })
  .catchall(z.unknown())
  .describe('Free-form key/value parameters; sync inference reads `priority` and `binary_data_output`');

export const SyncInferRequest = InferRequest.extend({ ...submissionOptions, parameters: SyncParameters.optional() }).describe(
  '$inference_request, plus warmpool options (`version`, `timeoutMs`, `webhook`, `degradable`, `cache`)',
);

export const JobSubmission = InferRequest.extend({
  ...submissionOptions,
  priority: z.enum(['high', 'normal', 'low']).optional().describe('Default normal'),
}).describe('An Open Inference Protocol request plus job options');

export const ResponseOutput = z
  .object({
    name: z.string(),
    shape: z.array(nonNegativeInt),
    datatype: Datatype,
    parameters: Parameters.optional(),
    data: z.array(z.union([z.number(), z.string(), z.boolean()])).describe('Flat, row-major'),
  })
  .describe('$response_output: one output tensor');

export const InferResponse = z
  .object({
    model_name: z.string(),
    model_version: z.string(),
    id: z.string().describe("The request's `id`, or the job id when the request had none"),
    parameters: Parameters.optional(),
    outputs: z.array(ResponseOutput),
  })
  .describe('$inference_response (Open Inference Protocol)');

// ---- Binary tensor data extension (infra/contracts/oip-binary.ts) ---------------------------

/** The byte count a binary tensor carries in `parameters.binary_data_size`. */
const binaryParameters = z
  .object({ binary_data_size: nonNegativeInt.describe('Bytes of this tensor in the body after the JSON header') })
  .catchall(z.unknown());

export const BinaryRequestInput = RequestInput.omit({ data: true })
  .extend({ parameters: binaryParameters })
  .describe(
    'An input sent as binary tensor data: no `data`; its `binary_data_size` bytes follow the JSON header, in input order. ' +
      'Elements little-endian, row-major; BOOL one byte each; FP16 as IEEE half bits; BYTES as a 4-byte little-endian length, then the bytes, per element',
  );

/** The JSON header's inputs: each in JSON (`data`) or binary (`binary_data_size`). */
const headerInputs = z
  .array(z.union([RequestInput, BinaryRequestInput]))
  .min(1)
  .describe('Every input of the model, once');

export const BinaryResponseOutput = ResponseOutput.omit({ data: true })
  .extend({ parameters: binaryParameters })
  .describe('An output answered as binary tensor data: no `data`; its `binary_data_size` bytes follow the JSON header, in output order');

/** A binary answer's JSON header's outputs: the binary ones carry `binary_data_size`, the others `data`. */
const headerOutputs = z.array(z.union([ResponseOutput, BinaryResponseOutput]));

export const SyncInferBinaryHeader = SyncInferRequest.extend({ inputs: headerInputs }).describe(
  'The JSON header of a binary sync inference request: the request, its binary inputs carrying `binary_data_size` instead of `data`',
);

export const JobSubmissionBinaryHeader = JobSubmission.extend({ inputs: headerInputs }).describe(
  'The JSON header of a binary job submission: the submission, its binary inputs carrying `binary_data_size` instead of `data`',
);

export const InferResponseBinaryHeader = InferResponse.extend({ outputs: headerOutputs }).describe(
  'The JSON header of a binary inference response: the response, its binary outputs carrying `binary_data_size` instead of `data`',
);

const MetadataTensor = z.object({
  name: z.string(),
  datatype: Datatype,
  shape: z.array(z.number().int()).describe('-1 marks a dynamic axis; the first is always the batch axis'),
});

export const ModelMetadata = z
  .object({
    name: z.string(),
    versions: z.array(z.string()).describe('Every version in the registry'),
    platform: z.string().describe('`onnxruntime_onnx`'),
    inputs: z.array(MetadataTensor),
    outputs: z.array(MetadataTensor),
  })
  .describe('$metadata_model_response');

export const ModelReady = z.object({ name: z.string(), version: z.string(), ready: z.literal(true) });
export const ServerLive = z.object({ live: z.literal(true) });
export const ServerMetadata = z.object({
  name: z.string(),
  version: z.string(),
  extensions: z.array(z.string()).describe('Protocol extensions served: `binary_tensor_data`'),
});
export const ServerReady = z.object({ ready: z.boolean() });
export const ServerIndex = z
  .object({
    name: z.literal('warmpool'),
    version: z.string(),
    docs: z.string().describe('This API reference, as a page'),
    openapi: z.string().describe('The OpenAPI document'),
    dashboard: z.string().describe('The dashboard'),
    health: z.string().describe('Readiness'),
  })
  .describe('Where things are');

// ---- Jobs -------------------------------------------------------------------------------------

export const JobStatus = z.enum(['queued', 'running', 'succeeded', 'failed', 'canceled']);

export const JobAccepted = z.object({
  id: z.string(),
  status: JobStatus.describe(
    '`queued`; `succeeded` when the result cache answered (then `cached` is true and GET has the outputs); for a replay ' +
      '(`Idempotent-Replayed: true`), the job’s status now',
  ),
  cached: z.literal(true).optional(),
  model: z.string(),
  version: z.string().describe('The version the job runs on'),
  createdAt: isoTime,
  links: z.object({ self: z.string(), events: z.string() }),
});

export const JobTimings = z.object({
  queueMs: z.number().nonnegative().describe('Submit until a worker took it'),
  inferMs: z.number().nonnegative().describe('Time in forward passes for its rows'),
  batchRows: nonNegativeInt.describe('Rows in the forward pass that carried it'),
});

export const JobResource = z
  .object({
    id: z.string(),
    model: z.string(),
    version: z.string(),
    status: JobStatus,
    outputs: z.array(ResponseOutput).optional().describe('When succeeded'),
    error: z
      .object({ code: z.string(), message: z.string() })
      .optional()
      .describe(
        'When failed or canceled. Codes: invalid_input, inference_failed, deadline_exceeded, canceled, worker_crashed (two workers died holding it; no third runs it)',
      ),
    createdAt: isoTime,
    startedAt: isoTime.optional(),
    finishedAt: isoTime.optional(),
    timings: JobTimings.optional().describe('When succeeded'),
    cached: z.literal(true).optional().describe('Answered from the result cache: no model ran (timings 0)'),
    waiting: z
      .object({
        code: z.enum(WAIT_CODES),
        message: z.string(),
        phase: z.enum(WORKER_STATES).optional().describe('worker_starting: the phase of the starting worker furthest along'),
        expectedInMs: z
          .number()
          .nonnegative()
          .optional()
          .describe("When a worker is expected to serve, from the deployment's measured cold starts; absent before any was measured"),
        queued: nonNegativeInt.optional().describe('busy: the jobs queued for this version besides this one'),
      })
      .optional()
      .describe(
        'When queued: why it waits (no_worker: none yet, the scaler starts one; worker_starting: in which phase; standby; busy). ' +
          'Its event stream sends the `queued` event again when this changes',
      ),
    outputsOmitted: z
      .object({ elements: nonNegativeInt, message: z.string() })
      .optional()
      .describe('In an event or a job webhook only, instead of `outputs` past MAX_JSON_OUTPUT_ELEMENTS: how many, how to read them'),
  })
  .describe('A job as GET /v1/jobs/{id} shows it');

export const JobResourceBinaryHeader = JobResource.extend({ outputs: headerOutputs.optional().describe('When succeeded') }).describe(
  'The JSON header of a job read as binary tensor data: the job, its outputs carrying `binary_data_size` instead of `data`',
);

export const JobReadQuery = z.object({
  binary_data_output: z
    .enum(['true', '1', 'false', '0'])
    .optional()
    .describe('`true` or `1`: answer as binary tensor data, every output binary (as `Accept: application/octet-stream` does)'),
});

export const JobId = z.string().describe('Job id (`job_…`); another tenant’s job is a 404 like an unknown one');

export const InferenceHeaderContentLength = z
  .number()
  .int()
  .positive()
  .describe(
    'Bytes of the JSON inference header at the start of the body. Present: the body is binary tensor data, whatever its Content-Type; it must be in (0, body length] (else 400 `invalid_header_length`)',
  );

export const ContentEncoding = z
  .enum(['gzip', 'x-gzip', 'deflate', 'identity'])
  .describe(
    'The body is compressed (one coding). The body limit holds for the decompressed bytes (413 `body_too_large`); bytes that do not decompress are a 400 `malformed_body`, another coding a 415 `unsupported_content_encoding`',
  );

export const IdempotencyKey = z
  .string()
  .regex(/^[\x20-\x7e]{1,255}$/)
  .describe('1–255 printable ASCII characters; the same key and body return the same job for 24 h');

export const ModelList = z.object({
  models: z.array(
    z.object({
      name: z.string(),
      versions: z.array(z.string()),
      deployedVersion: z.string().nullable().describe('The stable deployed version; null when not deployed'),
    }),
  ),
});

const EdgeCatalogTensor = MetadataTensor.extend({
  batchAxis: z
    .union([z.number().int().min(1), z.literal('none')])
    .optional()
    .describe('Where the model keeps the rows; absent: axis 0'),
});

export const EdgeCatalog = z
  .object({
    models: z.array(
      z.object({
        name: z.string(),
        versions: z.array(z.string()).describe('Every version in the registry'),
        serving: z
          .array(z.object({ version: z.string(), inputs: z.array(EdgeCatalogTensor), outputs: z.array(EdgeCatalogTensor) }))
          .describe('The versions an unversioned request may run on (the traffic split, else the latest), with their specs'),
      }),
    ),
    limits: z.object({
      bodyLimitBytes: z.number().int(),
      maxRows: z.number().int().optional(),
      maxElements: z.number().int().optional(),
      maxBytesElements: z.number().int().optional(),
    }),
    ttlS: z.number().int().describe('How long an edge may answer from this document'),
  })
  .describe('What an edge gateway validates requests against before it forwards them');

// ---- Deployments ------------------------------------------------------------------------------

const VersionWeight = z.object({ version: z.string(), weight: z.number().int().min(0).max(100) });

export const Fallback = z
  .strictObject({
    model: z.string().describe('Another model, or a version of this one the deployment does not serve'),
    version: z.string().optional().describe("Absent: the fallback's deployed version, else its latest"),
  })
  .describe('Where `degradable` requests go while the backlog is over `backlogMax`');

export const Deployment = z
  .object({
    model: z.string(),
    version: z.string().describe('The stable version: the highest weight'),
    versions: z.array(VersionWeight).describe('Traffic split; weights sum to 100'),
    min: nonNegativeInt,
    max: nonNegativeInt,
    standby: nonNegativeInt,
    policy: z.record(z.string(), z.unknown()).optional(),
    backlogMax: z.number().int().positive().optional(),
    fallback: Fallback.optional(),
    pool: z
      .string()
      .optional()
      .describe('The shared pool whose workers serve the model; absent: a pool of its own, sized by min/max/standby'),
    revision: z.number().int().positive(),
    updatedAt: isoTime,
    restoredFrom: z.number().int().optional().describe('Set by a rollback: the revision restored'),
  })
  .describe('A deployment revision');

// ---- Pool (the scaler's view) -----------------------------------------------------------------

/** A shared pool worker's totals since it began (HeartbeatPayload.poolCounts). */
const PoolCounts = z.object({
  loads: nonNegativeInt,
  evictions: nonNegativeInt,
  jobsHit: nonNegativeInt,
  jobsMiss: nonNegativeInt,
});

const PoolWorker = z.object({
  id: z.string().describe('The worker id for admin tenants; for other tenants a stable alias (`w-…`)'),
  version: z.string(),
  state: z.enum(['launching', 'downloading', 'loading', 'warming', 'standby', 'active', 'draining', 'stopped', 'failed']),
  pid: z.number().int().optional().describe('Admin tenants (ADMIN_TENANTS) only'),
  host: z.string().optional().describe('Admin tenants (ADMIN_TENANTS) only'),
  rowsPerSec: z.number().nonnegative(),
  since: z.number().describe('Epoch ms the worker entered its state (or started)'),
});

const PoolBacklog = z.object({
  waiting: nonNegativeInt,
  prioritized: nonNegativeInt,
  delayed: nonNegativeInt,
  active: nonNegativeInt,
  oldestAgeMs: z.number().nonnegative(),
  rowsPerJob: z.number().min(1).optional().describe('Rows a queued job carries on average, as the APIs lately wrote them; absent: 1'),
});

const ActiveSetBy = z.enum(['slo-sizing', 'backlog', 'stabilisation', 'min-lifetime', 'min', 'max']);

/** Mirrors DecisionTerms (infra/contracts/pool.ts) and PoolTerms (api/use-cases/pool-terms.ts). */
const PoolTerms = z
  .object({
    at: z.number().describe('Epoch ms of the decision they come from'),
    shadow: z.boolean(),
    forecast: z.object({
      ratePerSec: z.number().nonnegative().describe('The forecast mean, rows/s'),
      upperRatePerSec: z.number().nonnegative().nullable().describe('Its upper quantile, rows/s; null where the forecaster gave none'),
      upperQuantile: z.number().gt(0).lt(1).nullable().describe('Which quantile, e.g. 0.9'),
      dispersion: z.number().nullable().describe('Variance over mean of arrivals (1: Poisson)'),
      burstRatePerSec: z.number().nonnegative().describe('The recent peak rate over the horizon, rows/s'),
      burstsBySpan: z
        .array(z.object({ spanS: z.number().positive(), ratePerSec: z.number().nonnegative() }))
        .describe('Recent peak rates by how long they lasted, shortest first: standby covers the worst a cold start cannot absorb'),
      horizonS: z.number(),
      method: z.string(),
    }),
    sloQueueWaitMs: z.number().positive(),
    policy: z
      .object({
        upperRatePerSec: z.number().nonnegative().describe('The rate the SLO sizing planned for (upper quantile plus late bulk runs)'),
        quantile: z.number(),
        perWorkerRatePerSec: z.number().nonnegative(),
        measuredRate: z.boolean().describe('false: no rate known, a low one assumed and scale-down held'),
        coldStartMs: z.number().nonnegative(),
        sloActive: nonNegativeInt.describe('Active workers whose queue wait stays within the SLO'),
        backlogActive: nonNegativeInt.describe('Active workers the backlog asks for'),
        burstStandby: nonNegativeInt.describe('Standby for the burst a cold start cannot absorb'),
        stabilisedActive: nonNegativeInt.describe('Active held by the scale-down window'),
        heldPool: nonNegativeInt.describe('The pool total held for the minimum lifetime'),
        minLifetimeMs: z
          .number()
          .nonnegative()
          .describe('How long the pool holds a surplus: the minimum lifetime, or the measured hold when longer'),
        activeSetBy: ActiveSetBy,
        standbySetBy: z.enum(['setting', 'burst', 'max']),
        sloFactor: z
          .number()
          .positive()
          .describe(
            "The closed-loop factor on sized capacity, moved by the policy's measured misses and forecast errors (times 1 + capacityMargin)",
          ),
        holdWhy: z.string().describe('Why that hold: the lifetime, or the measured drain-to-relaunch gaps'),
      })
      .nullable()
      .describe("The policy's terms; null when the policy that decided gave none"),
    perWorker: z.object({
      ratePerSec: z.number().nonnegative(),
      source: z.enum(['measured', 'warm-up', 'none']).describe('Measured on busy workers, the warm-up batch profile, or none yet'),
    }),
    coldStart: z.object({
      ms: z.number().nonnegative(),
      source: z.enum(['learned', 'setting']).describe("Learnt from the pool's recent starts, or the setting"),
      samples: nonNegativeInt,
    }),
    backlog: z.object({ jobs: nonNegativeInt, rowsPerJob: z.number().min(1), rows: z.number().nonnegative() }),
    tuning: z
      .object({
        at: z.number().describe('When the retune ran (epoch ms)'),
        fromMs: z.number().describe('The replayed window, [fromMs, toMs)'),
        toMs: z.number(),
        chosen: z.object({ kind: z.enum(['predictive', 'reactive', 'fixed']), name: z.string() }).passthrough(),
        previous: z.string().optional().describe('The candidate in force before'),
        why: z.string(),
        table: z.array(
          z.object({
            name: z.string(),
            kind: z.enum(['predictive', 'reactive', 'fixed']),
            cost: z.number().nonnegative().describe('Worker-seconds over the window'),
            attainment: z.number().min(0).max(1),
            coldStarts: nonNegativeInt,
            jobs: nonNegativeInt,
            met: z.boolean(),
            partial: z.boolean().optional().describe('Left out: the retune spent its CPU budget before it'),
          }),
        ),
        cpuMs: z.number().nonnegative(),
      })
      .nullable()
      .describe(
        'The self-tuning choice that decided, with its candidate table; null without SCALER_SELF_TUNING or before the first retune',
      ),
  })
  .describe("What set the latest decision's numbers, named as the policy names them");

export const PoolView = z.object({
  at: z.number(),
  deployments: z.array(
    z.object({
      model: z.string(),
      version: z.string(),
      versions: z.array(VersionWeight),
      workers: z.array(PoolWorker),
      queue: PoolBacklog,
      forecast: z.object({ ratePerSec: z.number(), horizonS: z.number(), method: z.string() }).nullable(),
      desired: z
        .object({ active: nonNegativeInt, standby: nonNegativeInt, launched: nonNegativeInt, shadow: z.boolean(), at: z.number() })
        .nullable(),
      terms: PoolTerms.nullable().describe('Null until the scaler has decided for the deployment'),
      decisions: z.array(z.record(z.string(), z.unknown())).describe("The scaler's last 20 decisions, each with all its inputs"),
    }),
  ),
  sharedPools: z
    .array(
      z.object({
        name: z.string(),
        max: nonNegativeInt,
        min: nonNegativeInt,
        standby: nonNegativeInt,
        memoryMb: z.number().positive(),
        members: z.array(z.string()).describe('The models whose deployments joined the pool'),
        workers: z.array(
          z.object({
            id: z.string().describe('The worker id for admin tenants; for other tenants a stable alias (`w-…`)'),
            state: PoolWorker.shape.state,
            pid: z.number().int().optional().describe('Admin tenants (ADMIN_TENANTS) only'),
            host: z.string().optional().describe('Admin tenants (ADMIN_TENANTS) only'),
            since: z.number(),
            memoryBudgetBytes: z.number().nonnegative().optional(),
            models: z
              .array(z.object({ model: z.string(), version: z.string(), state: z.string() }).passthrough())
              .describe('What the worker holds, or was asked to and does not (evicted, no-room, failed), each with its state'),
            counts: PoolCounts.optional().describe('Its loads, models let go and jobs finished since it began'),
          }),
        ),
        resident: nonNegativeInt.describe('Models resident over all the workers, copies counted'),
        counts: PoolCounts.extend({
          hitRatio: z
            .number()
            .min(0)
            .max(1)
            .nullable()
            .describe('Share of jobs whose model was resident when they were queued; null before any job'),
        }).describe("The workers' counts summed: what the workers up now did since each began"),
        latest: z
          .object({
            at: z.number(),
            shadow: z.boolean(),
            trigger: z.enum(['tick', 'demand']),
            workers: nonNegativeInt,
            active: nonNegativeInt,
            standby: nonNegativeInt,
            launch: nonNegativeInt,
            drain: z.array(z.string()),
            loads: z.array(z.object({ workerId: z.string(), model: z.string(), reason: z.string() })),
            evictions: z.array(z.object({ workerId: z.string(), model: z.string(), reason: z.string() })),
            reasons: z.array(z.string()),
            terms: z
              .record(z.string(), z.unknown())
              .describe(
                'The planner terms: pooled burst standby against the sum of per-model standbys, what set the worker count, per model copies and keep times',
              ),
          })
          .nullable()
          .describe('The pool controller’s latest decision; null until it has decided'),
        decisions: z.array(z.record(z.string(), z.unknown())).describe('The pool controller’s last 10 decisions, each with its inputs'),
      }),
    )
    .describe('The named shared pools (issue 31), each with its workers, what they hold and the latest decision'),
});

/** Mirrors the route's own zod body (api/routes/deployments.ts); the rules beyond shape live in infra/deployments/deployment-store.ts. */
export const DeploymentChange = z
  .strictObject({
    version: z.string().optional().describe('Shorthand for versions: [{version, weight: 100}]'),
    versions: z
      .array(z.strictObject({ version: z.string(), weight: z.number() }))
      .optional()
      .describe('1–10 versions, integer weights summing to 100'),
    min: nonNegativeInt.optional(),
    max: nonNegativeInt.optional(),
    standby: nonNegativeInt.optional(),
    policy: z.record(z.string(), z.unknown()).nullable().optional().describe('null clears'),
    backlogMax: z.number().int().positive().nullable().optional().describe('null clears'),
    fallback: Fallback.nullable().optional().describe('null clears'),
    pool: z
      .string()
      .nullable()
      .optional()
      .describe('Join this shared pool (it must exist, else 422 `pool_not_found`); null: back to a pool of its own'),
    ifRevision: nonNegativeInt.optional().describe('Apply only on top of this revision (0 = not deployed yet), else 409'),
  })
  .describe('A partial change: absent fields keep their values');

export const RollbackRequest = z.strictObject({ ifRevision: nonNegativeInt.optional() });

const WindowStats = z.object({
  requests: nonNegativeInt.describe('Outcomes in the window'),
  failures: nonNegativeInt,
  errorRate: z.number().min(0).max(1),
  latencySamples: nonNegativeInt,
  p50Ms: z.number().nullable(),
  p95Ms: z.number().nullable(),
});

const VersionSnapshot = z.object({ version: z.string(), weight: z.number(), window: WindowStats });

const Verdict = z.discriminatedUnion('state', [
  z.object({ state: z.literal('healthy') }),
  z.object({ state: z.literal('insufficient_data'), reason: z.string() }),
  z.object({ state: z.literal('failing'), since: z.number(), reasons: z.array(z.string()), rollback: z.boolean() }),
]);

export const CanaryEvent = z
  .object({
    model: z.string(),
    version: z.string().describe('The canary version acted on'),
    action: z.literal('rollback'),
    at: isoTime,
    reason: z.string(),
    revision: z.number().int().describe('The deployment revision the rollback wrote'),
    stable: VersionSnapshot,
    canary: VersionSnapshot,
  })
  .describe('An automatic canary rollback');

export const CanaryStatus = z.object({
  model: z.string(),
  events: z.array(CanaryEvent).describe('Newest first'),
  current: z
    .object({
      stable: VersionSnapshot,
      canaries: z.array(VersionSnapshot.extend({ verdict: Verdict })),
    })
    .optional()
    .describe('While the deployment splits traffic: each canary against the stable version now'),
});

export const DeploymentList = z.object({ deployments: z.array(Deployment) });

// ---- Shared pools -----------------------------------------------------------------------------

export const PoolName = z.string().regex(POOL_NAME_PATTERN).describe(`Shared pool name: ${POOL_NAME_RULE}; \`none\` is reserved`);

export const SharedPool = z
  .object({
    name: z.string(),
    max: z.number().int().positive().describe('The most workers the pool runs'),
    min: nonNegativeInt.describe('Workers kept running even when idle (≤ max)'),
    standby: nonNegativeInt.describe('Warmed workers holding no model, ready to become any member’s (≤ max)'),
    memoryMb: z.number().int().positive().describe('Per worker: the budget for resident models, MB'),
    revision: z.number().int().positive(),
    createdAt: isoTime,
    updatedAt: isoTime,
    deployments: z.array(z.string()).describe('The models whose deployments joined the pool'),
  })
  .describe('A shared pool: workers not bound to a model, each holding several');

/** Mirrors the route's own zod body (api/routes/shared-pools.ts); the rules beyond shape live in infra/contracts/shared-pool.ts. */
export const SharedPoolChange = z
  .strictObject({
    max: nonNegativeInt.optional().describe('1–10000; required for a new pool'),
    min: nonNegativeInt.optional().describe('0..max; a new pool: 1 (at most max)'),
    standby: nonNegativeInt.optional().describe('0..max; a new pool: 0'),
    memoryMb: nonNegativeInt.optional().describe('64–1048576; a new pool: 1024'),
    ifRevision: nonNegativeInt.optional().describe('Apply only on top of this revision (0 = does not exist yet), else 409'),
  })
  .describe('A partial change: absent fields keep their values');

export const SharedPoolList = z.object({ pools: z.array(SharedPool) });
export const SharedPoolDeleted = z.object({ name: z.string(), deleted: z.literal(true) });
export const DeploymentHistory = z.object({ model: z.string(), revisions: z.array(Deployment).describe('Newest first') });

// ---- Webhooks ---------------------------------------------------------------------------------

export const WebhookSecret = z.object({
  secret: z.string().describe('`whsec_…`: signs this tenant’s webhooks'),
  previous: z
    .object({ secret: z.string(), expiresAt: isoTime })
    .optional()
    .describe('After a rotation: the old secret, still signing until expiresAt'),
});

export const DeliveryState = z.enum(DELIVERY_STATES);

export const DeliveryQuery = z.object({
  status: DeliveryState.optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

export const Delivery = z.object({
  id: z.string().describe('The `webhook-id`, stable across retries'),
  event: z.enum([...WEBHOOK_EVENTS, ...BULK_WEBHOOK_EVENTS]),
  jobId: z.string().describe('The job, or for `bulk.*` events the bulk run'),
  url: z.string(),
  status: DeliveryState,
  reason: z.string().optional().describe('Why it finished unsuccessfully (`gone`, `retries_exhausted`)'),
  attempts: z.array(
    z.object({
      at: isoTime,
      status: z.number().int().optional().describe("The receiver's HTTP status"),
      error: z
        .string()
        .optional()
        .describe(
          'Why the attempt failed, as a category: `blocked_address`, `timeout`, `dns`, `connection_refused`, `connection_reset`, `unreachable`, `tls`, `invalid_response`, `http_<status>`, `connection_error`',
        ),
      durationMs: z.number().nonnegative(),
    }),
  ),
  nextAttemptAt: isoTime.nullable(),
  createdAt: isoTime,
  updatedAt: isoTime,
});

export const DeliveryList = z.object({ deliveries: z.array(Delivery).describe('Newest first') });
export const DeliveryReplayed = z.object({ id: z.string(), status: z.literal('pending') });

// ---- Bulk runs --------------------------------------------------------------------------------

const s3Url = z
  .string()
  .regex(/^s3:\/\/[^/]+(\/.*)?$/)
  .describe('`s3://bucket/prefix/`');

export const BulkRunRequest = z
  .strictObject({
    model: ModelName,
    version: VersionName.optional().describe("Absent: the deployment's serving version, fixed for the run"),
    input: s3Url.describe(
      '`s3://bucket/prefix/` inside one of your bulk locations: every object under it is read (JSONL lines `{"id", "<input>": …}`, CSV, or Parquet)',
    ),
    output: s3Url.describe(
      '`s3://bucket/prefix/` inside one of your bulk locations: `part-NNNNNN.<jsonl|csv|parquet>` per chunk, then `_manifest.json`',
    ),
    format: z.enum(BULK_FORMATS).optional().describe("Absent: from each object's extension (.jsonl/.json, .csv, .parquet)"),
    outputFormat: z.enum(BULK_FORMATS).optional().describe("The parts' format; absent: the input's"),
    columns: z
      .record(z.string(), z.array(z.string()).min(1))
      .optional()
      .describe(
        'Model input → its columns: one column holds the whole row (a list column, nested JSON arrays); several are one scalar feature each, in order. Absent: the column named like each input; for a single-input model without one, every numeric column but the id, in file order',
      ),
    idColumn: z.string().min(1).max(256).optional().describe('The id column; default `id`'),
    chunkRows: z.number().int().min(1).optional().describe('Rows per chunk (one part object each)'),
    deadline: z
      .union([z.number().int().describe('Epoch ms'), z.string().describe('ISO 8601, or `HH:MM` (the next one)')])
      .optional()
      .describe('Finish by: a run the ETA says will be late is raised to urgent priority and asks the scaler for capacity'),
    webhook: z
      .object({
        url: z.string().min(1).max(2048).describe('http(s); private, loopback and metadata addresses are refused (422) unless allowed'),
        events: z.array(z.enum(BULK_WEBHOOK_EVENTS)).min(1).optional().describe('Default: all four'),
      })
      .optional()
      .describe('Signed (Standard Webhooks) progress and completion events; `bulk.progress` at most every few seconds'),
    maxBadRows: nonNegativeInt
      .optional()
      .describe(
        "The run fails (`too_many_bad_rows`) once more malformed rows than this were seen; default: 1 % of the run's rows and at least 100. A run whose every row is bad never succeeds",
      ),
    runId: z
      .string()
      .optional()
      .describe(
        'Your id for the run, unique among your runs (another tenant may use the same id for its own): the same id with the same spec resumes it (200); with another spec it is a 409',
      ),
  })
  .describe('A bulk scoring run: S3 in, S3 out');

export const BulkRunProgress = z.object({
  rowsDone: nonNegativeInt.describe('Rows with a written part'),
  rowsTotal: nonNegativeInt.describe('Exact once the input was read to the end, estimated from bytes before'),
  rowsTotalExact: z.boolean(),
  chunksDone: nonNegativeInt,
  chunksTotal: nonNegativeInt.optional().describe('Known once the input was read to the end'),
  badRows: nonNegativeInt,
  rowsPerSecond: z
    .number()
    .nonnegative()
    .describe(
      'Recent throughput while running; once succeeded, rows ÷ the run’s duration, as its manifest says; 0 once failed or canceled',
    ),
  etaSeconds: z.number().nonnegative().optional().describe('Absent until there is a rate'),
  etaAt: isoTime.optional(),
  onTrack: z.boolean().optional().describe('With a deadline: whether the ETA is before it'),
});

export const BulkRunResource = z
  .object({
    id: z.string(),
    model: z.string(),
    version: z.string(),
    status: z.enum(BULK_RUN_STATUSES),
    input: z.string(),
    output: z.string(),
    chunkRows: z.number().int().positive(),
    deadline: isoTime.optional(),
    webhook: z.object({ url: z.string(), events: z.array(z.enum(BULK_WEBHOOK_EVENTS)) }).optional(),
    priority: z.enum(['bulk', 'urgent']).describe('`urgent` once the ETA said the deadline would be missed'),
    progress: BulkRunProgress,
    badRowSamples: z
      .array(
        z.object({
          object: z.string().describe('Input object key'),
          line: nonNegativeInt.describe('1-based line in the object (Parquet: row); 0 while not yet known (then see `byte`)'),
          byte: nonNegativeInt.optional().describe("Text inputs: the line's first byte in the object"),
          message: z.string(),
        }),
      )
      .describe('The first few malformed rows, in input order'),
    error: z.object({ code: z.string(), message: z.string() }).optional().describe('When failed or canceled'),
    manifest: z.string().optional().describe('`s3://…/_manifest.json` once succeeded'),
    createdAt: isoTime,
    startedAt: isoTime.optional(),
    finishedAt: isoTime.optional(),
    links: z.object({ self: z.string() }),
  })
  .describe('A bulk run as GET /v1/bulk-runs/{id} shows it');

export const BulkRunId = z.string().describe('Bulk run id; another tenant’s run is a 404 like an unknown one');

// ---- Plain text -------------------------------------------------------------------------------

export const PrometheusText = z.string().describe('Prometheus text exposition format 0.0.4');
export const EventStream = z
  .string()
  .describe('Server-Sent Events: `event: <status>`, `data: <the job as GET /v1/jobs/{id}>`; ends after a terminal status');
export const HtmlPage = z.string().describe('HTML');
export const BinaryTensorBody = z.string().meta({
  description: 'Binary tensor data: a JSON header, then tensor bytes',
  format: 'binary',
  contentMediaType: 'application/octet-stream',
});
export const OpenApiJson = z.record(z.string(), z.unknown()).describe('This document');

/** Every named schema, as it appears under `components.schemas`. */
export const NAMED_SCHEMAS = {
  ErrorBody,
  Datatype,
  TensorData,
  RequestInput,
  RequestOutput,
  InferRequest,
  SyncInferRequest,
  ResponseOutput,
  InferResponse,
  BinaryRequestInput,
  BinaryResponseOutput,
  SyncInferBinaryHeader,
  JobSubmissionBinaryHeader,
  InferResponseBinaryHeader,
  ModelMetadata,
  ModelReady,
  ServerMetadata,
  PoolView,
  ServerLive,
  ServerReady,
  ServerIndex,
  WebhookSpec,
  JobSubmission,
  JobAccepted,
  JobStatus,
  JobTimings,
  JobResource,
  JobResourceBinaryHeader,
  ModelList,
  EdgeCatalog,
  Fallback,
  Deployment,
  DeploymentChange,
  CanaryEvent,
  CanaryStatus,
  RollbackRequest,
  DeploymentList,
  DeploymentHistory,
  SharedPool,
  SharedPoolChange,
  SharedPoolList,
  SharedPoolDeleted,
  WebhookSecret,
  DeliveryState,
  Delivery,
  DeliveryList,
  DeliveryReplayed,
  BulkRunRequest,
  BulkRunProgress,
  BulkRunResource,
} as const;
