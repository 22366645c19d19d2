/**
 * The HTTP contract every runtime the API ships on must keep, as one behaviour suite run against
 * each (hono's `router/common.case.test.ts` style): test/api-node-contract.test.ts runs it on
 * Node, test/api-bun.test.ts on Bun. A target is a real stack — Redis, the S3-protocol server,
 * a warmpool worker under Node running the OIP example model on ONNX Runtime — with the API
 * under test in front of it, so a job submitted here is enqueued by the API's BullMQ and
 * drained by the worker's.
 *
 * The model (`mymodel`, scripts/fixtures/onnx-models.ts): input0 UINT32 [b,2] → output0 FP32
 * [b,2] = float(input0), input1 BOOL [b] → output1 = not(input1). Its outputs follow from the
 * inputs, so every answer is checked against the values, not against another run.
 */
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { joinBinaryBody } from '../../infra/contracts/oip-binary.ts';
import { buildSpecExampleModel } from '../../scripts/fixtures/onnx-models.ts';
import { sseReader } from './sse-reader.ts';
import { KEY_A, startStack, type TestStack } from './stack.ts';

export interface ContractTarget {
  /** The API under test, e.g. `http://127.0.0.1:41234`. */
  url: string;
  apiKey: string;
  close(): Promise<void>;
}

export const CONTRACT_MODEL = 'mymodel';
/** BODY_LIMIT_BYTES of a contract stack: small, so the 413 case sends little. */
export const CONTRACT_BODY_LIMIT = 64 * 1024;

/** A stack with the contract's model published, deployed and served by one active worker. */
export async function startContractStack(): Promise<TestStack> {
  const stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300', BODY_LIMIT_BYTES: String(CONTRACT_BODY_LIMIT) });
  try {
    await stack.registry.publish({ name: CONTRACT_MODEL, version: '1', bytes: buildSpecExampleModel(), maxBatch: 8 });
    await stack.deployments.put({ model: CONTRACT_MODEL, version: '1', min: 1, max: 1, standby: 0 });
    await stack.startWorker(CONTRACT_MODEL, '1');
    await stack.waitForWorkers(CONTRACT_MODEL, 'active');
    return stack;
  } catch (err) {
    await stack.close();
    throw err;
  }
}

type Init = RequestInit & { key?: string | null; headers?: Record<string, string> };
type Json = Record<string, unknown>;

const ROWS = 2;
const INPUT0 = [1, 2, 3, 4];
const INPUT1 = [true, false];
const inputs = (input0 = INPUT0) => [
  { name: 'input0', shape: [ROWS, 2], datatype: 'UINT32', data: input0 },
  { name: 'input1', shape: [ROWS], datatype: 'BOOL', data: INPUT1 },
];
const EXPECTED = [
  { name: 'output0', shape: [ROWS, 2], datatype: 'FP32', data: INPUT0 },
  { name: 'output1', shape: [ROWS], datatype: 'BOOL', data: INPUT1.map((b) => !b) },
];
const body = (value: unknown) => JSON.stringify(value);
const byName = (outputs: unknown) =>
  [...((outputs ?? []) as Json[])].sort((a, b) => String(a.name).localeCompare(String(b.name))).map(({ parameters: _, ...o }) => o);

export function describeHttpContract(name: string, start: () => Promise<ContractTarget>): void {
  describe(name, () => {
    let target: ContractTarget;
    beforeAll(async () => {
      target = await start();
    }, 120_000);
    afterAll(() => target?.close());

    const call = (path: string, init: Init = {}) => {
      const { key = target.apiKey, headers = {}, ...rest } = init;
      const h = new Headers(headers);
      if (key !== null) h.set('authorization', `Bearer ${key}`);
      if (rest.body !== undefined && !h.has('content-type')) h.set('content-type', 'application/json');
      return fetch(`${target.url}${path}`, { ...rest, headers: h });
    };
    const untilDone = async (id: string): Promise<Json> => {
      for (;;) {
        const job = (await (await call(`/v1/jobs/${id}`)).json()) as Json;
        if (['succeeded', 'failed', 'canceled'].includes(String(job.status))) return job;
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const submit = (init: Init = {}) =>
      call(`/v1/models/${CONTRACT_MODEL}/jobs`, { method: 'POST', body: body({ inputs: inputs() }), ...init });

    it('health: live and ready', async () => {
      const live = await fetch(`${target.url}/v2/health/live`);
      const ready = await fetch(`${target.url}/v2/health/ready`);
      expect([live.status, await live.json()]).toEqual([200, { live: true }]);
      expect([ready.status, await ready.json()]).toEqual([200, { ready: true }]);
    });

    it("model metadata names the model's tensors", async () => {
      const res = await call(`/v2/models/${CONTRACT_MODEL}`);
      expect(res.status).toBe(200);
      const meta = (await res.json()) as { name: string; inputs: Json[]; outputs: Json[] };
      expect(meta.name).toBe(CONTRACT_MODEL);
      expect(meta.inputs.map((t) => [t.name, t.datatype])).toEqual([
        ['input0', 'UINT32'],
        ['input1', 'BOOL'],
      ]);
      expect(meta.outputs.map((t) => t.name).sort()).toEqual(['output0', 'output1']);
    });

    it('an async job: 202, then GET until it succeeded with the outputs the worker computed', async () => {
      const res = await submit();
      expect(res.status).toBe(202);
      const { id } = (await res.json()) as { id: string };
      expect(res.headers.get('location')).toBe(`/v1/jobs/${id}`);
      const done = await untilDone(id);
      expect(done.status).toBe('succeeded');
      expect(byName(done.outputs)).toEqual(EXPECTED);
    });

    it("a job's event stream reaches succeeded", async () => {
      const { id } = (await (await submit()).json()) as { id: string };
      const res = await call(`/v1/jobs/${id}/events`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const stream = sseReader(res);
      const seen: string[] = [];
      for (let e = await stream.nextEvent(); e !== null; e = await stream.nextEvent()) seen.push(String(e.event));
      expect(seen.at(-1)).toBe('succeeded');
    });

    it('Idempotency-Key: the same key and body replay the first job', async () => {
      const key = `contract-${Math.random().toString(36).slice(2)}`;
      const first = await submit({ headers: { 'idempotency-key': key } });
      const again = await submit({ headers: { 'idempotency-key': key } });
      expect([first.status, again.status]).toEqual([202, 202]);
      expect(((await again.json()) as Json).id).toBe(((await first.json()) as Json).id);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    });

    it('sync inference, JSON', async () => {
      const res = await call(`/v2/models/${CONTRACT_MODEL}/infer`, { method: 'POST', body: body({ id: 'r1', inputs: inputs() }) });
      expect(res.status).toBe(200);
      const answer = (await res.json()) as Json;
      expect([answer.model_name, answer.id]).toEqual([CONTRACT_MODEL, 'r1']);
      expect(byName(answer.outputs)).toEqual(EXPECTED);
    });

    it('sync inference, binary tensors in and out', async () => {
      const header = {
        inputs: [
          { name: 'input0', shape: [ROWS, 2], datatype: 'UINT32', parameters: { binary_data_size: 16 } },
          { name: 'input1', shape: [ROWS], datatype: 'BOOL', parameters: { binary_data_size: 2 } },
        ],
        outputs: [{ name: 'output0', parameters: { binary_data: true } }],
      };
      const parts = [new Uint8Array(Uint32Array.from(INPUT0).buffer), Uint8Array.from(INPUT1.map(Number))];
      const { body: bytes, headerLength } = joinBinaryBody(header, parts);
      const res = await call(`/v2/models/${CONTRACT_MODEL}/infer`, {
        method: 'POST',
        body: new Uint8Array(bytes),
        headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(headerLength) },
      });
      expect(res.status).toBe(200);
      const length = Number(res.headers.get('inference-header-content-length'));
      const answer = Buffer.from(await res.arrayBuffer());
      const json = JSON.parse(answer.subarray(0, length).toString('utf8')) as { outputs: Json[] };
      expect(json.outputs.map((o) => o.name)).toEqual(['output0']);
      const floats = answer.subarray(length);
      expect([...new Float32Array(floats.buffer, floats.byteOffset, floats.byteLength / 4)]).toEqual(INPUT0);
    });

    it('a gzip request body (Content-Encoding) is decoded', async () => {
      const res = await call(`/v2/models/${CONTRACT_MODEL}/infer`, {
        method: 'POST',
        body: new Uint8Array(gzipSync(body({ inputs: inputs() }))),
        headers: { 'content-encoding': 'gzip' },
      });
      expect(res.status).toBe(200);
      expect(byName(((await res.json()) as Json).outputs)).toEqual(EXPECTED);
    });

    const infer = `/v2/models/${CONTRACT_MODEL}/infer`;
    const errors: Array<[string, number, string, string, Init]> = [
      ['no key', 401, 'unauthorized', infer, { method: 'POST', body: body({ inputs: inputs() }), key: null }],
      ['a wrong key', 401, 'unauthorized', infer, { method: 'POST', body: body({ inputs: inputs() }), key: `${KEY_A}-wrong` }],
      ['an unknown model', 404, 'model_not_found', '/v2/models/nosuch/infer', { method: 'POST', body: body({ inputs: inputs() }) }],
      [
        'a wrong shape',
        400,
        'shape_mismatch',
        infer,
        { method: 'POST', body: body({ inputs: [{ ...inputs()[0], shape: [1, 4] }, inputs()[1]] }) },
      ],
      [
        'a wrong datatype',
        400,
        'datatype_mismatch',
        infer,
        { method: 'POST', body: body({ inputs: [{ ...inputs()[0], datatype: 'FP32' }, inputs()[1]] }) },
      ],
      ['a body over BODY_LIMIT_BYTES', 413, 'body_too_large', infer, { method: 'POST', body: ' '.repeat(CONTRACT_BODY_LIMIT + 1) }],
    ];
    it.each(errors)('%s: %i with { error: { code: %s, message } }', async (_, status, code, path, init) => {
      const res = await call(path, init);
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      const answer = (await res.json()) as { error: { code: string; message: string } };
      expect(answer.error.code).toBe(code);
      expect(typeof answer.error.message).toBe('string');
    });
  });
}
