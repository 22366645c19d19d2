/**
 * Large answers and many strings, bounded before the work (issue 33, attacks 6 and 7), on a real
 * API, real workers (ONNX Runtime) and real HTTP:
 *   - a job whose outputs pass MAX_JSON_OUTPUT_ELEMENTS: GET answers 413 `output_too_large`
 *     naming the count and the binary form, and the binary form returns every element; a sync
 *     call likewise, with its job id, and answers binary when asked;
 *   - another tenant is answered while one fetches large results;
 *   - a tenant that GETs a large (under-bound) result again and again is 429 once its byte
 *     budget is spent, while another tenant's GETs of the same size are answered;
 *   - a request of more BYTES elements than MAX_BYTES_ELEMENTS_PER_JOB is 413 `too_many_elements`,
 *     counted from the shape: 2 Mi empty strings (8 MiB), or a shape with no bytes behind it at all.
 *
 * Models: `repeat` (x FP32 [b, n] → y [b, 256 n], scripts/fixtures' buildRepeatModel: 256 floats
 * in make 64 Ki out) and `echo` (BYTES [b, n] in and out).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildRepeatModel, buildStringEchoModel } from '../scripts/fixtures/onnx-models.ts';
import { TEST_API_KEYS } from './support/services.ts';
import { KEY_A, KEY_B, startStack, type TestStack } from './support/stack.ts';

const MiB = 1024 * 1024;
const TIMES = 256;
const MAX_JSON = 65_536;
const KEY_C = 'key-cccccccccccccccc';
/** Tenant D sends the 8 MiB body alone, with its budget whole. */
const KEY_D = 'key-dddddddddddddddd';
let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({
    WARMUP_ITERATIONS: '1',
    HEARTBEAT_INTERVAL_MS: '300',
    API_KEYS: `${TEST_API_KEYS},tenant-c:${KEY_C},tenant-d:${KEY_D}`,
    MAX_JSON_OUTPUT_ELEMENTS: String(MAX_JSON),
    BODY_LIMIT_BYTES: String(10 * MiB),
    // 10 MiB at once, then 1 KiB/s: a test's few seconds refill nothing that matters.
    RATE_LIMIT_BYTES_PER_S: '1024',
    RATE_LIMIT_BYTES_BURST: String(10 * MiB),
  });
  await stack.registry.publish({ name: 'repeat', version: '1', bytes: buildRepeatModel(TIMES), maxBatch: 4 });
  await stack.registry.publish({ name: 'echo', version: '1', bytes: buildStringEchoModel(), maxBatch: 4 });
  for (const model of ['repeat', 'echo']) {
    await stack.deployments.put({ model, version: '1', min: 1, max: 1, standby: 0 });
    await stack.startWorker(model, '1');
  }
  await stack.waitForWorkers('repeat', 'active');
  await stack.waitForWorkers('echo', 'active');
}, 180_000);

afterAll(async () => {
  await stack?.close();
});

/** `n` floats, different per seed. */
function floats(n: number, seed: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => Math.round(Math.sin(seed * 7 + i) * 1000) / 8);
}

/** What `repeat` answers for one row of `x`: the row `TIMES` times. */
function repeated(x: Float32Array): Float32Array {
  const y = new Float32Array(x.length * TIMES);
  for (let k = 0; k < TIMES; k++) y.set(x, k * x.length);
  return y;
}

/** A binary body: the JSON header, then the parts. */
function binaryBody(header: unknown, parts: Uint8Array[]): { body: Uint8Array<ArrayBuffer>; headers: Record<string, string> } {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  return {
    body: new Uint8Array(Buffer.concat([json, ...parts])),
    headers: { 'inference-header-content-length': String(json.byteLength), 'content-type': 'application/octet-stream' },
  };
}

/** A binary answer cut into its JSON header and the bytes after it. */
async function readBinary(res: Response): Promise<{ header: { outputs: Array<{ name: string; shape: number[] }> }; bytes: Buffer }> {
  const body = Buffer.from(await res.arrayBuffer());
  const length = Number(res.headers.get('inference-header-content-length'));
  return { header: JSON.parse(body.subarray(0, length).toString('utf8')), bytes: body.subarray(length) };
}

async function submitRepeat(key: string, x: Float32Array): Promise<string> {
  const { body, headers } = binaryBody(
    { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, x.length], parameters: { binary_data_size: x.byteLength } }] },
    [new Uint8Array(x.buffer)],
  );
  const res = await stack.call('/v1/models/repeat/jobs', { method: 'POST', key, body, headers });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

/** Polls the job (binary: a finished job's first answer then costs its exact size) until it ends; its last answer. */
async function finished(key: string, id: string): Promise<Response> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const res = await stack.call(`/v1/jobs/${id}`, { key, headers: { accept: 'application/octet-stream' } });
    if (res.headers.get('content-type') === 'application/octet-stream') return res;
    const body = (await res.json()) as { status?: string };
    if (body.status === 'failed' || body.status === 'canceled') throw new Error(`job ${id} ${body.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`job ${id} did not finish`);
}

describe('a JSON answer past MAX_JSON_OUTPUT_ELEMENTS', () => {
  it('GET of the job is 413 output_too_large naming the count and the binary form, which returns every element', async () => {
    const x = floats(512, 1); // 128 Ki elements out: twice the bound
    const id = await submitRepeat(KEY_A, x);
    const binary = await readBinary(await finished(KEY_A, id));
    expect(binary.header.outputs[0]?.shape).toEqual([1, 512 * TIMES]);
    expect(Buffer.from(repeated(x).buffer).equals(binary.bytes)).toBe(true);

    const res = await stack.call(`/v1/jobs/${id}`);
    expect(res.status).toBe(413);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('output_too_large');
    expect(error.message).toContain(`hold ${512 * TIMES} elements, more than the ${MAX_JSON}`);
    expect(error.message).toContain('MAX_JSON_OUTPUT_ELEMENTS');
    expect(error.message).toContain(`GET /v1/jobs/${id} with Accept: application/octet-stream`);
    // The query parameter's binary form too.
    const query = await stack.call(`/v1/jobs/${id}?binary_data_output=true`);
    expect(query.status).toBe(200);
    expect((await readBinary(query)).bytes.equals(binary.bytes)).toBe(true);
    // Its event stream (the job has ended: one event, then the end) leaves the outputs out and says why.
    const events = await (await stack.call(`/v1/jobs/${id}/events`)).text();
    expect(events).toMatch(/^event: succeeded\ndata: /);
    const data = JSON.parse(events.split('\n')[1]?.slice('data: '.length) ?? '') as Record<string, unknown>;
    expect(data.outputs).toBeUndefined();
    expect(data.outputsOmitted).toMatchObject({ elements: 512 * TIMES });
    expect(String((data.outputsOmitted as { message: string }).message)).toContain('Accept: application/octet-stream');
  });

  it('a sync call is 413 with its job id and both ways to the binary form; asked binary, it answers', async () => {
    const x = floats(300, 2);
    const input = { name: 'x', datatype: 'FP32', shape: [1, 300], data: Array.from(x) };
    const res = await stack.call('/v2/models/repeat/infer', { method: 'POST', body: JSON.stringify({ inputs: [input] }) });
    expect(res.status).toBe(413);
    const { error } = (await res.json()) as { error: { code: string; message: string; job_id: string } };
    expect(error.code).toBe('output_too_large');
    expect(error.message).toContain('"binary_data_output": true');
    expect(error.message).toContain(`GET /v1/jobs/${error.job_id} with Accept: application/octet-stream`);
    // The job that answered still holds the outputs: read binary, without running the model again.
    const kept = await stack.call(`/v1/jobs/${error.job_id}`, { headers: { accept: 'application/octet-stream' } });
    expect(kept.status).toBe(200);
    expect((await readBinary(kept)).bytes.equals(Buffer.from(repeated(x).buffer))).toBe(true);

    const asked = await stack.call('/v2/models/repeat/infer', {
      method: 'POST',
      body: JSON.stringify({ inputs: [input], parameters: { binary_data_output: true } }),
    });
    expect(asked.status).toBe(200);
    expect((await readBinary(asked)).bytes.equals(Buffer.from(repeated(x).buffer))).toBe(true);
  });

  it('at the bound, the JSON answer is built from the packed elements and equals the model’s outputs', async () => {
    const x = floats(MAX_JSON / TIMES, 3);
    const res = await stack.call('/v2/models/repeat/infer', {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, x.length], data: Array.from(x) }] }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const body = (await res.json()) as { outputs: Array<{ name: string; shape: number[]; data: number[] }> };
    expect(body.outputs[0]?.shape).toEqual([1, MAX_JSON]);
    expect(body.outputs[0]?.data).toEqual(Array.from(repeated(x)));
  });
});

describe("answers charged to the tenant's byte budget", () => {
  it('a tenant GETting a large result again and again is 429 once its budget is spent; another tenant is answered meanwhile', async () => {
    // At the bound: 64 Ki FP32 elements, charged at 25 bytes each as JSON (~1.6 MB) against 10 MiB.
    const x = floats(MAX_JSON / TIMES, 4);
    const [mine, theirs] = [await submitRepeat(KEY_B, x), await submitRepeat(KEY_A, x)];
    await finished(KEY_B, mine);
    await finished(KEY_A, theirs);
    const statuses: number[] = [];
    let refused: Response | undefined;
    for (let i = 0; i < 20 && !refused; i++) {
      const res = await stack.call(`/v1/jobs/${mine}`, { key: KEY_B });
      statuses.push(res.status);
      if (res.status === 429) refused = res;
      else await res.arrayBuffer();
    }
    if (!refused) throw new Error(`20 GETs of a 1.6 MB answer against a 10 MiB budget were all answered: ${statuses.join(', ')}`);
    // 10 MiB, less the two submits and the binary reads above, holds a few such answers, not 20.
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(2);
    expect(statuses.slice(0, -1).every((s) => s === 200)).toBe(true);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const { error } = (await refused.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('rate_limited');
    expect(error.message).toContain('binary form');
    // Still refused: nothing was built or sent for the 429, and nothing refilled.
    expect((await stack.call(`/v1/jobs/${mine}`, { key: KEY_B })).status).toBe(429);
    // A small answer (a job's status without outputs) stays free: tenant B can still read a queued or unknown job.
    expect((await stack.call('/v1/jobs/job_nope', { key: KEY_B })).status).toBe(404);

    // Tenant A's GETs of its own result of the same size, several at once, are answered in full.
    const answers = await Promise.all(Array.from({ length: 3 }, () => stack.call(`/v1/jobs/${theirs}`, { key: KEY_A })));
    for (const res of answers) {
      expect(res.status).toBe(200);
      const body = (await res.json()) as { outputs: Array<{ data: number[] }> };
      expect(body.outputs[0]?.data.length).toBe(MAX_JSON);
    }
  });

  it('while one tenant fetches large results at once, another tenant is answered', async () => {
    const x = floats(MAX_JSON / TIMES, 5);
    const big = await submitRepeat(KEY_C, x);
    await finished(KEY_C, big);
    const flood = Array.from({ length: 8 }, () =>
      stack.call(`/v1/jobs/${big}`, { key: KEY_C }).then(async (res) => {
        await res.arrayBuffer();
        return res.status;
      }),
    );
    const small = await stack.call('/v2/models/repeat/infer', {
      method: 'POST',
      key: KEY_A,
      body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], data: [2] }] }),
    });
    expect(small.status).toBe(200);
    expect(((await small.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data).toEqual(Array(TIMES).fill(2));
    expect((await stack.call('/v1/models', { key: KEY_A })).status).toBe(200);
    // Each of tenant C's is answered in full or refused for its budget, never failed.
    for (const status of await Promise.all(flood)) expect([200, 429]).toContain(status);
  });
});

describe('BYTES elements past MAX_BYTES_ELEMENTS_PER_JOB', () => {
  const twoMi = 2 * 1024 * 1024;
  const header = (count: number, size: number) => ({
    inputs: [{ name: 'text', datatype: 'BYTES', shape: [1, count], parameters: { binary_data_size: size } }],
  });

  it('2 Mi empty strings in binary (8 MiB) are 413 too_many_elements, and so is the same shape with no bytes: counted, not decoded', async () => {
    for (const bytes of [new Uint8Array(4 * twoMi), new Uint8Array(0)]) {
      const { body, headers } = binaryBody(header(twoMi, bytes.byteLength), [bytes]);
      const res = await stack.call('/v1/models/echo/jobs', { method: 'POST', key: KEY_D, body, headers });
      expect(res.status).toBe(413);
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe('too_many_elements');
      expect(error.message).toContain(`declare ${twoMi} BYTES elements`);
      expect(error.message).toContain('at most 65536');
      expect(error.message).toContain('MAX_BYTES_ELEMENTS_PER_JOB');
    }
    // As JSON too.
    const json = await stack.call('/v2/models/echo/infer', {
      method: 'POST',
      key: KEY_A,
      body: JSON.stringify({ inputs: [{ name: 'text', datatype: 'BYTES', shape: [1, 65_537], data: Array(65_537).fill('') }] }),
    });
    expect(json.status).toBe(413);
    expect(((await json.json()) as { error: { code: string } }).error.code).toBe('too_many_elements');
  });

  it('within the bound strings go through, packed and answered as JSON in slices, as sent', async () => {
    const texts = Array.from({ length: 5000 }, (_, i) => (i % 3 === 0 ? '' : `s${i} "é" \\ 日本`));
    const res = await stack.call('/v2/models/echo/infer', {
      method: 'POST',
      key: KEY_A,
      body: JSON.stringify({ inputs: [{ name: 'text', datatype: 'BYTES', shape: [1, texts.length], data: texts }] }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { outputs: Array<{ data: string[] }> }).outputs[0]?.data).toEqual(texts);
  });
});
