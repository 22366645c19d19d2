/**
 * The edge gateway (api/edge/) under a real workerd from npm, in front of a real stack (Redis,
 * S3, the API, a warmpool worker, ONNX Runtime), through a proxy that counts what reaches the
 * region and plays its failures (support/region-proxy.ts):
 *   - JSON and binary requests get the same answers through the edge as from the region;
 *   - what the region would refuse is refused at the edge with the same status and code, and
 *     never reaches the region; wrong keys are throttled per address there;
 *   - an answer lost on the way back (the region made the job, the edge never heard) makes one
 *     job, not two: the edge buffers it and forwards it again with the same Idempotency-Key;
 *   - a regional API (`warmpool api`, a child) SIGKILLed the moment it writes a job: the
 *     client's retry through the edge, and the edge's own, make no second job;
 *   - with the region down, submissions are answered 202 for `edge-…` jobs that can be polled
 *     and streamed at the edge, and each runs exactly once when the region is back; a body
 *     the edge cannot hold is a 413 naming its limit.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningEdge, startEdge } from '../scripts/commands/edge.ts';
import { freePort } from '../scripts/dev/free-port.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { type ApiChild, startApiChild } from './support/api-child.ts';
import { type RegionProxy, startRegionProxy } from './support/region-proxy.ts';
import { TEST_API_KEYS } from './support/services.ts';
import { KEY_A, startStack, type TestStack } from './support/stack.ts';

const F = 4;
const MAX_ROWS = 16;
/** Above the edge buffer's 128 KiB, so a body the region takes may still be too large to hold. */
const BODY_LIMIT = 256 * 1024;
const AUTH_BURST = 3;

let stack: TestStack;
let proxy: RegionProxy;
let edge: RunningEdge;
let outDir: string;

beforeAll(async () => {
  stack = await startStack({
    WARMUP_ITERATIONS: '1',
    HEARTBEAT_INTERVAL_MS: '300',
    BODY_LIMIT_BYTES: String(BODY_LIMIT),
    MAX_ROWS_PER_JOB: String(MAX_ROWS),
  });
  await stack.registry.publish({ name: 'scorer', version: '1', bytes: buildMlpModel({ features: F, hidden: 8, layers: 1 }), maxBatch: 8 });
  await stack.deployments.put({ model: 'scorer', version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker('scorer', '1');
  proxy = await startRegionProxy(stack.api.url);
  outDir = mkdtempSync(path.join(tmpdir(), 'warmpool-edge-'));
  edge = await startEdge({
    outDir,
    regionUrl: proxy.url,
    listen: `127.0.0.1:${await freePort()}`,
    apiKeys: TEST_API_KEYS,
    vars: { RATE_LIMIT_RPS: '10000', RATE_LIMIT_BURST: '10000', AUTH_FAILURES_PER_S: '0.01', AUTH_FAILURES_BURST: String(AUTH_BURST) },
  });
  await stack.waitForWorkers('scorer', 'active');
}, 120_000);

afterAll(async () => {
  await edge?.close();
  await proxy?.close();
  await stack?.close();
  if (outDir) rmSync(outDir, { recursive: true, force: true });
});

type Init = RequestInit & { key?: string | null; headers?: Record<string, string> };

function call(base: string, p: string, init: Init = {}): Promise<Response> {
  const { key = KEY_A, headers = {}, ...rest } = init;
  const h = new Headers(headers);
  if (key !== null) h.set('authorization', `Bearer ${key}`);
  if (rest.body !== undefined && !h.has('content-type')) h.set('content-type', 'application/json');
  return fetch(`${base}${p}`, { ...rest, headers: h });
}
const viaEdge = (p: string, init?: Init) => call(edge.url, p, init);
const direct = (p: string, init?: Init) => call(stack.api.url, p, init);

const rowsOf = (n: number, seed = 0) => Array.from({ length: n * F }, (_, k) => Math.sin(seed + k));
const inferBody = (n: number, seed = 0) =>
  JSON.stringify({ inputs: [{ name: 'features', shape: [n, F], datatype: 'FP32', data: rowsOf(n, seed) }] });

function binaryInfer(n: number, seed = 0): { body: Uint8Array<ArrayBuffer>; headers: Record<string, string> } {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'features', shape: [n, F], datatype: 'FP32', parameters: { binary_data_size: n * F * 4 } }],
      parameters: { binary_data_output: true },
    }),
  );
  const data = Buffer.from(new Float32Array(rowsOf(n, seed)).buffer);
  return {
    body: new Uint8Array(Buffer.concat([header, data])) as Uint8Array<ArrayBuffer>,
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.byteLength) },
  };
}

async function untilDone(get: () => Promise<Response>, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const body = (await (await get()).json()) as Record<string, unknown>;
    if (['succeeded', 'failed', 'canceled'].includes(String(body.status))) return body;
    if (Date.now() > deadline) throw new Error(`job still ${String(body.status)}: ${JSON.stringify(body)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** POSTs of submissions the region made a job for (not replays). */
const jobsMade = () => proxy.reached().filter((r) => r.method === 'POST' && r.path.endsWith('/jobs') && r.status === 202 && !r.replayed);

describe('the same answers through the edge', () => {
  it('sync inference, JSON and binary', async () => {
    const json = await viaEdge('/v2/models/scorer/infer', { method: 'POST', body: inferBody(3) });
    const regional = await direct('/v2/models/scorer/infer', { method: 'POST', body: inferBody(3) });
    expect(json.status).toBe(200);
    const a = (await json.json()) as { outputs: unknown; model_name: string };
    const b = (await regional.json()) as { outputs: unknown; model_name: string };
    expect(a.outputs).toEqual(b.outputs);
    expect(a.model_name).toBe(b.model_name);

    const bin = binaryInfer(3);
    const e = await viaEdge('/v2/models/scorer/infer', { method: 'POST', body: bin.body, headers: bin.headers });
    const d = await direct('/v2/models/scorer/infer', { method: 'POST', body: bin.body, headers: bin.headers });
    expect(e.status).toBe(200);
    expect(e.headers.get('inference-header-content-length')).toBe(d.headers.get('inference-header-content-length'));
    const eb = Buffer.from(await e.arrayBuffer());
    const db = Buffer.from(await d.arrayBuffer());
    const at = Number(d.headers.get('inference-header-content-length'));
    expect(eb.subarray(at)).toEqual(db.subarray(at));
  });

  it('an async job submitted, polled and read in binary through the edge', async () => {
    const res = await viaEdge('/v1/models/scorer/jobs', { method: 'POST', body: inferBody(2, 5) });
    expect(res.status).toBe(202);
    // No key sent: the edge minted one and says which, so the client can retry with it.
    expect(res.headers.get('idempotency-key')).toMatch(/^edge-/);
    const { id } = (await res.json()) as { id: string };
    expect(id.startsWith('edge-')).toBe(false);
    const done = await untilDone(() => viaEdge(`/v1/jobs/${id}`));
    expect(done.status).toBe('succeeded');
    expect(done).toEqual(await (await direct(`/v1/jobs/${id}`)).json());
    const accept = { accept: 'application/octet-stream' };
    const e = Buffer.from(await (await viaEdge(`/v1/jobs/${id}`, { headers: accept })).arrayBuffer());
    const d = Buffer.from(await (await direct(`/v1/jobs/${id}`, { headers: accept })).arrayBuffer());
    expect(e).toEqual(d);
  });
});

describe('refused at the edge, as the region refuses, without reaching it', () => {
  const features = (shape: number[], datatype = 'FP32', n = shape.reduce((a, b) => a * b, 1)) =>
    JSON.stringify({ inputs: [{ name: 'features', shape, datatype, data: Array.from({ length: n }, () => 0.5) }] });
  const cases: Array<[string, string, Init]> = [
    ['a wrong width', '/v1/models/scorer/jobs', { method: 'POST', body: features([1, F + 1]) }],
    ['a wrong datatype', '/v1/models/scorer/jobs', { method: 'POST', body: features([1, F], 'INT32') }],
    [
      'an unknown input',
      '/v1/models/scorer/jobs',
      { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'x', shape: [1], datatype: 'FP32', data: [1] }] }) },
    ],
    ['too many rows', '/v1/models/scorer/jobs', { method: 'POST', body: features([MAX_ROWS + 1, F]) }],
    ['malformed JSON', '/v1/models/scorer/jobs', { method: 'POST', body: '{"inputs": [' }],
    ['an unknown model', '/v1/models/nosuch/jobs', { method: 'POST', body: features([1, F]) }],
    ['an unknown version', '/v1/models/scorer/jobs', { method: 'POST', body: JSON.stringify({ version: '9', inputs: [] }) }],
    ['a body over the limit', '/v1/models/scorer/jobs', { method: 'POST', body: ' '.repeat(BODY_LIMIT + 1) + features([1, F]) }],
    ['bytes that are not gzip', '/v1/models/scorer/jobs', { method: 'POST', body: 'not gzip', headers: { 'content-encoding': 'gzip' } }],
    [
      'gzip past the limit once decompressed',
      '/v1/models/scorer/jobs',
      { method: 'POST', body: new Uint8Array(gzipSync(' '.repeat(BODY_LIMIT * 2))), headers: { 'content-encoding': 'gzip' } },
    ],
    [
      'a bad Idempotency-Key',
      '/v1/models/scorer/jobs',
      { method: 'POST', body: features([1, F]), headers: { 'idempotency-key': 'k'.repeat(256) } },
    ],
    ['sync: a wrong width', '/v2/models/scorer/infer', { method: 'POST', body: features([2, F - 1]) }],
    ['sync: an unknown version', '/v2/models/scorer/versions/9/infer', { method: 'POST', body: features([1, F]) }],
    ['no key', '/v1/models/scorer/jobs', { method: 'POST', body: features([1, F]), key: null }],
  ];

  it.each(cases)('%s', async (_, p, init) => {
    const regional = await direct(p, init);
    const before = proxy.reached().length;
    const atEdge = await viaEdge(p, init);
    const want = (await regional.json()) as { error: { code: string } };
    const got = (await atEdge.json()) as { error: { code: string } };
    expect(regional.status).toBeGreaterThanOrEqual(400);
    expect([atEdge.status, got.error.code]).toEqual([regional.status, want.error.code]);
    expect(proxy.reached().length).toBe(before);
  });

  it('wrong keys from one address: 401, then 429 with Retry-After, none of them at the region', async () => {
    const before = proxy.reached().length;
    const statuses: number[] = [];
    for (let i = 0; i < AUTH_BURST + 2; i++) {
      const res = await viaEdge('/v1/models', { key: 'wrong-key-000000000000', headers: { 'cf-connecting-ip': '203.0.113.9' } });
      statuses.push(res.status);
      if (res.status === 429) expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      await res.body?.cancel();
    }
    expect(statuses).toEqual([...Array(AUTH_BURST).fill(401), 429, 429]);
    // Another address is not throttled by this one's failures.
    expect((await viaEdge('/v1/models', { key: 'wrong-key-000000000000', headers: { 'cf-connecting-ip': '203.0.113.10' } })).status).toBe(
      401,
    );
    expect(proxy.reached().length).toBe(before);
  });
});

describe('when the region cannot answer', () => {
  it('an answer lost on the way back makes one job, not two', async () => {
    const made = jobsMade().length;
    proxy.mode = 'lose-answer';
    const res = await viaEdge('/v1/models/scorer/jobs', { method: 'POST', body: inferBody(1, 11) });
    expect(res.status).toBe(202);
    const accepted = (await res.json()) as { id: string; buffered?: boolean };
    expect(accepted.id).toMatch(/^edge-/);
    expect(accepted.buffered).toBe(true);
    const done = await untilDone(() => viaEdge(`/v1/jobs/${accepted.id}`));
    expect(done.status).toBe('succeeded');
    // The region made it on the first send; the buffer's send was answered as a replay.
    expect(jobsMade().length).toBe(made + 1);
    const sends = proxy
      .reached()
      .filter((r) => r.method === 'POST' && r.path === '/v1/models/scorer/jobs')
      .slice(-2);
    expect(sends.map((r) => [r.status, r.replayed, r.delivered])).toEqual([
      [202, false, false],
      [202, true, true],
    ]);
  });

  it('region down: 202 for edge jobs, polled and streamed at the edge, each run once when it is back', async () => {
    const made = jobsMade().length;
    proxy.mode = 'down';
    const sync = await viaEdge('/v2/models/scorer/infer', { method: 'POST', body: inferBody(1) });
    expect(sync.status).toBe(503);
    expect(((await sync.json()) as { error: { code: string } }).error.code).toBe('region_unreachable');
    expect(Number(sync.headers.get('retry-after'))).toBeGreaterThan(0);

    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await viaEdge('/v1/models/scorer/jobs', {
        method: 'POST',
        body: inferBody(1, 20 + i),
        headers: { 'idempotency-key': `down-${i}` },
      });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { id: string }).id);
    }
    // The same key again while it is held: the same edge job.
    const again = await viaEdge('/v1/models/scorer/jobs', {
      method: 'POST',
      body: inferBody(1, 20),
      headers: { 'idempotency-key': 'down-0' },
    });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as { id: string }).id).toBe(ids[0]);

    // Too large to hold at the edge (the region itself would take it): 413, nothing held.
    const large = await viaEdge('/v1/models/scorer/jobs', { method: 'POST', body: ' '.repeat(130 * 1024) + inferBody(1, 30) });
    expect(large.status).toBe(413);
    expect(Number(large.headers.get('retry-after'))).toBeGreaterThan(0);
    const refused = (await large.json()) as { error: { code: string; message: string } };
    expect(refused.error.code).toBe('buffer_limit_exceeded');
    expect(refused.error.message).toContain('128 KiB');

    const held = (await (await viaEdge(`/v1/jobs/${ids[0]}`)).json()) as { status: string; buffered: boolean; waiting: { code: string } };
    expect([held.status, held.buffered, held.waiting.code]).toEqual(['queued', true, 'region_unreachable']);
    // Another tenant cannot see it.
    expect((await viaEdge(`/v1/jobs/${ids[0]}`, { key: 'key-bbbbbbbbbbbbbbbb' })).status).toBe(404);

    const events = await viaEdge(`/v1/jobs/${ids[1]}/events`);
    expect(events.headers.get('content-type')).toContain('text/event-stream');
    const reader = (events.body as ReadableStream<Uint8Array>).getReader();
    let text = '';
    const firstChunk = await reader.read();
    text += new TextDecoder().decode(firstChunk.value);
    expect(text).toMatch(/^event: queued\n/);

    proxy.mode = 'pass';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toMatch(/event: succeeded\n/);

    for (const id of ids) expect((await untilDone(() => viaEdge(`/v1/jobs/${id}`))).status).toBe('succeeded');
    expect(jobsMade().length).toBe(made + 3);
  }, 90_000);
});

describe('the regional API killed mid-request', () => {
  let api: ApiChild | undefined;
  /**
   * `watcher` subscribes to the job keys' keyspace events, which `admin` turns on for the test and
   * back off after. (Not MONITOR: it streams every command of every suite sharing this Redis, and
   * under that flood ioredis's monitor connection lost its reply order.)
   */
  let watcher: Redis | undefined;
  let admin: Redis | undefined;
  let eventsBefore: string | undefined;

  /** A `warmpool api` child on the stack's services; the proxy (and so the edge) goes to it. */
  const startApi = async () => {
    api = await startApiChild({ env: stack.env, label: 'killed-api' });
    proxy.target = api.url;
  };

  beforeAll(startApi, 90_000);

  afterAll(async () => {
    proxy.target = stack.api.url;
    watcher?.disconnect();
    if (admin && eventsBefore !== undefined) await admin.config('SET', 'notify-keyspace-events', eventsBefore);
    admin?.disconnect();
    await api?.close();
  });

  const entries = () =>
    stack.withQueue('scorer', '1', async (q) => {
      const counts = await q.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed');
      return Object.values(counts).reduce((a, b) => a + b, 0);
    });

  it('SIGKILLed as it writes the job: the retries through the edge make one job', async () => {
    const before = await entries();
    // The kill lands just after Redis has the job (index and entry go in one pipeline), before
    // or after the API commits the key: either way a retry must find that job.
    admin = new Redis(stack.config.redisUrl);
    eventsBefore = ((await admin.config('GET', 'notify-keyspace-events')) as string[])[1] ?? '';
    await admin.config('SET', 'notify-keyspace-events', 'K$');
    watcher = new Redis(stack.config.redisUrl);
    const jobKeys = `${stack.config.queuePrefix}:job:job_`;
    const killed = new Promise<void>((resolve) => {
      watcher?.on('pmessage', (_pattern: string, _channel: string, event: string) => {
        const child = api?.child;
        if (event === 'set' && child?.exitCode === null) {
          child.kill('SIGKILL');
          resolve();
        }
      });
    });
    await watcher.psubscribe(`__keyspace@*__:${jobKeys}*`);
    const send = () =>
      viaEdge('/v1/models/scorer/jobs', { method: 'POST', body: inferBody(2, 41), headers: { 'idempotency-key': 'kill-mid-request' } });
    const first = await send();
    await killed;
    // The edge never got the answer: it holds the submission and will send it again itself.
    expect(first.status).toBe(202);
    const held = (await first.json()) as { id: string; buffered?: boolean };
    expect(held.buffered).toBe(true);

    await api?.close(); // waits for the killed child's exit
    await startApi();
    // The client's own retry, with its key, once the region is back.
    const retry = await send();
    expect(retry.status).toBe(202);
    const job = (await retry.json()) as { id: string };
    expect(job.id).toMatch(/^job_/);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');

    expect((await untilDone(() => viaEdge(`/v1/jobs/${job.id}`))).status).toBe('succeeded');
    const forwarded = await untilDone(() => viaEdge(`/v1/jobs/${held.id}`));
    expect(forwarded).toMatchObject({ id: job.id, status: 'succeeded' });
    expect((await entries()) - before).toBe(1);
  }, 120_000);
});
