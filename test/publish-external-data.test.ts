/**
 * ONNX external data (issue 20 §6) on the real registry (S3-protocol server), the real CLI and a
 * real worker process: a model that keeps a tensor in another file is refused at publish, and a
 * worker refuses one written into the registry by hand (published before the check, or put
 * straight into the bucket), although ONNX Runtime itself would load it and serve what it reads
 * from the file beside it in the shared model cache.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readdirSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildExternalDataModel } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack } from './support/stack.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
/** What the sibling file holds: W = [1, 10, 100, 1000], so x = ones reads back 1111. */
const SECRET = Buffer.from(new Float32Array([1, 10, 100, 1000]).buffer);
const SECRET_FILE = 'another-models-weights.bin';

let stack: TestStack;
let redis: RedisClient;

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300' });
  redis = createRedis(stack.config.redisUrl);
}, 120_000);

afterAll(async () => {
  await stack?.close();
  if (redis) await closeRedis(redis);
});

describe('publish', () => {
  it.each(['initializer', 'constant'] as const)(
    'refuses a model whose %s keeps its data in another file; nothing is written',
    async (where) => {
      const name = `ext-${where}`;
      const err = await stack.registry
        .publish({ name, version: '1', bytes: buildExternalDataModel({ location: SECRET_FILE, where }) })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(InvalidInputError);
      expect(err).toMatchObject({ code: 'external_data', status: 400 });
      expect((err as Error).message).toContain(`tensor "W" keeps its data in the external file "${SECRET_FILE}"`);
      expect(await stack.registry.listVersions(name)).toEqual([]);
    },
  );

  it('`warmpool models publish` refuses it with the tensor named, exit code 1', async () => {
    const file = path.join(stack.config.worker.modelCacheDir, '..', `ext-cli-${process.pid}.onnx`);
    writeFileSync(file, buildExternalDataModel({ location: SECRET_FILE }));
    try {
      const res = await cli(['models', 'publish', file, '--name', 'ext-cli', '--version', '1']);
      expect(res.code).toBe(1);
      expect(res.out).toMatch(
        /^warmpool models publish: tensor "W" keeps its data in the external file "another-models-weights\.bin"; warmpool serves only self-contained models/m,
      );
      expect(await stack.registry.listVersions('ext-cli')).toEqual([]);
    } finally {
      await fs.rm(file, { force: true });
    }
  });
});

describe('a worker', () => {
  it('will not load such a model planted straight into the registry, though ONNX Runtime would', async () => {
    const bytes = buildExternalDataModel({ location: SECRET_FILE });
    await plant('planted', '1', bytes);
    const cacheDir = stack.config.worker.modelCacheDir;
    await fs.mkdir(cacheDir, { recursive: true });
    writeFileSync(path.join(cacheDir, SECRET_FILE), SECRET);

    // The threat, shown with ONNX Runtime itself: loaded from a path in the cache, the model's
    // weights are the sibling file's bytes, and its outputs give them away.
    const probe = path.join(cacheDir, `probe-${process.pid}.onnx`);
    writeFileSync(probe, bytes);
    const session = await ort.InferenceSession.create(probe);
    const out = await session.run({ x: new ort.Tensor('float32', new Float32Array([1, 1, 1, 1]), [1, 4]) });
    expect(Array.from(out.y?.data as Float32Array)).toEqual([1111]);
    await session.release();
    await fs.rm(probe);

    // The worker downloads and verifies it, then refuses it: it fails to start, says why, and
    // the copy is gone from the cache.
    const worker = await runWorker('planted', '1');
    expect(worker.code).toBe(1);
    expect(worker.out).toContain('worker failed to start');
    expect(worker.out).toMatch(/model planted version 1 is not served: tensor \\?"W\\?" keeps its data in the external file/);
    expect(worker.states).not.toContain('active');
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    expect(existsSync(path.join(cacheDir, `${sha256}.onnx`))).toBe(false);
    expect(readdirSync(cacheDir)).toEqual([SECRET_FILE]);
  }, 90_000);

  it('refuses it on a cache hit too (a file cached before this check existed)', async () => {
    const bytes = buildExternalDataModel({ location: SECRET_FILE, where: 'constant' });
    await plant('precached', '1', bytes);
    const sha256 = createHash('sha256').update(bytes).digest('hex');
    const cached = path.join(stack.config.worker.modelCacheDir, `${sha256}.onnx`);
    const source = path.join(stack.config.worker.modelCacheDir, '..', `precached-${process.pid}.onnx`);
    writeFileSync(source, bytes);
    copyFileSync(source, cached);
    await fs.rm(source);
    const worker = await runWorker('precached', '1');
    expect(worker.code).toBe(1);
    expect(worker.out).toMatch(/model precached version 1 is not served: tensor \\?"W\\?" keeps its data in the external file/);
    expect(worker.states).not.toContain('active');
    expect(existsSync(cached)).toBe(false);
  }, 90_000);
});

/** Writes model.onnx and manifest.json the way a publish before this check did, bypassing it. */
async function plant(name: string, version: string, bytes: Uint8Array): Promise<void> {
  const store = createS3ObjectStore(stack.config.s3);
  try {
    const prefix = stack.config.s3.prefix ? `${stack.config.s3.prefix}/` : '';
    const dir = `${prefix}models/${name}/${version}/`;
    const manifest: ModelManifest = {
      name,
      version,
      format: 'onnx',
      sha256: createHash('sha256').update(bytes).digest('hex'),
      sizeBytes: bytes.byteLength,
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
      outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 1] }],
      batching: { maxBatch: 8, warmupBatches: [] },
      createdAt: new Date().toISOString(),
      labels: {},
    };
    await store.put(`${dir}model.onnx`, bytes, { contentType: 'application/octet-stream' });
    await store.put(`${dir}manifest.json`, JSON.stringify(manifest), { contentType: 'application/json' });
  } finally {
    store.close();
  }
}

/**
 * Runs `warmpool worker` to its exit, with its log and the states its heartbeat showed meanwhile.
 * (A refused worker's `failed` lasts only until its close marks it `stopped`, so the test reads
 * the exit code and the log rather than waiting for that state.)
 */
async function runWorker(model: string, version: string): Promise<{ code: number | null; out: string; states: string[] }> {
  const states = new Set<string>();
  const child = spawn(process.execPath, [BIN, 'worker', '--model', model, '--version', version], {
    env: stack.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let done = false;
  void exited.then(() => (done = true));
  while (!done) {
    for (const b of await listHeartbeats(redis, stack.config.queuePrefix)) if (b.model === model) states.add(b.state);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { code: await exited, out, states: [...states] };
}

function cli(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: stack.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('exit', (code) => resolve({ code, out }));
  });
}
