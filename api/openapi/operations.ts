/**
 * Every route of the HTTP API, described once: method, path (hono syntax), what it takes, what it
 * answers, and for most a request that works against `warmpool dev` (the demo model
 * `demo-scorer`, 64 FP32 features). document.ts turns this table into OpenAPI; the conformance
 * test sends the examples to a real API and checks the answers against these schemas, and checks
 * that this table and the app's routes are the same set.
 */

import { BULK_RUN_OPERATIONS } from './bulk-operations.ts';
import { DASHBOARD_OPERATIONS } from './dashboard-operations.ts';
import {
  answerRateLimited,
  authed,
  backlogFull,
  binaryBodyCodes,
  binaryRequest,
  binaryResponse,
  DEMO_MODEL,
  demoBinaryInputs,
  demoInputs,
  inferBody,
  invalidRequestCodes,
  jobId,
  jsonBody,
  malformedBody,
  model,
  modelAndVersion,
  modelNotFound,
  notDeployed,
  notDeployedModel,
  notFoundJob,
  type OperationSpec,
  outputTooLarge,
  overBounds,
  rateLimitedOrTooManyJobs,
  tooLarge,
  webhookOrFallback,
} from './operation-spec.ts';
import * as S from './schemas.ts';
import { SHARED_POOL_OPERATIONS } from './shared-pool-operations.ts';

export { DEMO_MODEL, demoRow, type OperationExample, type OperationSpec, type ResponseSpec } from './operation-spec.ts';

function inferOperation(operationId: string, path: string, withVersion: boolean): OperationSpec {
  return {
    operationId,
    method: 'post',
    path,
    tag: 'Inference (Open Inference Protocol)',
    summary: withVersion ? 'Run inference on a given version' : 'Run inference (sync)',
    description:
      'Goes through the same queue and micro-batcher as async jobs, at high priority (or `parameters.priority`), and waits up to SYNC_TIMEOUT_MS. ' +
      'On timeout: 504 with the `job_id` to poll at /v1/jobs/{id}, its message saying why (no worker yet, a worker starting, or workers busy with N requests ahead). ' +
      'A model that is published but not deployed is a 409 `model_not_deployed`; an unknown top-level field a 400 `unknown_field`. The body is JSON (also without a Content-Type, as tritonclient sends it) ' +
      'or binary tensor data; outputs come back binary when asked (`parameters.binary_data_output`, or an output’s `parameters.binary_data`).',
    auth: true,
    params: withVersion ? modelAndVersion : model,
    body: { schema: S.SyncInferRequest, required: true, binary: binaryRequest(S.SyncInferBinaryHeader) },
    responses: {
      200: {
        description: 'The outputs',
        schema: S.InferResponse,
        binary: binaryResponse(
          S.InferResponseBinaryHeader,
          'When the request asks for a binary output (`parameters.binary_data_output: true`, or an output’s `parameters.binary_data: true`)',
        ),
      },
      400: {
        description: 'Invalid request',
        schema: S.ErrorBody,
        codes: [...invalidRequestCodes, ...binaryBodyCodes, 'invalid_input'],
      },
      404: modelNotFound,
      409: notDeployedModel,
      413: {
        ...tooLarge([...overBounds, 'output_too_large']),
        description:
          'Request too large (a compressed body counts once decompressed), or its outputs hold more than MAX_JSON_OUTPUT_ELEMENTS elements for a JSON answer (`output_too_large`, with `job_id`: send `parameters.binary_data_output: true`, or GET the job binary)',
      },
      ...inferBody,
      422: webhookOrFallback,
      ...authed,
      429: {
        ...rateLimitedOrTooManyJobs,
        description: `${rateLimitedOrTooManyJobs.description}, or the answer's bytes are more than the tenant's byte budget has left`,
      },
      500: {
        description: 'The model failed on this input, or a server fault',
        schema: S.ErrorBody,
        codes: ['inference_failed', 'internal'],
      },
      503: backlogFull,
      504: {
        description:
          'Not finished within SYNC_TIMEOUT_MS; the message says why (no worker yet, one starting, or workers busy), and `job_id` is the job to poll',
        schema: S.ErrorBody,
        codes: ['timeout'],
      },
    },
    example: {
      params: withVersion ? { model: DEMO_MODEL, version: '1' } : { model: DEMO_MODEL },
      body: { id: 'req-42', inputs: demoInputs },
      binaryHeader: { id: 'req-42', inputs: demoBinaryInputs, parameters: { binary_data_output: true } },
      status: 200,
    },
  };
}

function metadataOperation(operationId: string, path: string, withVersion: boolean): OperationSpec {
  return {
    operationId,
    method: 'get',
    path,
    tag: 'Inference (Open Inference Protocol)',
    summary: withVersion ? 'Model metadata of a version' : 'Model metadata',
    description: 'Without a version: the one a job would get now (deployment split, else the latest).',
    auth: true,
    params: withVersion ? modelAndVersion : model,
    responses: { 200: { description: 'Inputs and outputs', schema: S.ModelMetadata }, 404: modelNotFound, ...authed },
    example: { params: withVersion ? { model: DEMO_MODEL, version: '1' } : { model: DEMO_MODEL }, status: 200 },
  };
}

/** Changing a deployment changes what every tenant's jobs run on: admin tenants only. */
function adminOnly() {
  return { description: 'The tenant is not in ADMIN_TENANTS', schema: S.ErrorBody, codes: ['forbidden'] };
}

export const OPERATIONS: readonly OperationSpec[] = [
  // ---- Jobs ----
  {
    operationId: 'submitJob',
    method: 'post',
    path: '/v1/models/:model/jobs',
    tag: 'Jobs',
    summary: 'Submit an async inference job',
    description:
      'Validates the request against the model, then queues it. The body is JSON or binary tensor data (then read the ' +
      'outputs binary too: GET /v1/jobs/{id} with `Accept: application/octet-stream`). With an `Idempotency-Key`, the same ' +
      'key and body (its bytes, for a binary body) return the same job (header `Idempotent-Replayed: true`, `status` the job’s ' +
      'status now); another body with the key is a 409. A model that is published but not deployed (no deployment lists ' +
      'the version, no worker serves it) is a 409 `model_not_deployed` naming the fix; a deployment whose min is 0 takes ' +
      'jobs (the scaler starts a worker). An unknown top-level field is a 400 `unknown_field` naming the field meant ' +
      '(`webhook_url` → `webhook`); tensors and `parameters` are open.',
    auth: true,
    params: model,
    headers: { 'Idempotency-Key': S.IdempotencyKey },
    body: { schema: S.JobSubmission, required: true, binary: binaryRequest(S.JobSubmissionBinaryHeader) },
    responses: {
      202: {
        description: 'Queued',
        schema: S.JobAccepted,
        headers: { Location: 'The job: /v1/jobs/{id}', 'Idempotent-Replayed': '`true` when an earlier request with this key made the job' },
      },
      400: {
        description: 'Invalid request',
        schema: S.ErrorBody,
        codes: [...invalidRequestCodes, ...binaryBodyCodes, 'invalid_idempotency_key'],
      },
      404: modelNotFound,
      409: {
        description: 'Idempotency-Key conflict, or the model is published but not deployed (the message names the fix)',
        schema: S.ErrorBody,
        codes: ['idempotency_key_reused', 'idempotency_key_in_use', 'model_not_deployed'],
      },
      413: tooLarge(overBounds),
      ...inferBody,
      422: webhookOrFallback,
      ...authed,
      429: rateLimitedOrTooManyJobs,
      503: backlogFull,
    },
    example: {
      params: { model: DEMO_MODEL },
      headers: { 'Idempotency-Key': 'openapi-example-1' },
      body: { inputs: demoInputs, priority: 'normal', timeoutMs: 60_000 },
      binaryHeader: { inputs: demoBinaryInputs, priority: 'normal', timeoutMs: 60_000 },
      status: 202,
    },
  },
  {
    operationId: 'getJob',
    method: 'get',
    path: '/v1/jobs/:id',
    tag: 'Jobs',
    summary: 'Read a job: status, outputs, timings',
    description:
      'A queued job past its `timeoutMs` reads `failed` with `deadline_exceeded`. Its outputs come as binary tensor data ' +
      'with `Accept: application/octet-stream` (preferred over application/json: a higher q, or listed first) or `?binary_data_output=true`.',
    auth: true,
    params: jobId,
    query: S.JobReadQuery,
    responses: {
      200: {
        description: 'The job',
        schema: S.JobResource,
        binary: binaryResponse(
          S.JobResourceBinaryHeader,
          'With `Accept: application/octet-stream` or `?binary_data_output=true`, once the job has outputs (before, it answers JSON)',
        ),
      },
      404: notFoundJob(),
      413: outputTooLarge('GET it with `Accept: application/octet-stream` or `?binary_data_output=true`'),
      ...authed,
      429: answerRateLimited,
    },
  },
  {
    operationId: 'cancelJob',
    method: 'delete',
    path: '/v1/jobs/:id',
    tag: 'Jobs',
    summary: 'Cancel a queued job',
    description:
      'Idempotent: canceling a canceled job succeeds again. A job with a webhook asking for `job.failed` (the default) gets ' +
      'it, with `data.status` and `data.error.code` `canceled`.',
    auth: true,
    params: jobId,
    responses: {
      200: { description: 'Canceled', schema: S.JobResource },
      404: notFoundJob(),
      409: { description: 'Running or finished: not canceled', schema: S.ErrorBody, codes: ['job_running', 'job_finished'] },
      ...authed,
    },
  },
  {
    operationId: 'jobEvents',
    method: 'get',
    path: '/v1/jobs/:id/events',
    tag: 'Jobs',
    summary: 'Stream a job’s status changes (Server-Sent Events)',
    description:
      'The current status at once, then every change; event name = status, data = the job as GET /v1/jobs/{id}. ' +
      'Ends after succeeded, failed or canceled. A comment line keeps idle streams open. ' +
      'A failure after the stream began is an `error` event carrying the usual error body. ' +
      'Outputs past MAX_JSON_OUTPUT_ELEMENTS are left out of the event (`outputsOmitted` says how many): GET the job binary. ' +
      'At most MAX_SSE_STREAMS_PER_TENANT streams per tenant (429) and MAX_SSE_STREAMS in all (503) are open per API process.',
    auth: true,
    params: jobId,
    responses: {
      200: { description: 'The event stream', schema: S.EventStream, contentType: 'text/event-stream' },
      404: notFoundJob(),
      ...authed,
      429: {
        description: 'Rate limited, or the tenant holds MAX_SSE_STREAMS_PER_TENANT streams on this API process',
        schema: S.ErrorBody,
        codes: ['rate_limited', 'too_many_streams'],
        headers: { 'Retry-After': 'Seconds to wait (rate_limited)' },
      },
      503: {
        description: 'This API process serves MAX_SSE_STREAMS streams already',
        schema: S.ErrorBody,
        codes: ['too_many_streams'],
        headers: { 'Retry-After': 'Seconds to wait' },
      },
    },
  },
  {
    operationId: 'listModels',
    method: 'get',
    path: '/v1/models',
    tag: 'Models and deployments',
    summary: 'Models in the registry, with their deployed version',
    auth: true,
    responses: { 200: { description: 'The models', schema: S.ModelList }, ...authed },
    example: { status: 200 },
  },
  {
    operationId: 'pool',
    method: 'get',
    path: '/v1/pool',
    tag: 'Models and deployments',
    summary: 'Workers by deployment and state, queues, forecast, desired counts, the terms that set them and the scaler’s last decisions',
    auth: true,
    responses: { 200: { description: 'The pool', schema: S.PoolView }, ...authed },
    example: { status: 200 },
  },
  {
    operationId: 'edgeCatalog',
    method: 'get',
    path: '/v1/edge/catalog',
    tag: 'Models and deployments',
    summary: 'Every model, the specs of the versions in traffic and the submit bounds: what an edge gateway checks requests against',
    auth: true,
    responses: { 200: { description: 'The catalog', schema: S.EdgeCatalog }, ...authed },
    example: { status: 200 },
  },
  // ---- Deployments ----
  {
    operationId: 'listDeployments',
    method: 'get',
    path: '/v1/deployments',
    tag: 'Models and deployments',
    summary: 'Every deployment',
    auth: true,
    responses: { 200: { description: 'The deployments', schema: S.DeploymentList }, ...authed },
    example: { status: 200 },
  },
  {
    operationId: 'getDeployment',
    method: 'get',
    path: '/v1/deployments/:model',
    tag: 'Models and deployments',
    summary: 'A model’s deployment',
    auth: true,
    params: model,
    responses: { 200: { description: 'The deployment', schema: S.Deployment }, 404: notDeployed(), ...authed },
    example: { params: { model: DEMO_MODEL }, status: 200 },
  },
  {
    operationId: 'putDeployment',
    method: 'put',
    path: '/v1/deployments/:model',
    tag: 'Models and deployments',
    summary: 'Deploy or change a deployment (merge)',
    description:
      'Fields left out keep their values; a first deployment gets min 1, max max(min, 1), standby 0 and the latest version. ' +
      '`null` clears `policy`, `backlogMax` or `fallback`.',
    auth: true,
    params: model,
    body: { schema: S.DeploymentChange, required: true },
    responses: {
      200: { description: 'The new revision', schema: S.Deployment },
      400: { description: 'Invalid change', schema: S.ErrorBody, codes: [...malformedBody, 'invalid_body', 'invalid_deployment'] },
      403: adminOnly(),
      409: { description: '`ifRevision` is not the current revision', schema: S.ErrorBody, codes: ['revision_conflict'] },
      413: tooLarge(),
      ...jsonBody,
      422: {
        description: 'A version (or the fallback) named is not in the registry, or the shared pool named does not exist',
        schema: S.ErrorBody,
        codes: ['model_not_found', 'version_not_found', 'pool_not_found'],
      },
      ...authed,
    },
    example: { params: { model: DEMO_MODEL }, body: { versions: [{ version: '1', weight: 100 }], min: 1, max: 2 }, status: 200 },
  },
  {
    operationId: 'rollbackDeployment',
    method: 'post',
    path: '/v1/deployments/:model/rollback',
    tag: 'Models and deployments',
    summary: 'Back to the previous revision’s config',
    description: 'Restores the config of the revision before the current one, as a new revision. The body is optional.',
    auth: true,
    params: model,
    body: { schema: S.RollbackRequest, required: false },
    responses: {
      200: { description: 'The new revision', schema: S.Deployment },
      400: { description: 'Invalid body', schema: S.ErrorBody, codes: [...malformedBody, 'invalid_body'] },
      403: adminOnly(),
      404: notDeployed(),
      409: {
        description: 'Nothing to roll back to, or a revision conflict',
        schema: S.ErrorBody,
        codes: ['no_previous_revision', 'revision_conflict'],
      },
      413: tooLarge(),
      ...jsonBody,
      422: {
        description: 'The revision restored names a shared pool that has since been deleted',
        schema: S.ErrorBody,
        codes: ['pool_not_found'],
      },
      ...authed,
    },
    example: { params: { model: DEMO_MODEL }, body: {}, status: 200 },
  },
  {
    operationId: 'canaryStatus',
    method: 'get',
    path: '/v1/deployments/:model/canary',
    tag: 'Models and deployments',
    summary: 'Canary guard: automatic rollbacks, and how each canary stands',
    description:
      'While a new version takes a traffic share, the guard compares its error rate and latency with the stable ' +
      "version's and sets its share to 0 past the policy's margin. Lists those events and, during a split, each canary's verdict.",
    auth: true,
    params: model,
    responses: {
      200: { description: 'Events and current standing', schema: S.CanaryStatus },
      404: { description: 'Neither deployed nor ever guarded', schema: S.ErrorBody, codes: ['deployment_not_found'] },
      ...authed,
    },
    example: { params: { model: DEMO_MODEL }, status: 200 },
  },
  {
    operationId: 'deploymentHistory',
    method: 'get',
    path: '/v1/deployments/:model/history',
    tag: 'Models and deployments',
    summary: 'The last 20 revisions',
    auth: true,
    params: model,
    responses: { 200: { description: 'Newest first', schema: S.DeploymentHistory }, 404: notDeployed(), ...authed },
    example: { params: { model: DEMO_MODEL }, status: 200 },
  },
  ...SHARED_POOL_OPERATIONS,
  // ---- Webhooks ----
  {
    operationId: 'getWebhookSecret',
    method: 'get',
    path: '/v1/webhooks/secret',
    tag: 'Webhooks',
    summary: 'The tenant’s webhook signing secret',
    description: 'Created on first use. Verify deliveries with any Standard Webhooks library.',
    auth: true,
    responses: { 200: { description: 'The secret', schema: S.WebhookSecret }, ...authed },
    example: { status: 200 },
  },
  {
    operationId: 'rotateWebhookSecret',
    method: 'post',
    path: '/v1/webhooks/secret/rotate',
    tag: 'Webhooks',
    summary: 'Rotate the signing secret',
    description:
      'The new secret signs at once; the previous one keeps signing alongside it for 24 h, or until `DELETE /v1/webhooks/secret/previous`.',
    auth: true,
    responses: { 200: { description: 'The new secret and the previous one', schema: S.WebhookSecret }, ...authed },
    example: { status: 200 },
  },
  {
    operationId: 'revokePreviousWebhookSecret',
    method: 'delete',
    path: '/v1/webhooks/secret/previous',
    tag: 'Webhooks',
    summary: 'Stop the previous signing secret now',
    description:
      'Ends a rotation’s overlap at once (a leaked secret, or every receiver has switched): from now on deliveries carry the current secret’s signature only. Idempotent.',
    auth: true,
    responses: { 200: { description: 'The current secret, with no previous one', schema: S.WebhookSecret }, ...authed },
    example: { status: 200 },
  },
  {
    operationId: 'listDeliveries',
    method: 'get',
    path: '/v1/webhooks/deliveries',
    tag: 'Webhooks',
    summary: 'Webhook deliveries (dead letters included)',
    auth: true,
    query: S.DeliveryQuery,
    responses: {
      200: { description: 'Newest first', schema: S.DeliveryList },
      400: { description: 'Bad query', schema: S.ErrorBody, codes: ['invalid_query'] },
      ...authed,
    },
    example: { query: { status: 'dead', limit: '10' }, status: 200 },
  },
  {
    operationId: 'replayDelivery',
    method: 'post',
    path: '/v1/webhooks/deliveries/:id/replay',
    tag: 'Webhooks',
    summary: 'Deliver again (a failed or dead one, or a succeeded one)',
    auth: true,
    params: { id: S.Delivery.shape.id },
    responses: {
      202: { description: 'Pending again, attempts reset', schema: S.DeliveryReplayed },
      404: { description: 'No such delivery for this tenant', schema: S.ErrorBody, codes: ['delivery_not_found'] },
      409: { description: 'Still being attempted', schema: S.ErrorBody, codes: ['delivery_pending'] },
      ...authed,
    },
  },
  ...BULK_RUN_OPERATIONS,
  ...DASHBOARD_OPERATIONS,
  // ---- Open Inference Protocol ----
  inferOperation('infer', '/v2/models/:model/infer', false),
  inferOperation('inferVersion', '/v2/models/:model/versions/:version/infer', true),
  metadataOperation('modelMetadata', '/v2/models/:model', false),
  metadataOperation('modelVersionMetadata', '/v2/models/:model/versions/:version', true),
  {
    operationId: 'modelReady',
    method: 'get',
    path: '/v2/models/:model/ready',
    tag: 'Inference (Open Inference Protocol)',
    summary: 'Model readiness',
    description: 'Ready = deployed, and the deployed version is in the registry.',
    auth: true,
    params: model,
    responses: {
      200: { description: 'Ready', schema: S.ModelReady },
      404: { description: 'Not deployed, or its version is gone', schema: S.ErrorBody, codes: ['model_not_ready'] },
      ...authed,
    },
    example: { params: { model: DEMO_MODEL }, status: 200 },
  },
  {
    operationId: 'modelVersionReady',
    method: 'get',
    path: '/v2/models/:model/versions/:version/ready',
    tag: 'Inference (Open Inference Protocol)',
    summary: 'Model version readiness',
    description: "Ready = the version takes a share of the deployment's traffic, and is in the registry.",
    auth: true,
    params: modelAndVersion,
    responses: {
      200: { description: 'Ready', schema: S.ModelReady },
      404: { description: 'Not deployed, no traffic share, or gone', schema: S.ErrorBody, codes: ['model_not_ready'] },
      ...authed,
    },
    example: { params: { model: DEMO_MODEL, version: '1' }, status: 200 },
  },
  // ---- Operations (no auth) ----
  {
    operationId: 'index',
    method: 'get',
    path: '/',
    tag: 'Health and metrics',
    summary: 'Where things are: the docs, the OpenAPI document, the dashboard, health',
    auth: false,
    responses: { 200: { description: 'An index', schema: S.ServerIndex } },
    example: { status: 200 },
  },
  {
    operationId: 'serverMetadata',
    method: 'get',
    path: '/v2',
    tag: 'Health and metrics',
    summary: 'Server metadata (Open Inference Protocol)',
    auth: false,
    responses: { 200: { description: 'Server metadata', schema: S.ServerMetadata } },
    example: { status: 200 },
  },
  {
    operationId: 'serverLive',
    method: 'get',
    path: '/v2/health/live',
    tag: 'Health and metrics',
    summary: 'Liveness',
    auth: false,
    responses: { 200: { description: 'Live', schema: S.ServerLive } },
    example: { status: 200 },
  },
  {
    operationId: 'serverReady',
    method: 'get',
    path: '/v2/health/ready',
    tag: 'Health and metrics',
    summary: 'Readiness (Redis reachable)',
    auth: false,
    responses: { 200: { description: 'Ready', schema: S.ServerReady }, 503: { description: 'Not ready', schema: S.ServerReady } },
    example: { status: 200 },
  },
  {
    operationId: 'metrics',
    method: 'get',
    path: '/metrics',
    tag: 'Health and metrics',
    summary: 'Prometheus metrics of the API and every live worker',
    description:
      'Names every model and its traffic, so it takes an admin tenant’s key (ADMIN_TENANTS) or METRICS_TOKEN as the bearer token. ' +
      'METRICS_PORT serves the same text without auth on a port of its own, for a scraper on a private network.',
    auth: true,
    responses: {
      200: { description: 'Metrics', schema: S.PrometheusText, contentType: 'text/plain; version=0.0.4' },
      403: { description: 'The key’s tenant is not in ADMIN_TENANTS', schema: S.ErrorBody, codes: ['forbidden'] },
      ...authed,
    },
    example: { status: 200 },
  },
  {
    operationId: 'openApiDocument',
    method: 'get',
    path: '/openapi.json',
    tag: 'Health and metrics',
    summary: 'This OpenAPI document',
    auth: false,
    responses: { 200: { description: 'OpenAPI 3.1', schema: S.OpenApiJson } },
    example: { status: 200 },
  },
  {
    operationId: 'docs',
    method: 'get',
    path: '/docs',
    tag: 'Health and metrics',
    summary: 'This API reference, as a page',
    auth: false,
    responses: { 200: { description: 'A self-contained HTML page', schema: S.HtmlPage, contentType: 'text/html' } },
    example: { status: 200 },
  },
];
