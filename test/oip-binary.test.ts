/**
 * The OIP binary tensor data extension over real HTTP: API, queue, warmpool workers and ONNX
 * Runtime. Sources: triton-inference-server/server docs/protocol/extension_binary_data.md (the
 * example request and response), KServe's "Binary Tensor Data Extension" page (the same).
 *
 * Models: `mymodel` (the spec's example tensors: input0 UINT32 [b,2], input1 BOOL [b] → output0
 * FP32 [b,2]) and `every` (Identity for each of the 13 datatypes, FP16 and BYTES included).
 */
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATATYPES, type Datatype } from '../infra/contracts/oip.ts';
import { jsonValues, type TensorData, wireBytes } from '../infra/contracts/packed-tensors.ts';
import { encodeHalf } from '../infra/kernel/half-float.ts';
import { buildEveryTypeModel, buildSpecExampleModel } from '../scripts/fixtures/onnx-models.ts';
import { KEY_B, startStack, type TestStack, waitForJob } from './support/stack.ts';

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300', BODY_LIMIT_BYTES: String(1024 * 1024) });
  await stack.registry.publish({ name: 'mymodel', version: '1', bytes: buildSpecExampleModel(), maxBatch: 8 });
  await stack.registry.publish({ name: 'every', version: '1', bytes: buildEveryTypeModel(), maxBatch: 8 });
  for (const model of ['mymodel', 'every']) {
    await stack.deployments.put({ model, version: '1', min: 1, max: 1, standby: 0 });
    await stack.startWorker(model, '1');
  }
  await stack.waitForWorkers('mymodel', 'active');
  await stack.waitForWorkers('every', 'active');
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

/** A binary body: the JSON header, then the parts, with the header length to send. */
function binaryBody(header: unknown, parts: Uint8Array[]): { body: Buffer; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  return { body: Buffer.concat([json, ...parts]), headerLength: json.byteLength };
}

function postBinary(path: string, header: unknown, parts: Uint8Array[], init: { headers?: Record<string, string>; key?: string } = {}) {
  const { body, headerLength } = binaryBody(header, parts);
  return stack.call(path, {
    method: 'POST',
    body: new Uint8Array(body),
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(headerLength), ...init.headers },
    ...(init.key ? { key: init.key } : {}),
  });
}

/** A binary response cut into its JSON header and each binary output's bytes, by name. */
async function readBinary(res: Response): Promise<{ header: Record<string, unknown>; outputs: Map<string, Buffer> }> {
  const length = Number(res.headers.get('inference-header-content-length'));
  const bytes = Buffer.from(await res.arrayBuffer());
  const header = JSON.parse(bytes.subarray(0, length).toString('utf8')) as Record<string, unknown>;
  const outputs = new Map<string, Buffer>();
  let at = length;
  for (const o of header.outputs as Array<{ name: string; parameters?: { binary_data_size?: number } }>) {
    const size = o.parameters?.binary_data_size;
    if (size === undefined) continue;
    outputs.set(o.name, bytes.subarray(at, at + size));
    at += size;
  }
  expect(at).toBe(bytes.byteLength);
  return { header, outputs };
}

// ---- every datatype: rows of each, as typed data, JSON values and wire bytes -----------------

const ROWS = 2;

function column(datatype: Datatype): TensorData {
  const n = ROWS * 3;
  switch (datatype) {
    case 'BYTES':
      return Array.from({ length: n }, (_, k) => (k === 0 ? '' : `r${k}·é`));
    case 'BOOL':
      return Uint8Array.from({ length: n }, (_, k) => k % 2);
    case 'FP16':
      return Uint16Array.from({ length: n }, (_, k) => encodeHalf(k * 1.5 - 2));
    case 'FP32':
      return Float32Array.from({ length: n }, (_, k) => Math.sin(k) * 1e30);
    case 'FP64':
      return Float64Array.from({ length: n }, (_, k) => Math.sin(k) * 1e300);
    case 'INT64':
      return BigInt64Array.from({ length: n }, (_, k) => (k === 0 ? -(2n ** 63n) : BigInt(k) * 2n ** 40n));
    case 'UINT64':
      return BigUint64Array.from({ length: n }, (_, k) => (k === 0 ? 2n ** 64n - 1n : BigInt(k)));
    default: {
      const Ctor = { UINT8: Uint8Array, INT8: Int8Array, UINT16: Uint16Array, INT16: Int16Array, INT32: Int32Array, UINT32: Uint32Array }[
        datatype
      ] as Int32ArrayConstructor;
      return Ctor.from({ length: n }, (_, k) => (k % 2 === 0 ? k : -k));
    }
  }
}

const COLUMNS = new Map(DATATYPES.map((t) => [t, column(t)]));

function everyJsonRequest(outputsBinary: boolean) {
  return {
    inputs: DATATYPES.map((t) => ({ name: `in_${t}`, datatype: t, shape: [ROWS, 3], data: jsonValues(t, COLUMNS.get(t) as TensorData) })),
    ...(outputsBinary ? { parameters: { binary_data_output: true } } : {}),
  };
}

function everyBinaryRequest(outputsBinary: boolean) {
  const parts = DATATYPES.map((t) => wireBytes(t, COLUMNS.get(t) as TensorData));
  const header = {
    inputs: DATATYPES.map((t, i) => ({
      name: `in_${t}`,
      datatype: t,
      shape: [ROWS, 3],
      parameters: { binary_data_size: (parts[i] as Uint8Array).byteLength },
    })),
    ...(outputsBinary ? { parameters: { binary_data_output: true } } : {}),
  };
  return { header, parts };
}

describe('the extension document’s example', () => {
  /** extension_binary_data.md's request header, byte for byte but for input1's rows (below). */
  const header = (input1Rows: number) => ({
    model_name: 'mymodel',
    inputs: [
      { name: 'input0', shape: [2, 2], datatype: 'UINT32', parameters: { binary_data_size: 16 } },
      { name: 'input1', shape: [input1Rows], datatype: 'BOOL', parameters: { binary_data_size: input1Rows } },
    ],
    outputs: [{ name: 'output0', parameters: { binary_data: true } }],
  });
  const input0 = new Uint8Array(Uint32Array.from([1, 2, 3, 4]).buffer);

  it('round-trips with input1 given the 2 rows input0 has: output0 comes back binary, FP32 [2, 2]', async () => {
    const res = await postBinary('/v2/models/mymodel/infer', header(2), [input0, Uint8Array.from([1, 0])]);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    const { header: answer, outputs } = await readBinary(res);
    expect(answer).toMatchObject({
      model_name: 'mymodel',
      model_version: '1',
      outputs: [{ name: 'output0', datatype: 'FP32', shape: [2, 2], parameters: { binary_data_size: 16 } }],
    });
    expect((answer.outputs as Array<Record<string, unknown>>)[0]).not.toHaveProperty('data');
    const output0 = outputs.get('output0') as Buffer;
    expect(Array.from(new Float32Array(new Uint8Array(output0).buffer))).toEqual([1, 2, 3, 4]);
  });

  it('(known deviation) the literal example, input1 [3] against input0’s 2 rows, is refused: warmpool batches on the first axis', async () => {
    const res = await postBinary('/v2/models/mymodel/infer', header(3), [input0, Uint8Array.from([1, 0, 1])]);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: 'shape_mismatch' } });
  });

  it('GET /v2 advertises binary_tensor_data', async () => {
    expect(await (await stack.call('/v2', { key: null })).json()).toMatchObject({ extensions: ['binary_tensor_data'] });
  });
});

describe('every datatype, FP16 and BYTES included', () => {
  it('JSON and binary requests for the same rows give identical outputs, read as JSON or as binary', async () => {
    const viaJson = await stack.call('/v2/models/every/infer', { method: 'POST', body: JSON.stringify(everyJsonRequest(false)) });
    expect(viaJson.status).toBe(200);
    const jsonAnswer = (await viaJson.json()) as { outputs: Array<{ name: string; data: unknown[] }> };
    const { header, parts } = everyBinaryRequest(false);
    const viaBinary = await postBinary('/v2/models/every/infer', header, parts);
    expect(viaBinary.status).toBe(200);
    expect(viaBinary.headers.get('inference-header-content-length')).toBeNull(); // no binary output asked: plain JSON
    expect(((await viaBinary.json()) as typeof jsonAnswer).outputs).toEqual(jsonAnswer.outputs);
    // The JSON values are the rows sent (Identity), FP16 decoded and 64-bit extremes as strings.
    for (const t of DATATYPES) {
      expect(jsonAnswer.outputs.find((o) => o.name === `out_${t}`)?.data).toEqual(jsonValues(t, COLUMNS.get(t) as TensorData));
    }

    const b1 = await readBinary(
      await stack.call('/v2/models/every/infer', { method: 'POST', body: JSON.stringify(everyJsonRequest(true)) }),
    );
    const binaryOut = everyBinaryRequest(true);
    const b2 = await readBinary(await postBinary('/v2/models/every/infer', binaryOut.header, binaryOut.parts));
    for (const t of DATATYPES) {
      const sent = Buffer.from(wireBytes(t, COLUMNS.get(t) as TensorData));
      expect(b1.outputs.get(`out_${t}`)?.equals(sent), t).toBe(true);
      expect(b2.outputs.get(`out_${t}`)?.equals(sent), t).toBe(true);
    }
  });

  it('a binary body may be gzip-compressed, and a compressed answer is sent to a client that accepts one', async () => {
    const { header, parts } = everyBinaryRequest(true);
    const { body, headerLength } = binaryBody(header, parts);
    const res = await stack.call('/v2/models/every/infer', {
      method: 'POST',
      body: gzipSync(body),
      headers: {
        'content-type': 'application/octet-stream',
        'content-encoding': 'gzip',
        'inference-header-content-length': String(headerLength),
        'accept-encoding': 'identity',
      },
    });
    expect(res.status).toBe(200);
    const { outputs } = await readBinary(res);
    expect(outputs.get('out_FP16')?.equals(Buffer.from(wireBytes('FP16', COLUMNS.get('FP16') as TensorData)))).toBe(true);
    // fetch decodes a gzip answer itself; node's raw bytes show it was compressed.
    const raw = await fetch(`${stack.api.url}/v2/models/every/infer`, {
      method: 'POST',
      body: JSON.stringify(everyJsonRequest(false)),
      headers: { authorization: 'Bearer key-aaaaaaaaaaaaaaaa', 'content-type': 'application/json', 'accept-encoding': 'gzip' },
    });
    expect(raw.headers.get('content-encoding')).toBe('gzip');
    expect(((await raw.json()) as { outputs: unknown[] }).outputs).toHaveLength(DATATYPES.length);
  });
});

describe('async jobs with binary tensors', () => {
  it('a job submitted binary is read back binary (Accept: application/octet-stream) or JSON, and only by its tenant', async () => {
    const { header, parts } = everyBinaryRequest(false);
    const res = await postBinary('/v1/models/every/jobs', header, parts);
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const done = await waitForJob(stack, id);
    expect(done.status).toBe('succeeded');
    const asJson = done.outputs as Array<{ name: string; data: unknown[] }>;
    expect(asJson.find((o) => o.name === 'out_BYTES')?.data).toEqual(COLUMNS.get('BYTES'));

    const binary = await stack.call(`/v1/jobs/${id}`, { headers: { accept: 'application/octet-stream' } });
    expect(binary.headers.get('content-type')).toBe('application/octet-stream');
    const { header: resource, outputs } = await readBinary(binary);
    expect(resource).toMatchObject({ id, status: 'succeeded' });
    for (const t of DATATYPES) {
      expect(outputs.get(`out_${t}`)?.equals(Buffer.from(wireBytes(t, COLUMNS.get(t) as TensorData))), t).toBe(true);
    }
    const byQuery = await readBinary(await stack.call(`/v1/jobs/${id}?binary_data_output=true`));
    expect(byQuery.outputs.size).toBe(DATATYPES.length);
    // Accept that prefers JSON gets JSON.
    const preferJson = await stack.call(`/v1/jobs/${id}`, { headers: { accept: 'application/json, application/octet-stream;q=0.5' } });
    expect(preferJson.headers.get('content-type')).toMatch(/json/);

    const other = await stack.call(`/v1/jobs/${id}`, { key: KEY_B, headers: { accept: 'application/octet-stream' } });
    expect(other.status).toBe(404);
  });

  it('an Idempotency-Key replays a binary request with the same bytes, and refuses one whose bytes differ', async () => {
    const { header, parts } = everyBinaryRequest(false);
    const key = `bin-${Date.now()}`;
    const first = await postBinary('/v1/models/every/jobs', header, parts, { headers: { 'idempotency-key': key } });
    const again = await postBinary('/v1/models/every/jobs', header, parts, { headers: { 'idempotency-key': key } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as { id: string }).id).toBe(((await first.json()) as { id: string }).id);
    const changed = parts.map((p) => new Uint8Array(p));
    (changed[DATATYPES.indexOf('UINT8')] as Uint8Array)[0] = 99;
    const conflict = await postBinary('/v1/models/every/jobs', header, changed, { headers: { 'idempotency-key': key } });
    expect(conflict.status).toBeGreaterThanOrEqual(400);
    expect(conflict.status).toBeLessThan(500);
    expect(conflict.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('malformed binary bodies: a 4xx with a clear message, never a 5xx', () => {
  /** mymodel, one row: input0 UINT32 [1, 2] (8 bytes) with the given size, input1 BOOL [1] (1 byte). */
  const oneRow = (input0Size: number) => ({
    inputs: [
      { name: 'input0', shape: [1, 2], datatype: 'UINT32', parameters: { binary_data_size: input0Size } },
      { name: 'input1', shape: [1], datatype: 'BOOL', parameters: { binary_data_size: 1 } },
    ],
  });

  async function refusal(res: Response): Promise<{ status: number; code: string; message: string }> {
    const body = (await res.json()) as { error: { code: string; message: string } };
    return { status: res.status, ...body.error };
  }

  const withLength = (length: string, body: Buffer) =>
    stack.call('/v2/models/every/infer', {
      method: 'POST',
      body: new Uint8Array(body),
      headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': length },
    });

  it('a header length below 0, of 0, or past the body', async () => {
    const { body } = binaryBody({ inputs: [] }, []);
    for (const length of ['-1', '0', String(body.byteLength + 1), 'x']) {
      const r = await refusal(await withLength(length, body));
      expect(r.status, length).toBe(400);
      expect(r.code).toBe('invalid_header_length');
      expect(r.message).toMatch(/Inference-Header-Content-Length|inference header size/);
    }
  });

  it('bytes without binary_data_size, sizes short, trailing bytes, sizes that do not fit the shape', async () => {
    const plain = everyJsonRequest(false);
    const trailing = await refusal(await postBinary('/v2/models/every/infer', plain, [Uint8Array.from([1, 2, 3])]));
    expect(trailing).toMatchObject({ status: 400, code: 'binary_size_mismatch' });
    expect(trailing.message).toMatch(/unexpected additional input data: 3 bytes/);

    const short = await refusal(await postBinary('/v2/models/mymodel/infer', oneRow(8), [new Uint8Array(8)]));
    expect(short.message).toMatch(/unexpected size for input 'input1', expecting 1 additional bytes/);

    const extra = await refusal(await postBinary('/v2/models/mymodel/infer', oneRow(8), [new Uint8Array(10)]));
    expect(extra.message).toMatch(/unexpected additional input data: 1 bytes/);

    const wrong = await refusal(await postBinary('/v2/models/mymodel/infer', oneRow(4), [new Uint8Array(5)]));
    expect(wrong).toMatchObject({ status: 400, code: 'binary_size_mismatch' });
    expect(wrong.message).toMatch(
      /input byte size mismatch for input 'input0': shape \[1, 2\] of UINT32 needs 8 bytes, binary_data_size is 4/,
    );
  });

  it('binary_data_size in a JSON body says how to send the bytes', async () => {
    const res = await stack.call('/v2/models/mymodel/infer', { method: 'POST', body: JSON.stringify(oneRow(8)) });
    const r = await refusal(res);
    expect(r.status).toBe(400);
    expect(r.message).toMatch(/Inference-Header-Content-Length/);
  });

  it('a gzip bomb stops at the body limit (413), and a corrupt gzip body is a 400', async () => {
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024));
    expect(bomb.byteLength).toBeLessThan(1024 * 1024);
    const res = await stack.call('/v2/models/every/infer', {
      method: 'POST',
      body: bomb,
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });
    const r = await refusal(res);
    expect(r).toMatchObject({ status: 413, code: 'body_too_large' });
    expect(r.message).toMatch(/once decompressed/);
    const corrupt = await stack.call('/v2/models/every/infer', {
      method: 'POST',
      body: Buffer.from('not gzip at all'),
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
    });
    expect(await refusal(corrupt)).toMatchObject({ status: 400, code: 'malformed_body' });
    // The server is unharmed: a good request still answers.
    const ok = await stack.call('/v2/models/every/infer', {
      method: 'POST',
      body: gzipSync(JSON.stringify(everyJsonRequest(false))),
      headers: { 'content-encoding': 'gzip' },
    });
    expect(ok.status).toBe(200);
  });
});
