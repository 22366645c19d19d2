/**
 * Bulk runs through the HTTP API on the real stack: the API records the run, the dispatcher's
 * supervisor drives it (as `warmpool dispatcher` does), a real worker scores the chunks with ONNX
 * Runtime and writes the parts to the S3 server; a local receiver gets the run's signed webhooks.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as ort from 'onnxruntime-node';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningDispatcher, startDispatcher } from '../api/dispatcher/main.ts';
import type { RunManifest } from '../infra/bulk/run-manifest.ts';
import { createLogger } from '../infra/kernel/log.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { testBulkPrefix, uniqueId } from './support/services.ts';
import { KEY_B, startStack, type TestStack } from './support/stack.ts';

type Json = Record<string, unknown>;
interface RunBody {
  id: string;
  status: string;
  progress: { rowsDone: number; rowsTotal: number; chunksDone: number; chunksTotal?: number; rowsPerSecond: number };
  manifest?: string;
  error?: { code: string; message: string };
  links: { self: string };
}

const MODEL = 'bulk-api-model';
const IDLE = 'bulk-api-idle'; // published, never served: its chunks stay queued
const FEATURES = 4;
const model = buildMlpModel({ features: FEATURES, hidden: 8, layers: 1 });

let stack: TestStack;
let dispatcher: RunningDispatcher;
let s3: ObjectStore & { close(): void };
let reference: ort.InferenceSession;
let root: string;
const received: Array<{ headers: Record<string, string>; body: string }> = [];
const receiver = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (body += chunk));
  req.on('end', () => {
    received.push({ headers: req.headers as Record<string, string>, body });
    res.writeHead(204).end();
  });
});

/** `rows` deterministic rows per object, ids `<object>-<n>`. */
function rowsOf(object: string, rows: number): Array<{ id: string; features: number[] }> {
  return Array.from({ length: rows }, (_, n) => ({
    id: `${object}-${n}`,
    features: Array.from({ length: FEATURES }, (_, k) => Math.round(Math.sin(n * 7 + k + object.length) * 1000) / 1000),
  }));
}

async function putJsonl(prefix: string, object: string, rows: Json[]): Promise<void> {
  await s3.put(`${prefix}${object}.jsonl`, `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);
}

const s3Url = (prefix: string) => `s3://${stack.config.s3.bucket}/${prefix}`;

function post(body: unknown, key?: string): Promise<Response> {
  return stack.call('/v1/bulk-runs', { method: 'POST', body: JSON.stringify(body), ...(key ? { key } : {}) });
}

async function settle(id: string, timeoutMs = 60_000): Promise<RunBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await stack.call(`/v1/bulk-runs/${id}`);
    expect(res.status).toBe(200);
    const run = (await res.json()) as RunBody;
    if (run.status !== 'running') return run;
    if (Date.now() > deadline) throw new Error(`bulk run ${id} still running after ${timeoutMs} ms: ${JSON.stringify(run.progress)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function eventually<T>(read: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function expectError(res: Response, status: number, code?: string): Promise<void> {
  const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
  expect(res.status, JSON.stringify(body)).toBe(status);
  expect(typeof body.error?.code).toBe('string');
  expect(typeof body.error?.message).toBe('string');
  if (code) expect(body.error?.code).toBe(code);
}

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300', WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1' });
  s3 = createS3ObjectStore(stack.config.s3);
  root = `${testBulkPrefix(stack.config.s3.prefix, 'tenant-a')}bulk-api/`;
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  await stack.registry.publish({ name: MODEL, version: '1', bytes: model, maxBatch: 16 });
  await stack.registry.publish({ name: IDLE, version: '1', bytes: model, maxBatch: 16 });
  await stack.deployments.put({ model: MODEL, version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker(MODEL, '1');
  await stack.waitForWorkers(MODEL, 'active');
  dispatcher = startDispatcher(stack.config, createLogger('silent'), { bulkProgressIntervalMs: 0 });
  reference = await ort.InferenceSession.create(model);
}, 120_000);

afterAll(async () => {
  await dispatcher?.close();
  await stack?.close();
  s3?.close();
  await reference?.release();
  await new Promise<void>((resolve) => {
    receiver.closeAllConnections();
    receiver.close(() => resolve());
  });
});

describe('a bulk run through the API', () => {
  const runId = uniqueId('nightly');
  const input = () => `${root}run/in/`;
  const output = () => `${root}run/out/`;
  const rows = [...rowsOf('a', 5), ...rowsOf('b', 4)];
  const request = () => ({
    model: MODEL,
    input: s3Url(input()),
    output: s3Url(output()),
    chunkRows: 3,
    runId,
    webhook: { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/bulk` },
  });

  it('is accepted, driven by the dispatcher to succeeded, and every id lands exactly once with ONNX Runtime’s values', async () => {
    await putJsonl(input(), 'a', rows.slice(0, 5));
    await putJsonl(input(), 'b', rows.slice(5));
    const res = await post(request());
    const created = (await res.json()) as RunBody;
    expect(res.status, JSON.stringify(created)).toBe(202);
    expect(created).toMatchObject({ id: runId, status: 'running', links: { self: `/v1/bulk-runs/${runId}` } });
    expect(res.headers.get('location')).toBe(`/v1/bulk-runs/${runId}`);

    const run = await settle(runId);
    expect(run.status, JSON.stringify(run.error)).toBe('succeeded');
    expect(run.progress).toMatchObject({ rowsDone: rows.length, rowsTotal: rows.length });
    expect(run.manifest).toBe(s3Url(`${output()}_manifest.json`));

    const keys = (await s3.list(output())).map((o) => o.key.slice(output().length));
    expect(keys).toContain('_manifest.json');
    const parts = keys.filter((k) => /^part-\d{6}\.jsonl$/.test(k));
    // Chunks never span objects, and a chunk is never below MIN_CHUNK_BYTES: one part per object here.
    expect(parts.length).toBe(run.progress.chunksTotal);
    expect(parts.length).toBe(2);
    const scored = new Map<string, number[]>();
    for (const part of parts) {
      const text = Buffer.from((await s3.getBytes(`${output()}${part}`)) ?? []).toString('utf8');
      for (const line of text.split('\n').filter(Boolean)) {
        const { id, score } = JSON.parse(line) as { id: string; score: number[] };
        expect(scored.has(id), `id ${id} twice`).toBe(false);
        scored.set(id, score.flat());
      }
    }
    expect([...scored.keys()].sort()).toEqual(rows.map((r) => r.id).sort());
    const feeds = { features: new ort.Tensor('float32', Float32Array.from(rows.flatMap((r) => r.features)), [rows.length, FEATURES]) };
    const expected = (await reference.run(feeds)).score?.data as Float32Array;
    for (const [i, r] of rows.entries()) expect(scored.get(r.id)?.[0]).toBeCloseTo(expected[i] as number, 5);

    const manifest = JSON.parse(Buffer.from((await s3.getBytes(`${output()}_manifest.json`)) ?? []).toString('utf8')) as Json;
    expect(manifest).toMatchObject({ model: MODEL, version: '1' });
  });

  it('sends the run’s webhooks signed with the tenant’s secret', async () => {
    const succeeded = await eventually(
      () => received.find((r) => (JSON.parse(r.body) as { type: string }).type === 'bulk.succeeded'),
      'the bulk.succeeded webhook',
    );
    const { secret } = (await (await stack.call('/v1/webhooks/secret')).json()) as { secret: string };
    const verifier = new Webhook(secret);
    for (const got of received) {
      const event = verifier.verify(got.body, got.headers) as { type: string; data: RunBody };
      expect(['bulk.progress', 'bulk.succeeded']).toContain(event.type);
      expect(event.data.id).toBe(runId);
    }
    const data = (verifier.verify(succeeded.body, succeeded.headers) as { data: RunBody }).data;
    expect(data).toMatchObject({ status: 'succeeded', progress: { rowsDone: rows.length } });
    // Its rows/s is the manifest's and the API's: one figure, rows ÷ the run's duration.
    const manifest = JSON.parse(Buffer.from((await s3.getBytes(`${output()}_manifest.json`)) ?? []).toString('utf8')) as RunManifest;
    const view = (await (await stack.call(`/v1/bulk-runs/${runId}`)).json()) as RunBody;
    expect(data.progress.rowsPerSecond).toBe(manifest.timings.rowsPerSecond);
    expect(view.progress.rowsPerSecond).toBe(manifest.timings.rowsPerSecond);
  });

  it('answers the same run again for the same id and spec (200), and 409 for another spec', async () => {
    const again = await post(request());
    expect(again.status).toBe(200);
    expect(((await again.json()) as RunBody).id).toBe(runId);
    await expectError(await post({ ...request(), chunkRows: 4 }), 409, 'run_conflict');
    // The bad-row budget decides whether a run fails: another one is another run.
    const budget = await post({ ...request(), maxBadRows: 5 });
    expect(((await budget.clone().json()) as { error: { message: string } }).error.message).toContain(`"maxBadRows" 5 (the run's: none)`);
    await expectError(budget, 409, 'run_conflict');
    expect(((await (await stack.call(`/v1/bulk-runs/${runId}`)).json()) as RunBody).status).toBe('succeeded');
  });

  it('is another tenant’s 404, and cannot be canceled once succeeded', async () => {
    await expectError(await stack.call(`/v1/bulk-runs/${runId}`, { key: KEY_B }), 404, 'bulk_run_not_found');
    await expectError(await stack.call(`/v1/bulk-runs/${runId}`, { method: 'DELETE', key: KEY_B }), 404, 'bulk_run_not_found');
    await expectError(await stack.call('/v1/bulk-runs/no-such-run'), 404, 'bulk_run_not_found');
    await expectError(await stack.call(`/v1/bulk-runs/${runId}`, { method: 'DELETE' }), 409, 'bulk_run_finished');
  });
});

describe('canceling a bulk run', () => {
  it('stops it: canceled, its queued chunks removed; canceling again succeeds again', async () => {
    const input = `${root}cancel/in/`;
    await putJsonl(input, 'a', rowsOf('a', 12));
    const res = await post({ model: IDLE, version: '1', input: s3Url(input), output: s3Url(`${root}cancel/out/`), chunkRows: 2 });
    const { id } = (await res.json()) as RunBody;
    expect(res.status).toBe(202);
    // Wait until the supervisor has queued some chunks (no worker serves this model).
    await eventually(
      () => stack.withQueue(IDLE, '1', async (q) => ((await q.getJobCountByTypes('waiting', 'prioritized')) > 0 ? true : undefined)),
      'chunks queued',
    );
    const canceled = await stack.call(`/v1/bulk-runs/${id}`, { method: 'DELETE' });
    expect(canceled.status).toBe(200);
    expect(((await canceled.json()) as RunBody).status).toBe('canceled');
    expect(((await (await stack.call(`/v1/bulk-runs/${id}`)).json()) as RunBody).status).toBe('canceled');
    await eventually(
      () => stack.withQueue(IDLE, '1', async (q) => ((await q.getJobCountByTypes('waiting', 'prioritized')) === 0 ? true : undefined)),
      'queued chunks removed',
    );
    const again = await stack.call(`/v1/bulk-runs/${id}`, { method: 'DELETE' });
    expect(again.status).toBe(200);
    expect(((await again.json()) as RunBody).status).toBe('canceled');
  });
});

describe('bad requests', () => {
  const valid = () => ({ model: MODEL, input: s3Url(`${root}run/in/`), output: s3Url(`${root}bad/out/`) });

  // Changes are functions: the S3 locations exist only once the stack has started.
  it.each([
    ['input is not an s3 URL', () => ({ input: 'https://example.com/in/' }), 400],
    ['unknown model', () => ({ model: 'no-such-model' }), 404],
    ['chunkRows 0', () => ({ chunkRows: 0 }), 400],
    ['a private webhook URL', () => ({ webhook: { url: 'http://10.1.2.3/hook' } }), 422],
    ['a metadata-address webhook URL', () => ({ webhook: { url: 'http://169.254.169.254/latest' } }), 422],
    ['an unknown field', () => ({ chunkrows: 5 }), 400],
    ['output inside the input', () => ({ output: s3Url(`${root}run/in/out/`) }), 400],
  ])('%s → 4xx naming the problem', async (_, change, status) => {
    await expectError(await post({ ...valid(), ...change() }), status);
  });

  it('an empty input prefix is refused before anything runs', async () => {
    const res = await post({ ...valid(), input: s3Url(`${root}nothing-here/`) });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    await expectError(res, res.status);
  });

  it('a body that is not JSON, or not an object', async () => {
    await expectError(
      await stack.call('/v1/bulk-runs', { method: 'POST', body: '{', headers: { 'content-type': 'application/json' } }),
      400,
      'malformed_json',
    );
    await expectError(await post([1, 2]), 400);
    await expectError(await stack.call('/v1/bulk-runs', { method: 'POST', body: 'x', headers: { 'content-type': 'text/plain' } }), 415);
  });
});
