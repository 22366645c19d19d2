/**
 * Warm-up shape hints through publish (DESIGN §3): `warmpool models publish … --warmup-shape
 * x:3,48,192` and the registry API record them in the manifest (`batching.warmupShapes`), refuse
 * ones that cannot fit the model's inputs, and never trust a stored manifest whose hints do not.
 * Against the real S3-protocol server from global setup.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IntegrityError, InvalidInputError } from '../infra/kernel/errors.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { modelsCommand } from '../scripts/commands/models.ts';
import {
  buildFixedBatchModel,
  buildFixedShapeModel,
  buildVadLikeModel,
  buildZipMapClassifierModel,
} from '../scripts/fixtures/exported-models.ts';
import { buildDynamicImageModel, buildMultiTypeModel } from '../scripts/fixtures/onnx-models.ts';
import { testServices, uniqueId } from './support/services.ts';

const image = buildDynamicImageModel();
let store: ReturnType<typeof createS3ObjectStore>;
let tmp: string;
const prefixes: string[] = [];

beforeAll(async () => {
  const { s3, tmpDir } = testServices();
  store = createS3ObjectStore({
    endpoint: s3.endpoint,
    bucket: s3.bucket,
    region: s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
  tmp = await fs.mkdtemp(path.join(tmpDir, 'warmup-shapes-'));
});

afterAll(async () => {
  for (const prefix of prefixes) for (const o of await store.list(`${prefix}/`)) await store.delete(o.key);
  store.close();
  await fs.rm(tmp, { recursive: true, force: true });
});

function newRegistry() {
  const prefix = uniqueId('warmup-shapes');
  prefixes.push(prefix);
  return { registry: createModelRegistry({ store, prefix }), prefix };
}

describe('the registry', () => {
  it('records the hints in the manifest and reads them back', async () => {
    const { registry } = newRegistry();
    const published = await registry.publish({ name: 'cls', version: '1', bytes: image, maxBatch: 8, warmupShapes: { x: [3, 48, 192] } });
    expect(published.batching).toEqual({ maxBatch: 8, warmupBatches: [], warmupShapes: { x: [3, 48, 192] } });
    expect((await registry.getManifest('cls', '1')).batching.warmupShapes).toEqual({ x: [3, 48, 192] });
    // Without hints the manifest is as it always was.
    expect((await registry.publish({ name: 'cls', version: '2', bytes: image })).batching).toEqual({ maxBatch: 64, warmupBatches: [] });
  });

  it('refuses hints that do not fit the model, naming the problem', async () => {
    const { registry } = newRegistry();
    const cases: Array<[Record<string, number[]>, RegExp]> = [
      [{ y: [3, 48, 192] }, /no such input/],
      [{ x: [48, 192] }, /gives 2 dimension/],
      [{ x: [1, 48, 192] }, /fixed at 3 by the model, not 1/],
      [{ x: [3, -1, 192] }, /positive integers/],
    ];
    for (const [shapes, message] of cases) {
      const err = await registry.publish({ name: 'cls', version: '1', bytes: image, warmupShapes: shapes }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect(err).toMatchObject({ code: 'invalid_warmup_shape', message: expect.stringMatching(message) });
    }
    await expect(registry.listVersions('cls')).resolves.toEqual([]);
  });

  it('treats other hints for a published version as a conflict, the same ones as the same publish', async () => {
    const { registry } = newRegistry();
    await registry.publish({ name: 'cls', version: '1', bytes: image, warmupShapes: { x: [3, 48, 192] } });
    await expect(registry.publish({ name: 'cls', version: '1', bytes: image, warmupShapes: { x: [3, 48, 192] } })).resolves.toBeDefined();
    await expect(registry.publish({ name: 'cls', version: '1', bytes: image, warmupShapes: { x: [3, 32, 100] } })).rejects.toMatchObject({
      code: 'version_exists',
    });
    await expect(registry.publish({ name: 'cls', version: '1', bytes: image })).rejects.toMatchObject({ code: 'version_exists' });
  });

  it('does not trust a stored manifest whose hints do not fit its inputs', async () => {
    const { registry, prefix } = newRegistry();
    const manifest = await registry.publish({ name: 'cls', version: '1', bytes: image });
    const key = `${prefix}/models/cls/1/manifest.json`;
    await store.put(key, JSON.stringify({ ...manifest, batching: { ...manifest.batching, warmupShapes: { x: [3, 0, 0] } } }));
    const err = await registry.getManifest('cls', '1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(IntegrityError);
    expect((err as Error).message).toMatch(/unusable warm-up shapes: .*positive integers/);
  });
});

describe('warmpool models publish --warmup-shape', () => {
  async function cli(bytes: Uint8Array, ...flags: string[]) {
    const { registry } = newRegistry();
    const file = path.join(tmp, `${uniqueId('model')}.onnx`);
    await fs.writeFile(file, bytes);
    const lines: string[] = [];
    const code = await modelsCommand(['publish', file, '--name', 'cls', '--version', '1', ...flags], {
      registry,
      out: (line) => lines.push(line),
    });
    const manifest = code === 0 ? await registry.getManifest('cls', '1') : undefined;
    return { code, lines, manifest };
  }

  it('takes INPUT:dims, once per input, and bare dims for a single-input model', async () => {
    expect((await cli(image, '--warmup-shape', 'x:3,48,192')).manifest?.batching.warmupShapes).toEqual({ x: [3, 48, 192] });
    expect((await cli(image, '--warmup-shape', '3,48,192')).manifest?.batching.warmupShapes).toEqual({ x: [3, 48, 192] });
    const multi = await cli(buildMultiTypeModel(), '--warmup-shape', 'ids:3', '--warmup-shape', 'x:2,2');
    expect(multi.manifest?.batching.warmupShapes).toEqual({ x: [2, 2], ids: [3] });
  });

  it.each<[string, string[], number, RegExp]>([
    ['dimensions that are not positive integers', ['--warmup-shape', 'x:3,48,wide'], 2, /positive integers separated by commas/],
    ['an input given twice', ['--warmup-shape', 'x:3,48,192', '--warmup-shape', 'x:3,32,32'], 2, /gives input x twice/],
    ['an empty input name', ['--warmup-shape', ':3,48,192'], 2, /the input name before ':' is empty/],
    ['a shape the model refuses', ['--warmup-shape', 'x:1,48,192'], 1, /fixed at 3 by the model, not 1/],
  ])('refuses %s', async (_, flags, code, message) => {
    const run = await cli(image, ...flags);
    expect(run.code).toBe(code);
    expect(run.lines[0]).toMatch(message);
  });

  it('asks for input names when a model with several inputs gets bare dims', async () => {
    const run = await cli(buildMultiTypeModel(), '--warmup-shape', '2,2');
    expect(run.code).toBe(2);
    expect(run.lines[0]).toMatch(/the model has 4 inputs \(x, ids, mask, n\): name the input/);
  });
});

describe('warmpool models: what a publish and a lookup say besides the result', () => {
  async function models(registry: ReturnType<typeof newRegistry>['registry'], ...args: string[]) {
    const lines: string[] = [];
    const code = await modelsCommand(args, { registry, out: (line) => lines.push(line) });
    return { code, lines };
  }
  async function file(bytes: Uint8Array): Promise<string> {
    const at = path.join(tmp, `${uniqueId('model')}.onnx`);
    await fs.writeFile(at, bytes);
    return at;
  }

  it('a model with dynamic height and width published without --warmup-shape is told the flag that sizes it', async () => {
    const { registry } = newRegistry();
    const bare = await models(registry, 'publish', await file(image), '--name', 'cls', '--version', '1');
    expect(bare.code).toBe(0);
    expect(bare.lines[1]).toMatch(/^hint: input x \[-1, 3, -1, -1\] has dynamic dimensions after the batch axis and no --warmup-shape/);
    expect(bare.lines[1]).toContain('Give the size: --warmup-shape x:3,H,W');
    const sized = await models(registry, 'publish', await file(image), '--name', 'cls', '--version', '2', '--warmup-shape', 'x:3,48,192');
    expect(sized.lines).toHaveLength(1);
    // A model whose dimensions are all fixed after the batch axis needs no size.
    const fixed = await models(registry, 'publish', await file(buildMultiTypeModel()), '--name', 'multi', '--version', '1');
    expect(fixed.lines).toHaveLength(1);
  });

  it('a model with a ZipMap output names --outputs; with it, the tensor outputs are served (issue 30)', async () => {
    const { registry } = newRegistry();
    const at = await file(buildZipMapClassifierModel());
    const bare = await models(registry, 'publish', at, '--name', 'skl', '--version', '1');
    expect(bare.code).toBe(1);
    expect(bare.lines[0]).toMatch(/^error: output "output_probability" is a sequence of maps .*--outputs label,probabilities$/);
    const served = await models(registry, 'publish', at, '--name', 'skl', '--version', '1', '--outputs', 'label,probabilities');
    expect(served.code).toBe(0);
    expect((await registry.getManifest('skl', '1')).outputs.map((o) => o.name)).toEqual(['label', 'probabilities']);
    const typo = await models(registry, 'publish', at, '--name', 'skl', '--version', '2', '--outputs', 'label,');
    expect(typo.lines[0]).toMatch(/--outputs takes names separated by commas/);
  });

  it('a model exported with a fixed batch of 1 is published saying it runs one row a pass', async () => {
    const { registry } = newRegistry();
    const one = await models(registry, 'publish', await file(buildFixedBatchModel()), '--name', 'kws', '--version', '1');
    expect(one.code).toBe(0);
    expect(one.lines[1]).toBe(
      'the model fixes its batch at 1: it runs 1 row a forward pass, and a request of several rows as several passes',
    );
  });

  it('a model with its rows on another axis is published saying its plan; --batch-axis and --no-batching say one', async () => {
    const { registry } = newRegistry();
    const vadFile = await file(buildVadLikeModel());
    const vad = (version: string, ...flags: string[]) =>
      models(registry, 'publish', vadFile, '--name', 'vad', '--version', version, ...flags);
    const read = await vad('1');
    expect(read.code).toBe(0);
    expect(read.lines[1]).toBe(
      'batching plan: state on axis 1, sr none (one value a pass), stateN on axis 1; every other tensor on axis 0',
    );
    // show lists each tensor's axis in the model's own shape, after the manifest's JSON.
    const shown = await models(registry, 'show', 'vad', '--version', '1');
    expect(shown.lines.slice(-6)).toEqual([
      "batch axes (each tensor's shape as the model takes it, -1 dynamic):",
      '  input input [-1, 4]: batch axis 0',
      '  input state [2, -1, 3]: batch axis 1',
      '  input sr []: no batch axis',
      '  output output [-1, 1]: batch axis 0',
      '  output stateN [2, -1, 3]: batch axis 1',
    ]);
    expect(JSON.parse(shown.lines.slice(0, -6).join('\n')).inputs[1]).toEqual({
      name: 'state',
      datatype: 'FP32',
      shape: [-1, 2, 3],
      batchAxis: 1,
    });
    const shape = await models(registry, 'publish', await file(buildFixedShapeModel()), '--name', 'sums', '--version', '1');
    expect(shape.lines[1]).toBe('no batch axis: one request a forward pass, its shapes exact');
    expect((await models(registry, 'show', 'sums')).lines.slice(-2)).toEqual([
      '  input x [2, 3]: no batch axis',
      '  output y [3]: no batch axis',
    ]);
    const whole = await models(registry, 'publish', await file(image), '--name', 'cls', '--version', '1', '--no-batching');
    expect(whole.code).toBe(0);
    expect(whole.lines[1]).toBe('no batch axis: one request a forward pass, its shapes exact');
    expect((await registry.getManifest('cls', '1')).batching).toMatchObject({ maxBatch: 1, fixedBatch: 1 });
    const both = await vad('3', '--batch-axis', 'state:1', '--no-batching');
    expect(both.code).toBe(1);
    expect(both.lines[0]).toMatch(/give --batch-axis or --no-batching, not both/);
    expect((await vad('3', '--batch-axis', 'state:-1')).code).toBe(2);
    expect((await vad('2', '--batch-axis', 'sr:none,state:1')).code).toBe(0);
    // The same plan as read from the names: a republish of version 1 with it is not a conflict.
    expect((await vad('1', '--batch-axis', 'state:1')).code).toBe(0);
    // Another plan for the same bytes is a conflict, named.
    const other = await vad('1', '--batch-axis', 'input:none');
    expect(other.code).toBe(1);
    expect(other.lines[0]).toMatch(/already exists with different batch axes; publish a new version or overwrite this one$/);
    const bad = await vad('3', '--batch-axis', 'state=1');
    expect(bad.code).toBe(2);
    expect(bad.lines[0]).toMatch(/--batch-axis takes NAME:AXIS pairs separated by commas, AXIS a number or none \(got "state=1"\)/);
    const fixedAxis = await vad('3', '--batch-axis', 'state:0');
    expect(fixedAxis.code).toBe(1);
    expect(fixedAxis.lines[0]).toMatch(/axis 0 of input "state" is fixed at 2/);
  });

  it('a version that exists with other contents names the flag that replaces it', async () => {
    const { registry } = newRegistry();
    const at = await file(image);
    await models(registry, 'publish', at, '--name', 'cls', '--version', '1', '--warmup-shape', 'x:3,48,192');
    const again = await models(registry, 'publish', at, '--name', 'cls', '--version', '1', '--label', 'team=vision');
    expect(again.code).toBe(1);
    expect(again.lines[0]).toMatch(/already exists with .*; publish a new version or overwrite this one$/);
    expect(again.lines[1]).toBe('`--overwrite` replaces it');
    expect(again.lines.join('\n')).not.toMatch(/pass overwrite/);
  });

  it('show for a model nothing is published under names the published one it most likely meant', async () => {
    const { registry } = newRegistry();
    await models(registry, 'publish', await file(image), '--name', 'image-classifier', '--version', '1', '--warmup-shape', 'x:3,48,192');
    const typo = await models(registry, 'show', 'image-clasifier');
    expect(typo.code).toBe(1);
    expect(typo.lines[0]).toBe('error: no model named image-clasifier in the registry; did you mean "image-classifier"?');
    const unlike = await models(registry, 'show', 'bert');
    expect(unlike.lines[0]).toBe('error: no model named bert in the registry');
  });
});
