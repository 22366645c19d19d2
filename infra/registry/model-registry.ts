/**
 * The model registry (DESIGN §3) over an ObjectStore:
 *
 *   <prefix>/models/<name>/<version>/model.onnx
 *   <prefix>/models/<name>/<version>/manifest.json
 *
 * A version exists when its manifest exists. Publishing writes model.onnx first and
 * manifest.json last, so a publish that dies half-way leaves nothing visible; readers list and
 * resolve versions by manifest only. A published version is immutable unless `overwrite` is
 * asked for: workers cache by sha256, and silently swapping the bytes behind a version would
 * make two workers of "the same" version serve different models.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { BatchAxis } from '../contracts/batch-axes.ts';
import { MODEL_NAME_PATTERN, type ModelManifest, type TensorSpec, VERSION_PATTERN } from '../contracts/manifest.ts';
import { normaliseWarmupShapes, warmupShapesProblem } from '../contracts/warmup-shapes.ts';
import { type Clock, systemClock } from '../kernel/clock.ts';
import { IntegrityError, InvalidInputError, NotFoundError } from '../kernel/errors.ts';
import { registryModelsArea } from '../kernel/s3-location.ts';
import type { ObjectStore } from './object-store.ts';
import { readOnnxMetadata } from './onnx-metadata.ts';

export const DEFAULT_MAX_BATCH = 64;
export const MAX_MAX_BATCH = 65_536;

export interface PublishInput {
  name: string;
  version: string;
  bytes: Uint8Array;
  maxBatch?: number;
  warmupBatches?: number[];
  /** Non-batch dimensions warm-up runs an input with, by input name (`{ x: [3, 48, 192] }`); see BatchingHints. */
  warmupShapes?: Record<string, number[]>;
  labels?: Record<string, string>;
  /**
   * The outputs to serve, by name (`--outputs label,probabilities`): the others are never
   * fetched, so a model with a non-tensor output (a ZipMap) is served by its tensor ones.
   * Absent: every output, each a tensor.
   */
  outputs?: string[];
  /** Where tensors keep their rows, by name, over what the model's names say (`--batch-axis state:1,sr:none`; onnx-metadata.ts). */
  batchAxes?: Record<string, BatchAxis>;
  /** Serve every tensor whole, one request a forward pass (`--no-batching`). */
  noBatching?: boolean;
  /** Replace an existing version whose bytes or settings differ. */
  overwrite?: boolean;
}

export interface ModelRegistry {
  publish(input: PublishInput): Promise<ModelManifest>;
  list(): Promise<Array<{ name: string; versions: string[] }>>;
  listVersions(name: string): Promise<string[]>;
  /** `version` omitted = the most recently created one. */
  getManifest(name: string, version?: string): Promise<ModelManifest>;
  openModel(manifest: Pick<ModelManifest, 'name' | 'version'>): Promise<Readable>;
}

export interface ModelRegistryDeps {
  store: ObjectStore;
  /** Key prefix inside the bucket ('' for none); slashes at either end are ignored. */
  prefix: string;
  clock?: Clock;
}

export function createModelRegistry(deps: ModelRegistryDeps): ModelRegistry {
  const { store } = deps;
  const clock = deps.clock ?? systemClock;
  const root = modelsRoot(deps.prefix);
  const versionDir = (name: string, version: string) => `${root}${name}/${version}/`;
  const modelKey = (name: string, version: string) => `${versionDir(name, version)}model.onnx`;
  const manifestKey = (name: string, version: string) => `${versionDir(name, version)}manifest.json`;

  async function readManifest(name: string, version: string): Promise<ModelManifest | null> {
    const bytes = await store.getBytes(manifestKey(name, version));
    return bytes ? parseManifest(bytes, manifestKey(name, version)) : null;
  }

  async function listVersions(name: string): Promise<string[]> {
    if (!MODEL_NAME_PATTERN.test(name)) return [];
    const objects = await store.list(`${root}${name}/`);
    return sortVersions(objects.flatMap((o) => parseManifestKey(o.key.slice(root.length)) ?? []).map((k) => k.version));
  }

  return {
    async publish(input) {
      const manifest = buildManifest(input, clock);
      const existing = await readManifest(input.name, input.version);
      if (existing) {
        const conflict = describeConflict(existing, manifest);
        if (!conflict) return existing;
        if (!input.overwrite) {
          throw new InvalidInputError(
            'version_exists',
            `model ${input.name} version ${input.version} already exists with ${conflict}; publish a new version or overwrite this one`,
            { status: 409 },
          );
        }
        // Hide the version while its bytes change, so no reader pairs the old manifest with new bytes.
        await store.delete(manifestKey(input.name, input.version));
      }
      await store.put(modelKey(input.name, input.version), input.bytes, { contentType: 'application/octet-stream' });
      await store.put(manifestKey(input.name, input.version), `${JSON.stringify(manifest, null, 2)}\n`, {
        contentType: 'application/json',
      });
      return manifest;
    },

    async list() {
      const objects = await store.list(root);
      const byName = new Map<string, string[]>();
      for (const o of objects) {
        const k = parseManifestKey(o.key.slice(root.length));
        if (k) byName.set(k.name, [...(byName.get(k.name) ?? []), k.version]);
      }
      return [...byName.keys()].sort().map((name) => ({ name, versions: sortVersions(byName.get(name) ?? []) }));
    },

    listVersions,

    async getManifest(name, version) {
      if (version !== undefined) {
        const manifest = VERSION_PATTERN.test(version) && MODEL_NAME_PATTERN.test(name) ? await readManifest(name, version) : null;
        if (manifest) return manifest;
        if ((await listVersions(name)).length === 0) throw modelNotFound(name);
        throw new NotFoundError('version_not_found', `model ${name} has no version ${version}`);
      }
      const manifests = await Promise.all((await listVersions(name)).map((v) => readManifest(name, v)));
      const latest = manifests
        .filter((m): m is ModelManifest => m !== null)
        .sort(byCreatedAt)
        .at(-1);
      if (!latest) throw modelNotFound(name);
      return latest;
    },

    async openModel(manifest) {
      const stream = await store.get(modelKey(manifest.name, manifest.version));
      if (!stream) {
        throw new NotFoundError('model_not_found', `model ${manifest.name} version ${manifest.version} has no model.onnx in the registry`);
      }
      return stream;
    },
  };
}

/** The bucket's models folder; bulk locations are refused here (kernel/s3-location.ts, config.ts). */
function modelsRoot(prefix: string): string {
  return registryModelsArea('', prefix).prefix;
}

function modelNotFound(name: string): NotFoundError {
  return new NotFoundError('model_not_found', `no model named ${name} in the registry`);
}

/** Validates the publish request and reads the model; throws InvalidInputError naming the problem. */
function buildManifest(input: PublishInput, clock: Clock): ModelManifest {
  if (!MODEL_NAME_PATTERN.test(input.name)) {
    throw new InvalidInputError('invalid_name', `model name ${JSON.stringify(input.name)} must match ${MODEL_NAME_PATTERN}`);
  }
  if (!VERSION_PATTERN.test(input.version)) {
    throw new InvalidInputError('invalid_version', `version ${JSON.stringify(input.version)} must match ${VERSION_PATTERN}`);
  }
  const meta = readOnnxMetadata(input.bytes, {
    ...(input.outputs ? { outputs: input.outputs } : {}),
    ...(input.batchAxes ? { batchAxes: input.batchAxes } : {}),
    ...(input.noBatching ? { noBatching: true } : {}),
  });
  const maxBatch = input.maxBatch ?? meta.fixedBatch ?? DEFAULT_MAX_BATCH;
  if (!Number.isInteger(maxBatch) || maxBatch < 1 || maxBatch > MAX_MAX_BATCH) {
    throw new InvalidInputError('invalid_max_batch', `maxBatch must be an integer from 1 to ${MAX_MAX_BATCH} (got ${maxBatch})`);
  }
  if (meta.fixedBatch !== undefined && maxBatch !== meta.fixedBatch) {
    const first = meta.inputs[0] as TensorSpec;
    const why =
      first.batchAxis === 'none'
        ? 'the model has no batch axis (each request runs whole, one a forward pass)'
        : `the model fixes its batch at ${meta.fixedBatch} (input "${first.name}" was exported with a first dimension of ${meta.fixedBatch})`;
    throw new InvalidInputError(
      'invalid_max_batch',
      `${why}, so it runs ${meta.fixedBatch} row a forward pass and maxBatch cannot be ${maxBatch}; leave it out, or export the model with a dynamic batch axis to batch it`,
    );
  }
  const warmupBatches = [...new Set(input.warmupBatches ?? [])].sort((a, b) => a - b);
  const bad = warmupBatches.find((b) => !Number.isInteger(b) || b < 1 || b > maxBatch);
  if (bad !== undefined) {
    throw new InvalidInputError('invalid_warmup_batches', `warm-up batch size ${bad} must be an integer from 1 to maxBatch (${maxBatch})`);
  }
  const shapes = input.warmupShapes ?? {};
  const shapeProblem = warmupShapesProblem(meta.inputs, shapes);
  if (shapeProblem) throw new InvalidInputError('invalid_warmup_shape', shapeProblem);
  const warmupShapes = normaliseWarmupShapes(meta.inputs, shapes);
  return {
    name: input.name,
    version: input.version,
    format: 'onnx',
    sha256: createHash('sha256').update(input.bytes).digest('hex'),
    sizeBytes: input.bytes.byteLength,
    inputs: meta.inputs,
    outputs: meta.outputs,
    batching: {
      maxBatch,
      warmupBatches,
      ...(Object.keys(warmupShapes).length > 0 ? { warmupShapes } : {}),
      ...(meta.fixedBatch !== undefined ? { fixedBatch: meta.fixedBatch } : {}),
    },
    ...(meta.opset !== undefined ? { opset: meta.opset } : {}),
    ...(meta.producer !== undefined ? { producer: meta.producer } : {}),
    createdAt: new Date(clock.now()).toISOString(),
    labels: { ...(input.labels ?? {}) },
  };
}

/** What differs between a stored version and a new publish of it, or null when it is the same. */
function describeConflict(existing: ModelManifest, next: ModelManifest): string | null {
  if (existing.sha256 !== next.sha256 || existing.sizeBytes !== next.sizeBytes) {
    return `different bytes (sha256 ${existing.sha256.slice(0, 12)}…, not ${next.sha256.slice(0, 12)}…)`;
  }
  if (JSON.stringify(existing.batching) !== JSON.stringify(next.batching)) return 'different batching hints';
  const axes = (m: ModelManifest) => JSON.stringify([...m.inputs, ...m.outputs].map((t) => t.batchAxis ?? 0));
  if (axes(existing) !== axes(next)) return 'different batch axes';
  if (JSON.stringify(existing.outputs) !== JSON.stringify(next.outputs)) return 'different outputs served';
  if (JSON.stringify(sortedEntries(existing.labels)) !== JSON.stringify(sortedEntries(next.labels))) return 'different labels';
  return null;
}

function sortedEntries(labels: Record<string, string> | undefined): Array<[string, string]> {
  return Object.entries(labels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** `<name>/<version>/manifest.json` relative to the models root, or null for any other key. */
function parseManifestKey(rel: string): { name: string; version: string } | null {
  const parts = rel.split('/');
  if (parts.length !== 3 || parts[2] !== 'manifest.json') return null;
  const [name = '', version = ''] = parts;
  return MODEL_NAME_PATTERN.test(name) && VERSION_PATTERN.test(version) ? { name, version } : null;
}

/** Natural order, so 2 sorts before 10. */
function sortVersions(versions: string[]): string[] {
  return [...versions].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
}

function byCreatedAt(a: ModelManifest, b: ModelManifest): number {
  return Date.parse(a.createdAt) - Date.parse(b.createdAt) || a.version.localeCompare(b.version, 'en', { numeric: true });
}

/** A stored manifest, checked enough that a worker never trusts a malformed one. */
function parseManifest(bytes: Uint8Array, key: string): ModelManifest {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(bytes).toString('utf8'));
  } catch (err) {
    throw new IntegrityError('invalid_manifest', `${key} is not valid JSON`, { cause: err });
  }
  const m = value as Partial<ModelManifest> | null;
  const ok =
    typeof m === 'object' &&
    m !== null &&
    typeof m.name === 'string' &&
    typeof m.version === 'string' &&
    typeof m.sha256 === 'string' &&
    /^[0-9a-f]{64}$/.test(m.sha256) &&
    typeof m.sizeBytes === 'number' &&
    Array.isArray(m.inputs) &&
    Array.isArray(m.outputs) &&
    typeof m.batching?.maxBatch === 'number' &&
    typeof m.createdAt === 'string';
  if (!ok) throw new IntegrityError('invalid_manifest', `${key} is not a warmpool model manifest`);
  const shapes = m.batching?.warmupShapes;
  const shapeProblem = shapes === undefined ? undefined : warmupShapesProblem(m.inputs ?? [], shapes);
  if (shapeProblem) throw new IntegrityError('invalid_manifest', `${key} has unusable warm-up shapes: ${shapeProblem}`);
  // A fixed-batch model batched past its size would fail every pass inside ONNX Runtime.
  const fixed = m.batching?.fixedBatch;
  if (fixed !== undefined && fixed !== m.batching?.maxBatch) {
    throw new IntegrityError('invalid_manifest', `${key} fixes its batch at ${fixed} but allows batches of ${m.batching?.maxBatch}`);
  }
  // A batch axis outside the tensor, or an unbatched model batched, would fail inside every pass.
  const badAxis = [...(m.inputs ?? []), ...(m.outputs ?? [])].find(
    (t) =>
      t.batchAxis !== undefined &&
      t.batchAxis !== 'none' &&
      !(Number.isInteger(t.batchAxis) && t.batchAxis >= 1 && t.batchAxis < t.shape.length),
  );
  if (badAxis)
    throw new IntegrityError('invalid_manifest', `${key} gives "${badAxis.name}" the batch axis ${JSON.stringify(badAxis.batchAxis)}`);
  if ((m.inputs ?? []).every((t) => t.batchAxis === 'none') && fixed !== 1) {
    throw new IntegrityError('invalid_manifest', `${key} has no batched input but allows batches of ${m.batching?.maxBatch}`);
  }
  return { ...(m as ModelManifest), labels: m.labels ?? {} };
}
