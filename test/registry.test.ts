/**
 * The S3 model registry, the worker's model cache and `warmpool models`, against the real
 * S3-protocol server from global setup. Every test works under its own key prefix.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../infra/kernel/clock.ts';
import { IntegrityError, InvalidInputError, NotFoundError } from '../infra/kernel/errors.ts';
import { createModelRegistry, type ModelRegistry } from '../infra/registry/model-registry.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { modelsCommand } from '../scripts/commands/models.ts';
import {
  buildExternalDataModel,
  buildFp16Model,
  buildGatherModel,
  buildMlpModel,
  buildMultiTypeModel,
} from '../scripts/fixtures/onnx-models.ts';
import { checkedMarkFor, createModelCache } from '../worker/model-cache.ts';
import { testServices, uniqueId } from './support/services.ts';

let store: ReturnType<typeof createS3ObjectStore>;
let tmpRoot: string;
const prefixes: string[] = [];

beforeAll(async () => {
  const { s3, tmpDir } = testServices();
  store = createS3ObjectStore({
    endpoint: s3.endpoint,
    bucket: s3.bucket,
    region: s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    listPageSize: 3, // small pages, so every listing below also exercises paging
  });
  tmpRoot = await fs.mkdtemp(path.join(tmpDir, 'registry-test-'));
});

afterAll(async () => {
  for (const prefix of prefixes) {
    for (const o of await store.list(`${prefix}/`)) await store.delete(o.key);
  }
  store.close();
  store.close(); // idempotent
  await fs.rm(tmpRoot, { recursive: true, force: true });
});

function newPrefix(): string {
  const prefix = uniqueId('registry');
  prefixes.push(prefix);
  return prefix;
}

function newRegistry(clock = new ManualClock(Date.parse('2030-01-01T00:00:00Z'))): { registry: ModelRegistry; prefix: string } {
  const prefix = newPrefix();
  return { registry: createModelRegistry({ store, prefix, clock }), prefix };
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (err: Error) => err,
  );
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

describe('S3 object store', () => {
  it('puts, heads, gets, lists across pages and deletes; missing keys read as null', async () => {
    const prefix = newPrefix();
    for (let i = 0; i < 7; i++) await store.put(`${prefix}/k${i}`, `v${i}`);
    const big = Buffer.alloc(6 * 1024 * 1024 + 17, 3);
    await store.put(`${prefix}/stream`, Readable.from([big.subarray(0, 1000), big.subarray(1000)]));
    expect((await store.list(`${prefix}/`)).map((o) => o.key)).toEqual([
      ...[0, 1, 2, 3, 4, 5, 6].map((i) => `${prefix}/k${i}`),
      `${prefix}/stream`,
    ]);
    expect((await store.head(`${prefix}/stream`))?.sizeBytes).toBe(big.length);
    expect(sha256(await readAll((await store.get(`${prefix}/stream`))!))).toBe(sha256(big));
    expect(Buffer.from((await store.getBytes(`${prefix}/k3`))!).toString()).toBe('v3');
    await store.delete(`${prefix}/k3`);
    expect(await store.getBytes(`${prefix}/k3`)).toBeNull();
    expect(await store.get(`${prefix}/k3`)).toBeNull();
    expect(await store.head(`${prefix}/k3`)).toBeNull();
  });

  it('wraps other failures, keeping the cause', async () => {
    const { s3 } = testServices();
    const wrong = createS3ObjectStore({ ...s3, bucket: 'no-such-bucket-here', forcePathStyle: true, credentials: s3, maxAttempts: 1 });
    try {
      const err = await rejection(wrong.getBytes('x'));
      expect(err.message).toMatch(/s3:\/\/no-such-bucket-here\/x/);
      expect((err.cause as Error).name).toBe('NoSuchBucket');
    } finally {
      wrong.close();
    }
  });
});

describe('model registry', () => {
  it('publishes, lists and shows a model, with metadata read from the ONNX file', async () => {
    const { registry, prefix } = newRegistry();
    const bytes = buildMultiTypeModel();
    const manifest = await registry.publish({ name: 'multi', version: '1', bytes, warmupBatches: [32, 1, 8, 8], labels: { team: 'ads' } });
    expect(manifest).toMatchObject({
      name: 'multi',
      version: '1',
      format: 'onnx',
      sha256: sha256(bytes),
      sizeBytes: bytes.length,
      batching: { maxBatch: 64, warmupBatches: [1, 8, 32] },
      opset: 17,
      createdAt: '2030-01-01T00:00:00.000Z',
      labels: { team: 'ads' },
    });
    expect(manifest.inputs.map((t) => `${t.name}:${t.datatype}:${t.shape.join('x')}`)).toEqual([
      'x:FP32:-1x2x2',
      'ids:INT64:-1x3',
      'mask:BOOL:-1x3',
      'n:INT32:-1x1',
    ]);
    await registry.publish({ name: 'fp16', version: 'v1.0', bytes: buildFp16Model() });
    expect(await registry.list()).toEqual([
      { name: 'fp16', versions: ['v1.0'] },
      { name: 'multi', versions: ['1'] },
    ]);
    expect(await registry.getManifest('multi', '1')).toEqual(manifest);
    expect(await registry.getManifest('multi')).toEqual(manifest);
    expect(JSON.parse(Buffer.from((await store.getBytes(`${prefix}/models/multi/1/manifest.json`))!).toString())).toEqual(manifest);
    expect(sha256(await readAll(await registry.openModel(manifest)))).toBe(manifest.sha256);
  });

  it('resolves the latest version by creation time and lists versions in natural order', async () => {
    const clock = new ManualClock(1_000_000);
    const { registry } = newRegistry(clock);
    for (const version of ['2', '10', '1']) {
      await registry.publish({ name: 'mlp', version, bytes: buildMlpModel({ features: 4, hidden: 4, seed: Number(version) }) });
      await clock.advance(60_000);
    }
    expect(await registry.listVersions('mlp')).toEqual(['1', '2', '10']);
    expect((await registry.getManifest('mlp')).version).toBe('1');
    expect(await registry.listVersions('absent')).toEqual([]);
  });

  it('says which is missing: the model or the version', async () => {
    const { registry } = newRegistry();
    await registry.publish({ name: 'gather', version: '1', bytes: buildGatherModel() });
    const noModel = await rejection(registry.getManifest('nope'));
    expect(noModel).toBeInstanceOf(NotFoundError);
    expect((noModel as NotFoundError).code).toBe('model_not_found');
    expect(((await rejection(registry.getManifest('nope', '1'))) as NotFoundError).code).toBe('model_not_found');
    expect(((await rejection(registry.getManifest('gather', '2'))) as NotFoundError).code).toBe('version_not_found');
    expect(await rejection(registry.openModel({ name: 'gather', version: '2' }))).toBeInstanceOf(NotFoundError);
  });

  it('re-publishing identical bytes is idempotent; different bytes are a 409 unless overwrite', async () => {
    const clock = new ManualClock(5_000);
    const { registry } = newRegistry(clock);
    const first = await registry.publish({ name: 'm', version: '1', bytes: buildMlpModel({ seed: 1 }) });
    await clock.advance(1_000);
    expect(await registry.publish({ name: 'm', version: '1', bytes: buildMlpModel({ seed: 1 }) })).toEqual(first);

    const conflict = await rejection(registry.publish({ name: 'm', version: '1', bytes: buildMlpModel({ seed: 2 }) }));
    expect(conflict).toBeInstanceOf(InvalidInputError);
    expect(conflict).toMatchObject({ status: 409, code: 'version_exists' });
    expect(await registry.getManifest('m', '1')).toEqual(first);
    expect(sha256(await readAll(await registry.openModel(first)))).toBe(first.sha256);

    const hints = await rejection(registry.publish({ name: 'm', version: '1', bytes: buildMlpModel({ seed: 1 }), maxBatch: 8 }));
    expect(hints).toMatchObject({ status: 409, code: 'version_exists' });

    const replaced = await registry.publish({ name: 'm', version: '1', bytes: buildMlpModel({ seed: 2 }), overwrite: true });
    expect(replaced.sha256).not.toBe(first.sha256);
    expect(await registry.getManifest('m', '1')).toEqual(replaced);
    expect(sha256(await readAll(await registry.openModel(replaced)))).toBe(replaced.sha256);
  });

  it('writes model.onnx first and manifest.json last; a publish that dies before the manifest stays invisible', async () => {
    const prefix = newPrefix();
    const puts: string[] = [];
    let failManifest = false;
    const recording: ObjectStore = {
      ...store,
      async put(key, body, options) {
        if (failManifest && key.endsWith('manifest.json')) throw new Error('simulated crash before the manifest');
        puts.push(key.slice(prefix.length + 1));
        return store.put(key, body, options);
      },
    };
    const registry = createModelRegistry({ store: recording, prefix: `/${prefix}/` });
    await registry.publish({ name: 'a', version: '1', bytes: buildFp16Model() });
    expect(puts).toEqual(['models/a/1/model.onnx', 'models/a/1/manifest.json']);

    failManifest = true;
    await expect(registry.publish({ name: 'b', version: '1', bytes: buildFp16Model() })).rejects.toThrow(/simulated crash/);
    expect(await store.head(`${prefix}/models/b/1/model.onnx`)).not.toBeNull();
    expect(await registry.list()).toEqual([{ name: 'a', versions: ['1'] }]);
    expect(await rejection(registry.getManifest('b'))).toBeInstanceOf(NotFoundError);
  });

  it('refuses bad names, versions, batching hints and models before writing anything', async () => {
    const { registry, prefix } = newRegistry();
    const bytes = buildFp16Model();
    const cases: Array<[Parameters<ModelRegistry['publish']>[0], string]> = [
      [{ name: 'bad/name', version: '1', bytes }, 'invalid_name'],
      [{ name: 'ok', version: '../1', bytes }, 'invalid_version'],
      [{ name: 'ok', version: '1', bytes, maxBatch: 0 }, 'invalid_max_batch'],
      [{ name: 'ok', version: '1', bytes, maxBatch: 65_537 }, 'invalid_max_batch'],
      [{ name: 'ok', version: '1', bytes, maxBatch: 16, warmupBatches: [1, 32] }, 'invalid_warmup_batches'],
      [{ name: 'ok', version: '1', bytes: new TextEncoder().encode('not onnx') }, 'invalid_model'],
    ];
    for (const [input, code] of cases) {
      const err = await rejection(registry.publish(input));
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).code).toBe(code);
    }
    expect(await store.list(`${prefix}/`)).toEqual([]);
  });
});

describe('model cache', () => {
  async function setup() {
    const { registry, prefix } = newRegistry();
    let opens = 0;
    const counting = {
      openModel: (m: Parameters<ModelRegistry['openModel']>[0]) => {
        opens += 1;
        return registry.openModel(m);
      },
    };
    const dir = await fs.mkdtemp(path.join(tmpRoot, 'cache-'));
    const cache = createModelCache({ dir, registry: counting });
    const bytes = buildMlpModel({ features: 32, hidden: 256, layers: 3 });
    const manifest = await registry.publish({ name: 'mlp', version: '1', bytes });
    const modelKey = `${prefix}/models/mlp/1/model.onnx`;
    return { cache, dir, bytes, manifest, modelKey, opens: () => opens };
  }

  it('downloads once into <dir>/<sha256>.onnx, then hits', async () => {
    const { cache, dir, bytes, manifest, opens } = await setup();
    const first = await cache.ensure(manifest);
    expect(first).toMatchObject({ path: path.join(dir, `${manifest.sha256}.onnx`), hit: false });
    expect(sha256(await fs.readFile(first.path))).toBe(sha256(bytes));
    const second = await cache.ensure(manifest);
    expect(second).toEqual({ path: first.path, hit: true, downloadMs: 0 });
    expect(opens()).toBe(1);
    // Beside it, the mark of its passed external-data check.
    expect((await fs.readdir(dir)).sort()).toEqual([`${manifest.sha256}.checked.json`, `${manifest.sha256}.onnx`]);
  });

  it('concurrent ensure() calls share one download', async () => {
    const { cache, manifest, opens } = await setup();
    const results = await Promise.all([cache.ensure(manifest), cache.ensure(manifest), cache.ensure(manifest)]);
    expect(opens()).toBe(1);
    expect(new Set(results.map((r) => r.path)).size).toBe(1);
    expect(sha256(await fs.readFile(results[0]!.path))).toBe(manifest.sha256);
  });

  it('refuses a corrupted object of the right length and leaves no file behind', async () => {
    const { cache, dir, bytes, manifest, modelKey } = await setup();
    const corrupted = Uint8Array.from(bytes);
    corrupted[corrupted.length - 10] = (corrupted[corrupted.length - 10]! + 1) % 256;
    await store.put(modelKey, corrupted);
    const err = await rejection(cache.ensure(manifest));
    expect(err).toBeInstanceOf(IntegrityError);
    expect((err as IntegrityError).code).toBe('checksum_mismatch');
    expect(err.message).toContain(`expected sha256 ${manifest.sha256}`);
    expect(err.message).toContain(`got sha256 ${sha256(corrupted)}`);
    expect(existsSync(path.join(dir, `${manifest.sha256}.onnx`))).toBe(false);
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('refuses a truncated object', async () => {
    const { cache, dir, bytes, manifest, modelKey } = await setup();
    await store.put(modelKey, bytes.subarray(0, Math.floor(bytes.length / 2)));
    const err = await rejection(cache.ensure(manifest));
    expect(err).toMatchObject({ code: 'checksum_mismatch' });
    expect(err.message).toContain(`${manifest.sizeBytes} bytes, got sha256`);
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('replaces a cached file that no longer verifies', async () => {
    const { cache, manifest, opens } = await setup();
    const { path: file } = await cache.ensure(manifest);
    const onDisk = await fs.readFile(file);
    onDisk[100] = (onDisk[100]! + 1) % 256;
    await fs.writeFile(file, onDisk);
    expect((await cache.ensure(manifest)).hit).toBe(false);
    expect(opens()).toBe(2);
    expect(sha256(await fs.readFile(file))).toBe(manifest.sha256);
  });
});

describe('model cache: the external-data check, once per sha256', () => {
  // A model that names external data, cached as an older warmpool (before the check) left it.
  const bytes = buildExternalDataModel({ location: 'weights.bin' });
  const manifest = { name: 'old', version: '1', sha256: sha256(bytes), sizeBytes: bytes.length };
  const never = { openModel: async () => Promise.reject(new Error('a cached model is not downloaded')) };

  async function cachedWith(mark?: string) {
    const dir = await fs.mkdtemp(path.join(tmpRoot, 'checked-'));
    const file = path.join(dir, `${manifest.sha256}.onnx`);
    await fs.writeFile(file, bytes);
    if (mark !== undefined) await fs.writeFile(checkedMarkFor(file), mark);
    return { dir, file };
  }
  const passed = JSON.stringify({ check: 'external-data', version: 1, externalData: false });

  it('checks a hit without a mark, refusing and removing a model that names external data', async () => {
    const { dir } = await cachedWith();
    const err = await rejection(createModelCache({ dir, registry: never }).ensure(manifest));
    expect(err).toMatchObject({ code: 'external_data' });
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('trusts the mark of a passed check on a hit whose sha256 was verified, without decoding the model again', async () => {
    // (The mark is forged here to show it is what decides: the model itself would fail.)
    const { dir, file } = await cachedWith(passed);
    expect(await createModelCache({ dir, registry: never }).ensure(manifest)).toEqual({ path: file, hit: true, downloadMs: 0 });
  });

  it.each([
    ['a hit checked by size only', passed, false],
    ['a mark from another version of the check', JSON.stringify({ check: 'external-data', version: 0, externalData: false }), true],
    ['a mark that does not parse', '{"check":', true],
  ])('does not trust %s', async (_, mark, verifyOnHit) => {
    const { dir } = await cachedWith(mark);
    const err = await rejection(createModelCache({ dir, registry: never, verifyOnHit }).ensure(manifest));
    expect(err).toMatchObject({ code: 'external_data' });
    expect(await fs.readdir(dir)).toEqual([]);
  });

  it('marks a clean model cached before the mark existed, on its first hit', async () => {
    const clean = buildMlpModel({ features: 8, hidden: 8, layers: 1 });
    const m = { name: 'clean', version: '1', sha256: sha256(clean), sizeBytes: clean.length };
    const dir = await fs.mkdtemp(path.join(tmpRoot, 'checked-'));
    const file = path.join(dir, `${m.sha256}.onnx`);
    await fs.writeFile(file, clean);
    expect((await createModelCache({ dir, registry: never }).ensure(m)).hit).toBe(true);
    expect(JSON.parse(await fs.readFile(checkedMarkFor(file), 'utf8'))).toEqual(JSON.parse(passed));
  });
});

describe('warmpool models', () => {
  it('publishes a file, lists and shows it; bad arguments exit 2', async () => {
    const { registry } = newRegistry();
    const lines: string[] = [];
    const run = (...args: string[]) => modelsCommand(args, { registry, out: (line) => lines.push(line) });
    const file = path.join(tmpRoot, `${uniqueId('model')}.onnx`);
    await fs.writeFile(file, buildGatherModel());

    expect(
      await run(
        'publish',
        file,
        '--name',
        'gather',
        '--version',
        '3',
        '--max-batch',
        '16',
        '--warmup-batches',
        '8,1',
        '--label',
        'team=ml',
      ),
    ).toBe(0);
    expect((await registry.getManifest('gather', '3')).batching).toEqual({ maxBatch: 16, warmupBatches: [1, 8] });

    lines.length = 0;
    expect(await run('list')).toBe(0);
    expect(lines).toEqual(['MODEL   VERSIONS', 'gather  3']);

    lines.length = 0;
    expect(await run('show', 'gather')).toBe(0);
    expect(JSON.parse(lines.join('\n'))).toMatchObject({ name: 'gather', version: '3', labels: { team: 'ml' } });

    lines.length = 0;
    expect(await run('show', 'gather', '--version', '9')).toBe(1);
    expect(lines[0]).toMatch(/no version 9/);

    for (const bad of [
      ['publish', file, '--version', '1'],
      ['publish', file, '--name', 'g', '--version', '1', '--max-batch', 'lots'],
      ['publish', path.join(tmpRoot, 'missing.onnx'), '--name', 'g', '--version', '1'],
      ['list', '--bogus'],
      ['frobnicate'],
    ]) {
      lines.length = 0;
      expect(await run(...bad)).toBe(2);
      expect(lines[0]).toMatch(
        /^error: (--name is required|--max-batch must be a positive integer|no such file: .*missing\.onnx|Unknown option '--bogus'|unknown models subcommand)/,
      );
    }
  });
});
