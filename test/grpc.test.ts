/**
 * The Open Inference Protocol over gRPC, end to end, with a client built as any client is: from
 * the published proto file (api/grpc/grpc_predict_v2.proto), loaded here on its own with
 * @grpc/proto-loader, never through the server's code.
 *
 * Against `warmpool dev` as a user runs it (a child process: real Redis, S3, scaler, worker
 * processes, the demo model): liveness, metadata, inference with typed and with raw contents
 * (outputs equal to the same rows sent as JSON over HTTP), a priority parameter, bad requests,
 * credentials, an unknown model, an oversized and a garbled message.
 *
 * Against the test stack with no worker and a short SYNC_TIMEOUT_MS: a call that times out
 * names its job, which only its own tenant can read over HTTP; and the tenant's rate limit is
 * one bucket for HTTP and gRPC.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Client, credentials, loadPackageDefinition, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { type DevStack, dashboardEnv, KEYS, startDev } from '../scripts/dashboard-screenshots.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { testEnv, testServices } from './support/services.ts';
import { KEY_A, KEY_B, startStack, type TestStack } from './support/stack.ts';

const PROTO = fileURLToPath(new URL('../api/grpc/grpc_predict_v2.proto', import.meta.url));
const VERSION = (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const DEMO = 'demo-scorer';
const FEATURES = 64;

type Reply = { response: Record<string, unknown>; error?: undefined } | { response?: undefined; error: ServiceError };
type Rpc = (request: object, key?: string | null) => Promise<Reply>;

/** A client of GRPCInferenceService at `target`, as a user would generate one (snake_case fields, int64 as strings). */
function inferenceClient(target: string) {
  const definition = loadSync(PROTO, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
  const pkg = loadPackageDefinition(definition) as unknown as {
    inference: { GRPCInferenceService: new (target: string, creds: ReturnType<typeof credentials.createInsecure>) => Client };
  };
  const client = new pkg.inference.GRPCInferenceService(target, credentials.createInsecure()) as Client &
    Record<string, (req: object, md: Metadata, cb: (err: ServiceError | null, res: Record<string, unknown>) => void) => void>;
  const rpc =
    (method: string): Rpc =>
    (request, key = null) =>
      new Promise((resolve) => {
        const metadata = new Metadata();
        if (key !== null) metadata.set('authorization', `Bearer ${key}`);
        client[method]?.(request, metadata, (err, response) => resolve(err ? { error: err } : { response }));
      });
  return {
    client,
    serverLive: rpc('ServerLive'),
    serverReady: rpc('ServerReady'),
    serverMetadata: rpc('ServerMetadata'),
    modelReady: rpc('ModelReady'),
    modelMetadata: rpc('ModelMetadata'),
    modelInfer: rpc('ModelInfer'),
  };
}

/** The error of a reply that must have failed, with its warmpool metadata. */
function failure(reply: Reply) {
  if (!reply.error) throw new Error(`expected an error, got ${JSON.stringify(reply.response)}`);
  const first = (key: string) => reply.error.metadata.get(key)[0];
  return { code: reply.error.code, details: reply.error.details, errorCode: first('warmpool-error-code'), jobId: first('warmpool-job-id') };
}

function ok(reply: Reply): Record<string, unknown> {
  if (reply.error) throw new Error(`expected a response, got ${status[reply.error.code]}: ${reply.error.details}`);
  return reply.response;
}

/** `rows` distinct rows of float32 values (seeded), flat. */
function rowsOf(rows: number, seed: number): number[] {
  return Array.from({ length: rows * FEATURES }, (_, i) => Math.fround(Math.sin(seed * 1000 + i) * 0.75));
}

const le = (values: number[]) => {
  const typed = new Float32Array(values);
  return Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);
};

describe('gRPC against warmpool dev', () => {
  const cwd = mkdtempSync(path.join(testServices().tmpDir, 'grpc-dev-'));
  let env: NodeJS.ProcessEnv;
  let dev: DevStack | undefined;
  let grpcUrl: string;
  let api: ReturnType<typeof inferenceClient>;
  const key = KEYS.load;

  beforeAll(async () => {
    // A 1 MiB message limit, so the oversized-message case stays small.
    env = await dashboardEnv(testEnv({ HEARTBEAT_INTERVAL_MS: '500', WARMUP_ITERATIONS: '1', BODY_LIMIT_BYTES: '1048576' }));
    dev = await startDev(cwd, env, 280_000);
    const stored = readFileSync(path.join(cwd, '.warmpool', 'dev.env'), 'utf8');
    grpcUrl = /^GRPC_URL=(\S+)$/m.exec(stored)?.[1] ?? '';
    api = inferenceClient(grpcUrl);
  }, 300_000);

  afterAll(async () => {
    api?.client.close();
    await dev?.stop();
    const redis = createRedis(env.REDIS_URL as string);
    try {
      for await (const keys of scanKeys(redis, `${env.QUEUE_PREFIX}:*`)) await deleteMany(redis, keys);
    } finally {
      await closeRedis(redis);
      rmSync(cwd, { recursive: true, force: true });
    }
  }, 120_000);

  /** The same rows as JSON over HTTP (computed by the worker: the result cache is bypassed). */
  const overHttp = async (data: number[]) => {
    const res = await fetch(`${dev?.url}/v2/models/${DEMO}/infer`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        cache: false,
        inputs: [{ name: 'features', datatype: 'FP32', shape: [data.length / FEATURES, FEATURES], data }],
      }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { outputs: Array<{ name: string; datatype: string; shape: number[]; data: number[] }> }).outputs;
  };

  it('prints its gRPC address and stores it in .warmpool/dev.env', () => {
    expect(grpcUrl).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(dev?.output()).toContain(`gRPC (Open Inference Protocol, KServe v2): ${grpcUrl}`);
  });

  it('ServerLive, ServerReady and ServerMetadata answer without a key', async () => {
    expect(ok(await api.serverLive({}))).toEqual({ live: true });
    expect(ok(await api.serverReady({}))).toEqual({ ready: true });
    expect(ok(await api.serverMetadata({}))).toEqual({ name: 'warmpool', version: VERSION, extensions: [] });
  });

  it('ModelReady and ModelMetadata describe the demo model', async () => {
    expect(ok(await api.modelReady({ name: DEMO }, key))).toEqual({ ready: true });
    expect(ok(await api.modelReady({ name: DEMO, version: '999' }, key))).toEqual({ ready: false });
    expect(ok(await api.modelReady({ name: 'no-such-model' }, key))).toEqual({ ready: false });
    const metadata = ok(await api.modelMetadata({ name: DEMO }, key));
    expect(metadata).toMatchObject({ name: DEMO, versions: ['1'], platform: 'onnxruntime_onnx' });
    expect(metadata.inputs).toEqual([{ name: 'features', datatype: 'FP32', shape: ['-1', String(FEATURES)] }]);
    expect((metadata.outputs as unknown[]).length).toBeGreaterThan(0);
  });

  it('ModelInfer with typed contents answers typed contents equal to HTTP`s JSON outputs for the same rows', async () => {
    const data = rowsOf(3, 1);
    const response = ok(
      await api.modelInfer(
        {
          model_name: DEMO,
          id: 'typed-1',
          inputs: [{ name: 'features', datatype: 'FP32', shape: [3, FEATURES], contents: { fp32_contents: data } }],
        },
        key,
      ),
    );
    expect(response).toMatchObject({ model_name: DEMO, model_version: '1', id: 'typed-1', raw_output_contents: [] });
    const expected = await overHttp(data);
    const outputs = response.outputs as Array<{ name: string; datatype: string; shape: string[]; contents: { fp32_contents: number[] } }>;
    expect(
      outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape.map(Number), data: o.contents.fp32_contents })),
    ).toEqual(expected.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape, data: o.data })));
  });

  it('ModelInfer with raw_input_contents answers raw_output_contents holding HTTP`s outputs for the same rows', async () => {
    const data = rowsOf(2, 2);
    const response = ok(
      await api.modelInfer(
        {
          model_name: DEMO,
          model_version: '1',
          inputs: [{ name: 'features', datatype: 'FP32', shape: [2, FEATURES] }],
          raw_input_contents: [le(data)],
        },
        key,
      ),
    );
    const expected = await overHttp(data);
    const outputs = response.outputs as Array<{ name: string; contents: unknown }>;
    expect(outputs.map((o) => o.name)).toEqual(expected.map((o) => o.name));
    expect(outputs.every((o) => o.contents === null)).toBe(true);
    const raw = response.raw_output_contents as Buffer[];
    expect(raw.map((b) => Array.from(new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength))))).toEqual(
      expected.map((o) => o.data),
    );
  });

  it('takes a priority parameter (a Triton level or a warmpool name) and refuses a meaningless one', async () => {
    const request = (priority: object) => ({
      model_name: DEMO,
      parameters: { priority },
      inputs: [{ name: 'features', datatype: 'FP32', shape: [1, FEATURES], contents: { fp32_contents: rowsOf(1, 3) } }],
    });
    expect(ok(await api.modelInfer(request({ int64_param: 1 }), key)).outputs).toHaveLength(1);
    expect(ok(await api.modelInfer(request({ string_param: 'low' }), key)).outputs).toHaveLength(1);
    const bad = failure(await api.modelInfer(request({ string_param: 'urgent' }), key));
    expect(bad).toMatchObject({ code: status.INVALID_ARGUMENT, errorCode: 'invalid_body' });
    expect(bad.details).toMatch(/^parameters\.priority must be one of high, normal, low/);
  });

  it('refuses bad requests with INVALID_ARGUMENT saying what is wrong', async () => {
    const wrongType = failure(
      await api.modelInfer(
        {
          model_name: DEMO,
          inputs: [{ name: 'features', datatype: 'INT32', shape: [1, FEATURES], contents: { int_contents: Array(FEATURES).fill(1) } }],
        },
        key,
      ),
    );
    expect(wrongType).toMatchObject({
      code: status.INVALID_ARGUMENT,
      errorCode: 'datatype_mismatch',
      details: 'input "features": expected datatype FP32, got INT32',
    });
    const short = failure(
      await api.modelInfer(
        {
          model_name: DEMO,
          inputs: [{ name: 'features', datatype: 'FP32', shape: [2, FEATURES] }],
          raw_input_contents: [le(rowsOf(1, 4))],
        },
        key,
      ),
    );
    expect(short).toMatchObject({ code: status.INVALID_ARGUMENT, errorCode: 'binary_size_mismatch' });
    expect(short.details).toBe(
      `input byte size mismatch for input 'features': shape [2, ${FEATURES}] of FP32 needs ${2 * FEATURES * 4} bytes, binary_data_size is ${FEATURES * 4}`,
    );
    const field = failure(
      await api.modelInfer(
        {
          model_name: DEMO,
          inputs: [{ name: 'features', datatype: 'FP32', shape: [1, FEATURES], contents: { fp64_contents: rowsOf(1, 5) } }],
        },
        key,
      ),
    );
    expect(field).toMatchObject({
      code: status.INVALID_ARGUMENT,
      details: 'input "features": datatype FP32 takes its elements in contents.fp32_contents, not contents.fp64_contents',
    });
  });

  it('wants a known key for model calls: missing or wrong is UNAUTHENTICATED', async () => {
    const request = {
      model_name: DEMO,
      inputs: [{ name: 'features', datatype: 'FP32', shape: [1, FEATURES], contents: { fp32_contents: rowsOf(1, 6) } }],
    };
    const missing = failure(await api.modelInfer(request, null));
    expect(missing).toMatchObject({ code: status.UNAUTHENTICATED, errorCode: 'unauthorized' });
    expect(missing.details).toContain('authorization: Bearer <key>');
    expect(failure(await api.modelInfer(request, 'not-a-key-0123456789'))).toMatchObject({
      code: status.UNAUTHENTICATED,
      details: 'unknown API key',
    });
    expect(failure(await api.modelMetadata({ name: DEMO }, null)).code).toBe(status.UNAUTHENTICATED);
    expect(failure(await api.modelReady({ name: DEMO }, 'not-a-key-0123456789')).code).toBe(status.UNAUTHENTICATED);
  });

  it('answers NOT_FOUND for an unknown model', async () => {
    const infer = failure(
      await api.modelInfer(
        { model_name: 'no-such-model', inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 1], contents: { fp32_contents: [1] } }] },
        key,
      ),
    );
    expect(infer.code).toBe(status.NOT_FOUND);
    expect(infer.details).toContain('no-such-model');
    expect(failure(await api.modelMetadata({ name: 'no-such-model' }, key)).code).toBe(status.NOT_FOUND);
  });

  it('refuses a message over BODY_LIMIT_BYTES and survives a garbled one', async () => {
    const big = failure(
      await api.modelInfer(
        {
          model_name: DEMO,
          inputs: [{ name: 'features', datatype: 'FP32', shape: [1, FEATURES] }],
          raw_input_contents: [Buffer.alloc(1_048_576 + 1)],
        },
        key,
      ),
    );
    expect(big.code).toBe(status.RESOURCE_EXHAUSTED);
    const garbled = await new Promise<ServiceError | null>((resolve) => {
      const metadata = new Metadata();
      metadata.set('authorization', `Bearer ${key}`);
      api.client.makeUnaryRequest(
        '/inference.GRPCInferenceService/ModelInfer',
        (b: Buffer) => b,
        (b: Buffer) => b,
        Buffer.from([0xff, 0xff]), // not protobuf: a tag whose varint runs off the end
        metadata,
        (err) => resolve(err),
      );
    });
    // Bytes that are not a ModelInferRequest are the client's fault: INVALID_ARGUMENT malformed_message (api/grpc/decode.ts).
    expect(garbled?.code).toBe(status.INVALID_ARGUMENT);
    expect(ok(await api.serverLive({}))).toEqual({ live: true });
  });

  /** A docs/examples/ client run as the docs say: from the folder `warmpool dev` runs in (it reads .warmpool/dev.env). */
  const runExample = (file: string) =>
    execFileSync(process.execPath, [fileURLToPath(new URL(`../docs/examples/${file}`, import.meta.url))], {
      cwd,
      encoding: 'utf8',
      env: { ...process.env, WARMPOOL_KEY: key },
      timeout: 60_000,
    });

  it('the docs’ binary HTTP client (docs/examples/binary-infer.mjs) gets the score HTTP’s JSON gives', async () => {
    const answer = JSON.parse(runExample('binary-infer.mjs')) as { outputs: Array<{ name: string; values: number[] }> };
    const features = Array.from({ length: FEATURES }, (_, i) => Math.fround(Math.sin(i) / 2));
    const json = (await overHttp(features)) as Array<{ name: string; data: number[] }>;
    expect(answer.outputs[0]?.name).toBe('score');
    expect(answer.outputs[0]?.values).toEqual(json[0]?.data);
  });

  it('the docs’ gRPC client (docs/examples/grpc-infer.mjs) runs ServerLive, ModelMetadata and ModelInfer both ways', () => {
    const out = runExample('grpc-infer.mjs');
    expect(out).toMatch(/^live: true$/m);
    expect(out).toMatch(/^inputs: features FP32 \[-1, 64\]$/m);
    const typed = /^typed contents → score \[ (\S+) \]$/m.exec(out)?.[1];
    const raw = /^raw contents {3}→ score \[ (\S+) \]$/m.exec(out)?.[1];
    expect(typed).toBeDefined();
    expect(raw).toBe(typed);
  });
});

describe('gRPC against the test stack: sync timeouts and shared limits', () => {
  const MODEL = 'grpc-idle';
  let stack: TestStack;
  let api: ReturnType<typeof inferenceClient>;

  beforeAll(async () => {
    // No worker serves MODEL: every sync call times out. Four requests of burst for tenant-a, refilled once in 1,000 s.
    stack = await startStack({ GRPC_PORT: '0', SYNC_TIMEOUT_MS: '300', RATE_LIMIT_RPS: '0.001', RATE_LIMIT_BURST: '4' });
    await stack.registry.publish({ name: MODEL, version: '1', bytes: buildMlpModel({ features: 4 }), maxBatch: 8, warmupBatches: [1] });
    await stack.deployments.put({ model: MODEL, version: '1', min: 0, max: 1, standby: 0 });
    api = inferenceClient(stack.api.grpcUrl as string);
  });

  afterAll(async () => {
    api?.client.close();
    await stack?.close();
  });

  it('a timed-out call names its job; only the tenant that made it can read it over HTTP; HTTP and gRPC share a bucket', async () => {
    expect(stack.api.grpcUrl).toBe(`127.0.0.1:${stack.api.grpcPort}`);
    expect(ok(await api.modelReady({ name: MODEL }, KEY_A))).toEqual({ ready: true }); // tenant-a: 1 of 4
    const timeout = failure(
      await api.modelInfer(
        { model_name: MODEL, inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 4], contents: { fp32_contents: [1, 2, 3, 4] } }] },
        KEY_A,
      ),
    ); // 2 of 4
    expect(timeout).toMatchObject({ code: status.DEADLINE_EXCEEDED, errorCode: 'timeout' });
    expect(timeout.jobId).toMatch(/^job_/);
    expect(timeout.details).toBe(
      `inference did not finish within 300 ms: no worker for ${MODEL}@1 yet (the deployment's min is 0: the scaler is starting one); poll /v1/jobs/${timeout.jobId} over HTTP`,
    );

    const other = await stack.call(`/v1/jobs/${timeout.jobId}`, { key: KEY_B });
    expect(other.status).toBe(404);
    await other.body?.cancel();
    const own = await stack.call(`/v1/jobs/${timeout.jobId}`, { key: KEY_A }); // 3 of 4
    expect(own.status).toBe(200);
    expect(((await own.json()) as { status: string }).status).toBe('queued');

    const metadata = await stack.call(`/v2/models/${MODEL}`, { key: KEY_A }); // 4 of 4
    expect(metadata.status).toBe(200);
    await metadata.body?.cancel();
    const limited = failure(await api.modelMetadata({ name: MODEL }, KEY_A));
    expect(limited).toMatchObject({ code: status.RESOURCE_EXHAUSTED, errorCode: 'rate_limited' });
    expect(limited.details).toMatch(/^too many requests: the limit is 0\.001 per second with bursts of 4; retry in \d+ s$/);
    // Another tenant's bucket is its own.
    expect(ok(await api.modelReady({ name: MODEL }, KEY_B))).toEqual({ ready: true });
  });
});
