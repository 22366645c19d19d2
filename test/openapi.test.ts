/**
 * The OpenAPI document against the real API (real Redis, S3 registry, a real worker):
 * (a) the document's operations and the app's routes are the same set, so neither drifts alone;
 * (b) every operation's example gets its documented status from the real API, and every answer
 *     (examples, the job routes, a table of error cases) validates against the documented schema,
 *     both the zod source and the JSON Schema published in the document;
 * (c) the document is structurally valid OpenAPI 3.1: path parameters, operation ids, tags,
 *     security, and every $ref resolves.
 * The binary tensor data forms and compressed bodies are in (b) and (c) too: the documented
 * binary header examples are sent as binary bodies (one gzip-compressed), binary answers are
 * split by their Inference-Header-Content-Length and their JSON headers checked against the
 * documented schemas, and each refusal of a bad binary or compressed body carries a documented code.
 */

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import type { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type RunningDispatcher, startDispatcher } from '../api/dispatcher/main.ts';
import { createApiRuntime } from '../api/main.ts';
import { buildOpenApiDocument, openApiPath } from '../api/openapi/document.ts';
import { DEMO_MODEL, demoRow, OPERATIONS, type OperationExample, type OperationSpec } from '../api/openapi/operations.ts';
import { openApiRoutes } from '../api/openapi/routes.ts';
import { EventStream, JobResource } from '../api/openapi/schemas.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { testBulkPrefix } from './support/services.ts';
import { KEY_A, startStack, type TestStack, waitForJob } from './support/stack.ts';

type Json = Record<string, unknown>;

const IDLE_MODEL = 'idle-model'; // published, never deployed: submits to it are refused (409)
const QUEUED_MODEL = 'queued-model'; // deployed at min 0, never served (no scaler here): its jobs stay queued
const SPLIT_MODEL = 'split-model'; // two versions, never served: for a traffic split
const doc = buildOpenApiDocument({ serverUrl: 'http://localhost:8080' });
const byId = new Map(OPERATIONS.map((op) => [op.operationId, op]));

let stack: TestStack;
let dispatcher: RunningDispatcher;
/** A webhook receiver that accepts everything. */
const receiver = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => res.writeHead(204).end());
});
/** operationId → statuses seen from the real API and validated. */
const checked = new Map<string, Set<number>>();

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300', WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1' });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  const model = buildMlpModel({ features: 64, hidden: 8, layers: 1 });
  await stack.registry.publish({ name: DEMO_MODEL, version: '1', bytes: model, maxBatch: 8 });
  for (const name of [IDLE_MODEL, QUEUED_MODEL]) await stack.registry.publish({ name, version: '1', bytes: model, maxBatch: 8 });
  for (const version of ['1', '2']) await stack.registry.publish({ name: SPLIT_MODEL, version, bytes: model, maxBatch: 8 });
  await stack.deployments.put({ model: DEMO_MODEL, version: '1', min: 1, max: 1, standby: 0 });
  await stack.deployments.put({ model: QUEUED_MODEL, version: '1', min: 0, max: 1, standby: 0 });
  await stack.startWorker(DEMO_MODEL, '1');
  await stack.waitForWorkers(DEMO_MODEL, 'active');
  dispatcher = startDispatcher(stack.config, createLogger('silent'));
}, 120_000);

afterAll(async () => {
  await dispatcher?.close();
  await stack?.close();
  await new Promise<void>((resolve) => {
    receiver.closeAllConnections();
    receiver.close(() => resolve());
  });
});

function routesOf(app: Hono<never> | Hono): string[] {
  return app.routes.filter((r) => r.method !== 'ALL').map((r) => `${r.method} ${r.path}`);
}

const sorted = (xs: Iterable<string>) => [...new Set(xs)].sort();

describe('(a) routes and document', () => {
  let served: string[];

  beforeAll(async () => {
    const runtime = createApiRuntime(stack.config, createLogger('silent'));
    served = routesOf(runtime.app as unknown as Hono);
    await runtime.close();
  });

  it('documents every route of the app and nothing else', () => {
    const documented = OPERATIONS.map((op) => `${op.method.toUpperCase()} ${op.path}`);
    // The docs routes are counted whether or not app.ts mounts them yet (the next test checks that).
    expect(sorted([...served, ...routesOf(openApiRoutes())])).toEqual(sorted(documented));
    const inDocument = Object.entries(doc.paths as Record<string, Json>).flatMap(([path, ops]) =>
      Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(sorted(inDocument)).toEqual(sorted(OPERATIONS.map((op) => `${op.method.toUpperCase()} ${openApiPath(op.path)}`)));
  });

  it('the app serves /openapi.json and /docs (mounted in api/app.ts)', () => {
    expect(served).toEqual(expect.arrayContaining(routesOf(openApiRoutes())));
  });
});

describe('(b) examples and responses against the real API', () => {
  const withExamples = OPERATIONS.filter((op) => op.example);

  // In table order: the deployment examples build on each other (put, then roll back).
  it.each(withExamples.map((op) => [`${op.method.toUpperCase()} ${op.path}`, op] as const))('%s: example', async (_, op) => {
    const example = op.example as OperationExample;
    const res = await send(op, example);
    await expectDocumented(op, res, example.status);
  });

  it('the job routes: read, stream, cancel', async () => {
    const submitted = await send(byId.get('submitJob') as OperationSpec, {
      params: { model: DEMO_MODEL },
      body: { inputs: [{ name: 'features', shape: [2, 64], datatype: 'FP32', data: [demoRow(2), demoRow(3)] }] },
      status: 202,
    });
    const { id } = (await expectDocumented(byId.get('submitJob') as OperationSpec, submitted, 202)) as { id: string };
    await expectDocumented(op('getJob'), await send(op('getJob'), { params: { id }, status: 200 }), 200);
    const finished = await waitForJob(stack, id);
    expect(finished.status).toBe('succeeded');
    const read = (await expectDocumented(op('getJob'), await send(op('getJob'), { params: { id }, status: 200 }), 200)) as Json;
    expect(read.outputs).toBeDefined();

    const events = await send(op('jobEvents'), { params: { id }, status: 200 });
    const text = (await expectDocumented(op('jobEvents'), events, 200)) as string;
    const blocks = parseSse(text);
    expect(blocks.at(-1)?.event).toBe('succeeded');
    for (const block of blocks) expect(JobResource.parse(JSON.parse(block.data))).toBeDefined();

    const queued = await send(op('submitJob'), { params: { model: QUEUED_MODEL }, body: { inputs: [oneRow()] }, status: 202 });
    const idle = (await queued.json()) as { id: string };
    const canceled = (await expectDocumented(
      op('cancelJob'),
      await send(op('cancelJob'), { params: { id: idle.id }, status: 200 }),
      200,
    )) as Json;
    expect(canceled.status).toBe('canceled');
    await expectError(op('cancelJob'), await send(op('cancelJob'), { params: { id }, status: 409 }), 409, 'job_finished');
  });

  it('webhook deliveries: listed with their attempts, replayed', async () => {
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const res = await send(op('submitJob'), { params: { model: DEMO_MODEL }, body: { inputs: [oneRow()], webhook: { url } }, status: 202 });
    const { id } = (await expectDocumented(op('submitJob'), res, 202)) as { id: string };
    let delivery: { id: string; jobId: string } | undefined;
    const deadline = Date.now() + 30_000;
    while (!delivery && Date.now() < deadline) {
      const list = await send(op('listDeliveries'), { query: { status: 'succeeded' }, status: 200 });
      const { deliveries } = (await expectDocumented(op('listDeliveries'), list, 200)) as {
        deliveries: Array<{ id: string; jobId: string }>;
      };
      delivery = deliveries.find((d) => d.jobId === id);
      if (!delivery) await new Promise((r) => setTimeout(r, 50));
    }
    if (!delivery) throw new Error(`no succeeded delivery for job ${id}`);
    const replayed = await send(op('replayDelivery'), { params: { id: delivery.id }, status: 202 });
    expect(await expectDocumented(op('replayDelivery'), replayed, 202)).toEqual({ id: delivery.id, status: 'pending' });
  });

  it('a split deployment with a fallback, and its canary standing', async () => {
    const put = await send(op('putDeployment'), {
      params: { model: SPLIT_MODEL },
      body: {
        versions: [
          { version: '1', weight: 90 },
          { version: '2', weight: 10 },
        ],
        backlogMax: 100,
        fallback: { model: IDLE_MODEL },
      },
      status: 200,
    });
    expect(await expectDocumented(op('putDeployment'), put, 200)).toMatchObject({ fallback: { model: IDLE_MODEL } });
    const canary = await send(op('canaryStatus'), { params: { model: SPLIT_MODEL }, status: 200 });
    const status = (await expectDocumented(op('canaryStatus'), canary, 200)) as { current?: { canaries: unknown[] } };
    expect(status.current?.canaries).toHaveLength(1);
  });

  it('a shared pool a deployment joined: listed as a member, not deleted while it is one', async () => {
    const put = await send(op('putPool'), { params: { name: 'in-use' }, body: { max: 2 }, status: 200 });
    await expectDocumented(op('putPool'), put, 200);
    const joined = await send(op('putDeployment'), { params: { model: QUEUED_MODEL }, body: { pool: 'in-use' }, status: 200 });
    expect(await expectDocumented(op('putDeployment'), joined, 200)).toMatchObject({ pool: 'in-use' });
    const read = await send(op('getPool'), { params: { name: 'in-use' }, status: 200 });
    expect(await expectDocumented(op('getPool'), read, 200)).toMatchObject({ deployments: [QUEUED_MODEL] });
    await expectError(op('deletePool'), await send(op('deletePool'), { params: { name: 'in-use' }, status: 409 }), 409, 'pool_in_use');
    const left = await send(op('putDeployment'), { params: { model: QUEUED_MODEL }, body: { pool: null }, status: 200 });
    await expectDocumented(op('putDeployment'), left, 200);
    await expectDocumented(op('deletePool'), await send(op('deletePool'), { params: { name: 'in-use' }, status: 200 }), 200);
  });

  it('bulk runs: start, resume, read, cancel', async () => {
    const s3 = createS3ObjectStore(stack.config.s3);
    const root = `${testBulkPrefix(stack.config.s3.prefix, 'tenant-a')}openapi-bulk/`;
    const url = (prefix: string) => `s3://${stack.config.s3.bucket}/${root}${prefix}`;
    try {
      const rows = [1, 2].map((n) => JSON.stringify({ id: `r${n}`, features: demoRow(n) }));
      await s3.put(`${root}in/rows.jsonl`, `${rows.join('\n')}\n`);
      // IDLE_MODEL has no worker: the run stays running until canceled.
      const body = { model: IDLE_MODEL, version: '1', input: url('in/'), output: url('out/'), runId: 'openapi-bulk-1' };
      const started = await send(op('startBulkRun'), { body, status: 202 });
      const { id } = (await expectDocumented(op('startBulkRun'), started, 202)) as { id: string };
      await expectDocumented(op('startBulkRun'), await send(op('startBulkRun'), { body, status: 200 }), 200);
      await expectDocumented(op('getBulkRun'), await send(op('getBulkRun'), { params: { id }, status: 200 }), 200);
      const cancel = await send(op('cancelBulkRun'), { params: { id }, status: 200 });
      expect(((await expectDocumented(op('cancelBulkRun'), cancel, 200)) as Json).status).toBe('canceled');
      const conflict = await send(op('startBulkRun'), { body: { ...body, chunkRows: 7 }, status: 409 });
      await expectError(op('startBulkRun'), conflict, 409, 'run_conflict');
    } finally {
      s3.close();
    }
  });

  it('binary tensor data: the documented header examples as bodies (one gzip-compressed), answers read binary', async () => {
    const infer = op('infer');
    const json = (await expectDocumented(infer, await send(infer, infer.example as OperationExample), 200)) as {
      outputs: Array<{ name: string; data: number[] }>;
    };
    const sent = binaryExample(documentedBinaryHeader(infer), [float32Bytes(demoRow())]);
    const binary = await expectBinary(infer, await send(infer, { params: { model: DEMO_MODEL }, ...sent, status: 200 }), 200);
    expect(binary.outputs.size).toBe(json.outputs.length);
    for (const output of json.outputs) {
      const values = Array.from(new Float32Array(new Uint8Array(binary.outputs.get(output.name) ?? []).buffer));
      expect(values).toHaveLength(output.data.length);
      values.forEach((v, i) => {
        expect(v).toBeCloseTo(output.data[i] as number, 5);
      });
    }

    const submit = op('submitJob');
    const job = binaryExample(documentedBinaryHeader(submit), [float32Bytes(demoRow())]);
    const compressed = { ...job, headers: { ...job.headers, 'Content-Encoding': 'gzip' }, body: gzipSync(job.body) };
    const accepted = await send(submit, { params: { model: DEMO_MODEL }, ...compressed, status: 202 });
    const { id } = (await expectDocumented(submit, accepted, 202)) as { id: string };
    expect((await waitForJob(stack, id)).status).toBe('succeeded');
    const getJob = op('getJob');
    const byQuery = await expectBinary(
      getJob,
      await send(getJob, { params: { id }, query: { binary_data_output: 'true' }, status: 200 }),
      200,
    );
    const byAccept = await expectBinary(
      getJob,
      await send(getJob, { params: { id }, headers: { Accept: 'application/octet-stream' }, status: 200 }),
      200,
    );
    expect(byAccept.header).toEqual(byQuery.header);
    expect([...byAccept.outputs.keys()]).toEqual(json.outputs.map((o) => o.name));
    expect(byAccept.outputs).toEqual(byQuery.outputs);
  });

  it('parameters.priority takes a name or a Triton level; GET /v2 names the binary extension; large answers are compressed', async () => {
    const infer = op('infer');
    for (const priority of ['low', 3, 0]) {
      const body = { inputs: [oneRow()], parameters: { priority } };
      expect(publishedSchema(requestSchemaOf(infer)).safeParse(body).success, String(priority)).toBe(true);
      await expectDocumented(infer, await send(infer, { params: { model: DEMO_MODEL }, body, status: 200 }), 200);
    }
    const server = (await expectDocumented(op('serverMetadata'), await send(op('serverMetadata'), { status: 200 }), 200)) as Json;
    expect(server.extensions).toContain('binary_tensor_data');
    // fetch sends Accept-Encoding: gzip, deflate and decodes the answer; the header says it was compressed.
    const document = await send(op('openApiDocument'), { status: 200 });
    expect(document.headers.get('content-encoding')).toMatch(/^(gzip|deflate)$/);
    await expectDocumented(op('openApiDocument'), document, 200);
  });

  it('a compressed body counts once decompressed: over the body limit it is a documented 413', async () => {
    const spec = op('submitJob');
    const bomb = gzipSync(Buffer.alloc(stack.config.api.bodyLimitBytes + 1));
    expect(bomb.byteLength).toBeLessThan(stack.config.api.bodyLimitBytes);
    const example = { params: { model: DEMO_MODEL }, headers: { 'Content-Encoding': 'gzip' }, body: bomb, status: 413 };
    await expectError(spec, await send(spec, example), 413, 'body_too_large');
  });

  // Bad requests: each answer's status must be documented for its route, with its code.
  const errorCases: Array<[string, string, OperationExample & { contentType?: string }, string]> = [
    ['submit: not an object', 'submitJob', { params: { model: DEMO_MODEL }, body: [1], status: 400 }, 'invalid_body'],
    ['submit: unknown model', 'submitJob', { params: { model: 'nope' }, body: { inputs: [oneRow()] }, status: 404 }, 'model_not_found'],
    [
      'submit: text body',
      'submitJob',
      { params: { model: DEMO_MODEL }, body: 'x', contentType: 'text/plain', status: 415 },
      'unsupported_media_type',
    ],
    [
      'submit: loopback webhook',
      'submitJob',
      { params: { model: DEMO_MODEL }, body: { inputs: [oneRow()], webhook: { url: 'http://169.254.169.254/latest' } }, status: 422 },
      'webhook_url_blocked',
    ],
    [
      'submit: bad Idempotency-Key',
      'submitJob',
      { params: { model: DEMO_MODEL }, headers: { 'Idempotency-Key': '' }, body: { inputs: [oneRow()] }, status: 400 },
      'invalid_idempotency_key',
    ],
    [
      'submit: Idempotency-Key reused for another body',
      'submitJob',
      { params: { model: DEMO_MODEL }, headers: { 'Idempotency-Key': 'openapi-example-1' }, body: { inputs: [oneRow()] }, status: 409 },
      'idempotency_key_reused',
    ],
    [
      'submit: published, not deployed',
      'submitJob',
      { params: { model: IDLE_MODEL }, body: { inputs: [oneRow()] }, status: 409 },
      'model_not_deployed',
    ],
    [
      'submit: an unknown top-level field',
      'submitJob',
      { params: { model: DEMO_MODEL }, body: { inputs: [oneRow()], webhook_url: 'https://example.com/' }, status: 400 },
      'unknown_field',
    ],
    [
      'infer: published, not deployed',
      'infer',
      { params: { model: IDLE_MODEL }, body: { inputs: [oneRow()] }, status: 409 },
      'model_not_deployed',
    ],
    ['bulk: unknown run', 'getBulkRun', { params: { id: 'no-such-run' }, status: 404 }, 'bulk_run_not_found'],
    [
      'bulk: chunkRows 0',
      'startBulkRun',
      { body: { model: DEMO_MODEL, input: 's3://bucket/in/', output: 's3://bucket/out/', chunkRows: 0 }, status: 400 },
      'invalid_bulk_run',
    ],
    [
      'bulk: blocked webhook',
      'startBulkRun',
      {
        body: { model: DEMO_MODEL, input: 's3://bucket/in/', output: 's3://bucket/out/', webhook: { url: 'http://169.254.169.254/' } },
        status: 422,
      },
      'webhook_url_blocked',
    ],
    ['read: unknown job', 'getJob', { params: { id: 'job_unknown' }, status: 404 }, 'job_not_found'],
    ['events: unknown job', 'jobEvents', { params: { id: 'job_unknown' }, status: 404 }, 'job_not_found'],
    ['put: negative min', 'putDeployment', { params: { model: DEMO_MODEL }, body: { min: -1 }, status: 400 }, 'invalid_body'],
    ['put: unknown version', 'putDeployment', { params: { model: DEMO_MODEL }, body: { version: '9' }, status: 422 }, 'version_not_found'],
    ['put: stale revision', 'putDeployment', { params: { model: DEMO_MODEL }, body: { ifRevision: 0 }, status: 409 }, 'revision_conflict'],
    [
      'put: a shared pool that does not exist',
      'putDeployment',
      { params: { model: DEMO_MODEL }, body: { pool: 'nope' }, status: 422 },
      'pool_not_found',
    ],
    ['pool: unknown', 'getPool', { params: { name: 'nope' }, status: 404 }, 'pool_not_found'],
    ['pool: not a pool name', 'getPool', { params: { name: 'Nope' }, status: 400 }, 'invalid_pool'],
    ['pool: a new one without max', 'putPool', { params: { name: 'fresh' }, body: { standby: 1 }, status: 400 }, 'invalid_pool'],
    ['pool: delete unknown', 'deletePool', { params: { name: 'nope' }, status: 404 }, 'pool_not_found'],
    ['rollback: not deployed', 'rollbackDeployment', { params: { model: IDLE_MODEL }, status: 404 }, 'deployment_not_found'],
    ['canary: never deployed', 'canaryStatus', { params: { model: IDLE_MODEL }, status: 404 }, 'deployment_not_found'],
    ['history: not deployed', 'deploymentHistory', { params: { model: IDLE_MODEL }, status: 404 }, 'deployment_not_found'],
    ['deliveries: limit 0', 'listDeliveries', { query: { limit: '0' }, status: 400 }, 'invalid_query'],
    ['replay: unknown delivery', 'replayDelivery', { params: { id: 'msg_nope' }, status: 404 }, 'delivery_not_found'],
    [
      'infer: wrong datatype',
      'infer',
      { params: { model: DEMO_MODEL }, body: { inputs: [{ ...oneRow(), datatype: 'INT32' }] }, status: 400 },
      'datatype_mismatch',
    ],
    ['metadata: unknown model', 'modelMetadata', { params: { model: 'nope' }, status: 404 }, 'model_not_found'],
    [
      'metadata: unknown version',
      'modelVersionMetadata',
      { params: { model: DEMO_MODEL, version: '9' }, status: 404 },
      'version_not_found',
    ],
    ['ready: not deployed', 'modelReady', { params: { model: IDLE_MODEL }, status: 404 }, 'model_not_ready'],
    [
      'infer: Inference-Header-Content-Length past the body',
      'infer',
      { params: { model: DEMO_MODEL }, ...binaryExample({ inputs: [oneRow()] }, [], true), status: 400 },
      'invalid_header_length',
    ],
    [
      'infer: fewer bytes than binary_data_size',
      'infer',
      { params: { model: DEMO_MODEL }, ...binaryExample({ inputs: demoBinaryRow() }, [new Uint8Array(255)]), status: 400 },
      'binary_size_mismatch',
    ],
    [
      'submit: bytes after the binary inputs',
      'submitJob',
      { params: { model: DEMO_MODEL }, ...binaryExample({ inputs: demoBinaryRow() }, [new Uint8Array(257)]), status: 400 },
      'binary_size_mismatch',
    ],
    [
      'infer: priority not a name or level',
      'infer',
      { params: { model: DEMO_MODEL }, body: { inputs: [oneRow()], parameters: { priority: 'urgent' } }, status: 400 },
      'invalid_body',
    ],
    [
      'submit: a gzip body that is not gzip',
      'submitJob',
      { params: { model: DEMO_MODEL }, headers: { 'Content-Encoding': 'gzip' }, body: Buffer.from('not gzip'), status: 400 },
      'malformed_body',
    ],
    [
      'submit: a brotli body',
      'submitJob',
      { params: { model: DEMO_MODEL }, headers: { 'Content-Encoding': 'br' }, body: { inputs: [oneRow()] }, status: 415 },
      'unsupported_content_encoding',
    ],
    [
      'put: a gzip body that is not gzip',
      'putDeployment',
      { params: { model: DEMO_MODEL }, headers: { 'Content-Encoding': 'gzip' }, body: Buffer.from('{}'), status: 400 },
      'malformed_body',
    ],
    [
      'bulk: a brotli body',
      'startBulkRun',
      { headers: { 'Content-Encoding': 'br' }, body: { model: DEMO_MODEL, input: 's3://b/in/', output: 's3://b/out/' }, status: 415 },
      'unsupported_content_encoding',
    ],
  ];

  it.each(errorCases)('%s', async (_, operationId, example, code) => {
    const spec = op(operationId);
    await expectError(spec, await send(spec, example), example.status, code);
  });

  it('every route that needs a key answers a documented 401 without one', async () => {
    for (const spec of OPERATIONS.filter((o) => o.auth)) {
      const params = Object.fromEntries(Object.keys(spec.params ?? {}).map((k) => [k, 'x']));
      await expectError(spec, await send(spec, { params, status: 401 }, { key: null }), 401, 'unauthorized');
    }
  });

  it('every operation was answered by the real API with a documented success', () => {
    const missing = OPERATIONS.filter((o) => ![...(checked.get(o.operationId) ?? [])].some((s) => s < 300)).map((o) => o.operationId);
    expect(missing).toEqual([]);
  });
});

describe('(c) the document is structurally valid OpenAPI 3.1', () => {
  it('has the top-level fields, unique operation ids, known tags and security schemes', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
    const components = doc.components as { schemas: Json; securitySchemes: Json };
    const tags = new Set((doc.tags as Array<{ name: string }>).map((t) => t.name));
    const ids = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, Json>>)) {
      expect(path.startsWith('/')).toBe(true);
      for (const [method, operation] of Object.entries(item)) {
        expect(['get', 'put', 'post', 'delete', 'patch', 'head', 'options']).toContain(method);
        const id = operation.operationId as string;
        expect(ids.has(id), `duplicate operationId ${id}`).toBe(false);
        ids.add(id);
        for (const tag of operation.tags as string[]) expect(tags.has(tag)).toBe(true);
        for (const requirement of operation.security as Json[]) {
          for (const scheme of Object.keys(requirement)) expect(components.securitySchemes[scheme]).toBeDefined();
        }
        checkParameters(path, operation);
        const statuses = Object.keys(operation.responses as Json);
        expect(
          statuses.some((s) => /^2\d\d$/.test(s)),
          `${method} ${path} has a 2xx`,
        ).toBe(true);
        for (const [status, response] of Object.entries(operation.responses as Record<string, Json>)) {
          expect(status).toMatch(/^[1-5]\d\d$/);
          expect(typeof response.description).toBe('string');
        }
      }
    }
  });

  it('every $ref resolves inside the document', () => {
    const refs = collectRefs(doc);
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of refs) {
      expect(ref.startsWith('#/'), ref).toBe(true);
      const target = ref
        .slice(2)
        .split('/')
        .reduce<unknown>((node, key) => (node as Json | undefined)?.[key], doc);
      expect(target, `${ref} resolves`).toBeDefined();
    }
  });

  it('every component is a JSON Schema zod can read back, and the examples satisfy their request schemas', () => {
    for (const name of Object.keys((doc.components as { schemas: Json }).schemas)) {
      expect(() => publishedSchema({ $ref: `#/components/schemas/${name}` })).not.toThrow();
    }
    for (const spec of OPERATIONS.filter((o) => o.body && o.example?.body !== undefined)) {
      const body = spec.example?.body;
      expect(spec.body?.schema.safeParse(body).success, spec.operationId).toBe(true);
      expect(publishedSchema(requestSchemaOf(spec)).safeParse(body).success, spec.operationId).toBe(true);
    }
    const withBinary = OPERATIONS.filter((o) => o.example?.binaryHeader !== undefined);
    expect(withBinary.map((o) => o.operationId)).toEqual(['submitJob', 'infer', 'inferVersion']);
    for (const spec of withBinary) {
      const header = documentedBinaryHeader(spec);
      expect(header).toEqual(spec.example?.binaryHeader);
      expect(spec.body?.binary?.header.safeParse(header).success, spec.operationId).toBe(true);
      expect(publishedSchema(binaryMediaOf(spec).requestBody['x-inference-header'] as Json).safeParse(header).success).toBe(true);
      // The header without `data`, with `binary_data_size`, is no JSON request: the two forms differ.
      expect(publishedSchema(requestSchemaOf(spec)).safeParse(header).success, spec.operationId).toBe(false);
    }
  });

  it('describes binary tensor data and compressed bodies on the operations that take them', () => {
    for (const id of ['submitJob', 'infer', 'inferVersion']) {
      const operation = operationOf(op(id));
      const content = (operation.requestBody as Json).content as Record<string, Json>;
      expect(Object.keys(content), id).toEqual(['application/json', 'application/octet-stream']);
      const binary = binaryMediaOf(op(id)).requestBody;
      expect(binary.schema).toMatchObject({ type: 'string', format: 'binary', contentMediaType: 'application/octet-stream' });
      expect(String((binary.schema as Json).description)).toMatch(/Inference-Header-Content-Length.*little-endian.*BYTES a 4-byte/s);
      expect(binary['x-inference-header']).toMatchObject({ $ref: expect.stringMatching(/BinaryHeader$/), examples: [expect.any(Object)] });
      const headers = headerParameters(operation);
      expect(headers['Inference-Header-Content-Length']).toMatchObject({ required: false, schema: { type: 'integer' } });
      const responses = operation.responses as Record<string, Json>;
      for (const code of ['invalid_header_length', 'binary_size_mismatch', 'malformed_body']) {
        expect(responses['400']?.description, `${id} 400`).toContain(`\`${code}\``);
      }
      expect(responses['413']?.description).toContain('`body_too_large`');
    }
    for (const id of ['infer', 'inferVersion', 'getJob']) {
      const ok = (operationOf(op(id)).responses as Record<string, Json>)['200'] as Json;
      expect(Object.keys(ok.content as Json), id).toEqual(['application/json', 'application/octet-stream']);
      expect(binaryMediaOf(op(id)).ok['x-inference-header']).toMatchObject({ $ref: expect.stringMatching(/BinaryHeader$/) });
      expect(ok.headers).toMatchObject({ 'Inference-Header-Content-Length': { schema: { type: 'integer' } } });
    }
    const getJob = operationOf(op('getJob'));
    const query = (getJob.parameters as Array<Json>).find((p) => p.in === 'query' && p.name === 'binary_data_output');
    expect(query?.schema).toMatchObject({ enum: expect.arrayContaining(['true', '1']) });
    expect(getJob.description).toContain('`Accept: application/octet-stream`');
    // Every body goes through the same decoder: each operation with one says so.
    const withBody = OPERATIONS.filter((o) => o.body);
    expect(withBody.length).toBeGreaterThan(3);
    for (const spec of withBody) {
      const operation = operationOf(spec);
      expect(headerParameters(operation)['Content-Encoding']?.schema, spec.operationId).toMatchObject({
        enum: expect.arrayContaining(['gzip', 'deflate']),
      });
      expect((operation.responses as Record<string, Json>)['415']?.description, spec.operationId).toContain(
        '`unsupported_content_encoding`',
      );
    }
    const serverMetadata = (doc.components as { schemas: Record<string, Json> }).schemas.ServerMetadata as {
      properties: Record<string, Json>;
    };
    expect(serverMetadata.properties.extensions?.description).toContain('binary_tensor_data');
  });
});

function op(operationId: string): OperationSpec {
  const spec = byId.get(operationId);
  if (!spec) throw new Error(`no operation ${operationId}`);
  return spec;
}

function oneRow() {
  return { name: 'features', shape: [1, 64], datatype: 'FP32', data: demoRow(5) };
}

/** oneRow's inputs as binary tensor data: 64 FP32 = 256 bytes. */
function demoBinaryRow() {
  return [{ name: 'features', shape: [1, 64], datatype: 'FP32', parameters: { binary_data_size: 256 } }];
}

function float32Bytes(values: number[]): Uint8Array {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => {
    bytes.writeFloatLE(v, i * 4);
  });
  return bytes;
}

/** A binary tensor data body, framed as the document says: the JSON header, then the parts (`pastTheBody`: a header length one byte too long). */
function binaryExample(header: unknown, parts: Uint8Array[], pastTheBody = false) {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const body = Buffer.concat([json, ...parts]);
  const length = pastTheBody ? body.byteLength + 1 : json.byteLength;
  return {
    body,
    contentType: 'application/octet-stream',
    headers: { 'Inference-Header-Content-Length': String(length) },
  };
}

async function send(
  spec: OperationSpec,
  example: OperationExample & { contentType?: string },
  options: { key?: string | null } = {},
): Promise<Response> {
  let path = spec.path.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => encodeURIComponent(example.params?.[name] ?? ''));
  if (example.query) path += `?${new URLSearchParams(example.query)}`;
  const headers = new Headers(example.headers);
  if (example.contentType) headers.set('content-type', example.contentType);
  const key = spec.auth ? (options.key === undefined ? KEY_A : options.key) : null;
  const raw = example.body;
  const body = raw === undefined ? undefined : typeof raw === 'string' || raw instanceof Buffer ? raw : JSON.stringify(raw);
  return stack.call(path, { method: spec.method.toUpperCase(), headers, body, key });
}

/** The status is `status`, documented for the route, and the body validates (zod and published schema). Returns the body. */
async function expectDocumented(spec: OperationSpec, res: Response, status: number): Promise<unknown> {
  const text = await res.text();
  expect(res.status, `${spec.operationId}: ${text.slice(0, 300)}`).toBe(status);
  const documented = spec.responses[status];
  expect(documented, `${spec.operationId} documents ${status}`).toBeDefined();
  const contentType = documented?.contentType ?? 'application/json';
  expect(res.headers.get('content-type') ?? '').toContain(contentType.split(';')[0]);
  const body: unknown = contentType.startsWith('application/json') ? JSON.parse(text) : text;
  const schema = documented?.schema ?? z.unknown();
  const parsed = schema.safeParse(body);
  expect(parsed.success, `${spec.operationId} ${status}: ${parsed.error?.message}`).toBe(true);
  if (schema !== EventStream && contentType.startsWith('application/json')) {
    const published = publishedSchema(responseSchemaOf(spec, status, contentType)).safeParse(body);
    expect(published.success, `${spec.operationId} ${status} (published): ${published.error?.message}`).toBe(true);
  }
  for (const header of Object.keys(documented?.headers ?? {})) {
    if (['Location', 'Retry-After', 'WWW-Authenticate'].includes(header)) expect(res.headers.get(header), header).not.toBeNull();
  }
  const seen = checked.get(spec.operationId) ?? new Set<number>();
  seen.add(status);
  checked.set(spec.operationId, seen);
  return body;
}

async function expectError(spec: OperationSpec, res: Response, status: number, code: string): Promise<void> {
  const body = (await expectDocumented(spec, res, status)) as { error: { code: string } };
  expect(body.error.code).toBe(code);
  expect(spec.responses[status]?.codes ?? [], `${spec.operationId} ${status} lists ${code}`).toContain(code);
}

/**
 * A binary tensor data answer: its status and form documented for the route (content type and
 * Inference-Header-Content-Length), its JSON header valid against the documented schema (zod and
 * published), and every byte after it one output's. Returns the header and each binary output's bytes.
 */
async function expectBinary(spec: OperationSpec, res: Response, status: number): Promise<{ header: Json; outputs: Map<string, Buffer> }> {
  const bytes = Buffer.from(await res.arrayBuffer());
  expect(res.status, `${spec.operationId}: ${bytes.subarray(0, 300).toString()}`).toBe(status);
  const form = spec.responses[status]?.binary;
  expect(form, `${spec.operationId} ${status} documents a binary form`).toBeDefined();
  expect(res.headers.get('content-type')).toBe('application/octet-stream');
  const published = responseOf(spec, status);
  expect(Object.keys(published.content as Json)).toContain('application/octet-stream');
  expect(Object.keys(published.headers as Json)).toContain('Inference-Header-Content-Length');
  const length = Number(res.headers.get('inference-header-content-length'));
  expect(Number.isInteger(length) && length > 0 && length <= bytes.byteLength, `header length ${length}`).toBe(true);
  const header = JSON.parse(bytes.subarray(0, length).toString('utf8')) as Json;
  const parsed = form?.header.safeParse(header);
  expect(parsed?.success, `${spec.operationId} ${status} header: ${parsed?.error?.message}`).toBe(true);
  const media = (published.content as Record<string, Json>)['application/octet-stream'] as Json;
  const check = publishedSchema(media['x-inference-header'] as Json).safeParse(header);
  expect(check.success, `${spec.operationId} ${status} header (published): ${check.error?.message}`).toBe(true);
  const outputs = new Map<string, Buffer>();
  let at = length;
  for (const output of (header.outputs ?? []) as Array<{ name: string; data?: unknown; parameters?: { binary_data_size?: number } }>) {
    const size = output.parameters?.binary_data_size;
    if (size === undefined) continue;
    expect(output).not.toHaveProperty('data');
    outputs.set(output.name, bytes.subarray(at, at + size));
    at += size;
  }
  expect(at, 'every byte after the header belongs to an output').toBe(bytes.byteLength);
  const seen = checked.get(spec.operationId) ?? new Set<number>();
  seen.add(status);
  checked.set(spec.operationId, seen);
  return { header, outputs };
}

function operationOf(spec: OperationSpec): Json {
  return (doc.paths as Record<string, Record<string, Json>>)[openApiPath(spec.path)]?.[spec.method] as Json;
}

function responseOf(spec: OperationSpec, status: number): Json {
  return (operationOf(spec).responses as Record<string, Json>)[String(status)] as Json;
}

function responseSchemaOf(spec: OperationSpec, status: number, contentType: string): Json {
  return ((responseOf(spec, status).content as Record<string, Json>)[contentType] as Json).schema as Json;
}

function requestSchemaOf(spec: OperationSpec): Json {
  const content = (operationOf(spec).requestBody as Json).content as Record<string, Json>;
  return (content['application/json'] as Json).schema as Json;
}

/** The published application/octet-stream media of an operation's request body and of its 200 (each `{}` when absent). */
function binaryMediaOf(spec: OperationSpec): { requestBody: Json; ok: Json } {
  const operation = operationOf(spec);
  const request = ((operation.requestBody as Json | undefined)?.content ?? {}) as Record<string, Json>;
  const ok = ((operation.responses as Record<string, Json>)['200']?.content ?? {}) as Record<string, Json>;
  return { requestBody: request['application/octet-stream'] ?? {}, ok: ok['application/octet-stream'] ?? {} };
}

/** The binary header example the document publishes for an operation's request body. */
function documentedBinaryHeader(spec: OperationSpec): unknown {
  const header = binaryMediaOf(spec).requestBody['x-inference-header'] as { examples?: unknown[] } | undefined;
  expect(header?.examples, `${spec.operationId} publishes a binary header example`).toHaveLength(1);
  return header?.examples?.[0];
}

/** An operation's header parameters by name. */
function headerParameters(operation: Json): Record<string, Json> {
  const parameters = (operation.parameters ?? []) as Array<Json & { name: string; in: string }>;
  return Object.fromEntries(parameters.filter((p) => p.in === 'header').map((p) => [p.name, p]));
}

/** A schema of the published document as a validator: its $refs pointed at the components as $defs. */
function publishedSchema(schema: Json): z.ZodType {
  const rewrite = (v: unknown) => JSON.parse(JSON.stringify(v).replaceAll('#/components/schemas/', '#/$defs/')) as Json;
  const defs = rewrite((doc.components as { schemas: Json }).schemas);
  // fromJSONSchema's parameter is zod's JSON Schema type; the document is plain JSON of that shape.
  return z.fromJSONSchema({ ...rewrite(schema), $defs: defs } as Parameters<typeof z.fromJSONSchema>[0]);
}

function checkParameters(path: string, operation: Json): void {
  const parameters = (operation.parameters ?? []) as Array<{ name: string; in: string; required?: boolean; schema?: Json }>;
  const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const inPath = parameters.filter((p) => p.in === 'path');
  expect(sorted(inPath.map((p) => p.name))).toEqual(sorted(templated as string[]));
  for (const p of parameters) {
    expect(['path', 'query', 'header', 'cookie']).toContain(p.in);
    expect(p.schema).toBeDefined();
    if (p.in === 'path') expect(p.required).toBe(true);
  }
}

function collectRefs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const item of node) collectRefs(item, out);
  else if (node && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') out.push(value);
      else if (key !== 'example') collectRefs(value, out);
    }
  }
  return out;
}

function parseSse(text: string): Array<{ event: string; data: string }> {
  return text
    .split('\n\n')
    .filter((block) => block.trim() !== '' && !block.startsWith(':'))
    .map((block) => ({ event: /^event: (.*)$/m.exec(block)?.[1] ?? '', data: /^data: (.*)$/m.exec(block)?.[1] ?? '' }));
}
