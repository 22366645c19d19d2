/**
 * The worker's content-addressed model cache (DESIGN §3): `<dir>/<sha256>.onnx`.
 *
 * A file at its final path has been verified against its manifest's sha256 and size: downloads
 * land in a temp file in the same directory, are hashed while they stream, fsynced, and only
 * then renamed into place (rename within a directory is atomic). A mismatch deletes the temp
 * file and throws IntegrityError, so a corrupted or truncated object is never served.
 *
 * A cached file is re-verified on every hit by default: a half-written disk or a hand-edited
 * cache must not be loaded, and hashing is cheap next to building an inference session. A
 * cached file that no longer verifies is deleted and downloaded again.
 *
 * A verified file is still refused if it names ONNX external data (issue 20): ONNX Runtime would
 * open that file relative to this folder, where every other model's weights lie. The registry
 * refuses such models at publish; this is the check for one published before that, or written
 * into the bucket by hand. The model is read once more for it (a buffer of its size, dropped
 * before ONNX Runtime loads it). Loading from that buffer instead of the path would not do:
 * ONNX Runtime then resolves external paths against the working directory.
 *
 * The check decodes the whole model (220–340 ms for 8 MB on a 2-core host, more than the rest
 * of a warm start), and its answer for a given sha256 never changes: a passed check leaves
 * `<sha256>.checked.json` beside the model, and a hit whose hash was verified trusts it. A hit
 * checked by size only does not (the bytes might not be the ones checked), nor does a mark from
 * another version of the check.
 *
 * Also beside each model: its batch profile, `<sha256>.profile.json` (worker/profile-cache.ts).
 * The folder, then, is the worker's alone to write, like the models themselves.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { type Clock, systemClock } from '../infra/kernel/clock.ts';
import { IntegrityError } from '../infra/kernel/errors.ts';
import type { Log } from '../infra/kernel/log.ts';
import type { ModelRegistry } from '../infra/registry/model-registry.ts';
import { describeExternal, findExternalData } from '../infra/registry/onnx-metadata.ts';

export interface ModelCacheOptions {
  dir: string;
  registry: Pick<ModelRegistry, 'openModel'>;
  log?: Log;
  /** Re-hash a cached file on every hit (default true); false checks its size only. */
  verifyOnHit?: boolean;
  clock?: Clock;
}

export type CachedModel = Pick<ModelManifest, 'name' | 'version' | 'sha256' | 'sizeBytes'>;

export interface EnsureResult {
  /** Absolute path of the verified `<sha256>.onnx`. */
  path: string;
  /** True when the file was already in the cache. */
  hit: boolean;
  /** Time spent downloading; 0 on a hit. */
  downloadMs: number;
}

export interface ModelCache {
  ensure(manifest: CachedModel): Promise<EnsureResult>;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

export function createModelCache(options: ModelCacheOptions): ModelCache {
  const dir = path.resolve(options.dir);
  const clock = options.clock ?? systemClock;
  const verifyOnHit = options.verifyOnHit ?? true;
  // One in-flight ensure per sha256: concurrent callers share the download and its outcome.
  const inFlight = new Map<string, Promise<EnsureResult>>();

  async function ensureOnce(manifest: CachedModel): Promise<EnsureResult> {
    const finalPath = path.join(dir, `${manifest.sha256}.onnx`);
    if (await cachedFileVerifies(finalPath, manifest, verifyOnHit, options.log)) {
      await refuseExternalData(finalPath, manifest, verifyOnHit);
      return { path: finalPath, hit: true, downloadMs: 0 };
    }
    const started = clock.now();
    await download(options.registry, manifest, dir, finalPath);
    const downloadMs = Math.max(0, clock.now() - started);
    options.log?.info({ model: manifest.name, version: manifest.version, sha256: manifest.sha256, downloadMs }, 'model downloaded');
    await refuseExternalData(finalPath, manifest, false);
    return { path: finalPath, hit: false, downloadMs };
  }

  return {
    ensure(manifest) {
      if (!SHA256_HEX.test(manifest.sha256)) {
        // It names a file on disk: refuse anything that is not a plain digest.
        return Promise.reject(
          new IntegrityError('invalid_manifest', `manifest sha256 ${JSON.stringify(manifest.sha256)} is not a hex SHA-256 digest`),
        );
      }
      const pending = inFlight.get(manifest.sha256);
      if (pending) return pending;
      const run = ensureOnce(manifest).finally(() => inFlight.delete(manifest.sha256));
      inFlight.set(manifest.sha256, run);
      return run;
    },
  };
}

/** True when the cached file exists and matches; a file that does not match is removed. */
async function cachedFileVerifies(file: string, manifest: CachedModel, fullCheck: boolean, log?: Log): Promise<boolean> {
  const stat = await fs.stat(file).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return null;
    throw err;
  });
  if (!stat) return false;
  const sizeOk = stat.size === manifest.sizeBytes;
  const sha256 = sizeOk && fullCheck ? await hashFile(file) : manifest.sha256;
  if (sizeOk && sha256 === manifest.sha256) return true;
  log?.warn(
    {
      file,
      expectedSize: manifest.sizeBytes,
      actualSize: stat.size,
      expectedSha256: manifest.sha256,
      actualSha256: sizeOk ? sha256 : undefined,
    },
    'cached model does not match its manifest; downloading it again',
  );
  await fs.rm(file, { force: true });
  return false;
}

/** What a passed external-data check leaves beside the model; another version is not trusted. */
const CHECKED_MARK = { check: 'external-data', version: 1, externalData: false } as const;

/** `<dir>/<sha256>.onnx` → `<dir>/<sha256>.checked.json`. */
export function checkedMarkFor(modelPath: string): string {
  return `${modelPath.replace(/\.onnx$/, '')}.checked.json`;
}

/**
 * Removes and refuses a model that keeps tensors in other files (a decision: never retried).
 * `trustMark`: the bytes were just verified against the manifest's sha256, so a mark left by an
 * earlier check of that sha256 answers for them.
 */
async function refuseExternalData(file: string, manifest: CachedModel, trustMark: boolean): Promise<void> {
  const mark = checkedMarkFor(file);
  if (trustMark && (await isCheckedMark(mark))) return;
  const found = findExternalData(await fs.readFile(file));
  if (found.length === 0) {
    await writeCheckedMark(mark);
    return;
  }
  await fs.rm(file, { force: true });
  await fs.rm(mark, { force: true });
  throw new IntegrityError(
    'external_data',
    `model ${manifest.name} version ${manifest.version} is not served: ${describeExternal(found)}, which ONNX Runtime would read ` +
      'from beside the model in the shared cache; publish it again with its weights inside it',
  );
}

async function isCheckedMark(mark: string): Promise<boolean> {
  try {
    return JSON.stringify(JSON.parse(await fs.readFile(mark, 'utf8'))) === JSON.stringify(CHECKED_MARK);
  } catch {
    return false;
  }
}

/** Best-effort and atomic: without the mark the next hit only checks again. */
async function writeCheckedMark(mark: string): Promise<void> {
  const tmp = path.join(path.dirname(mark), `.${path.basename(mark)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    await fs.writeFile(tmp, JSON.stringify(CHECKED_MARK), { flag: 'wx' });
    await fs.rename(tmp, mark);
  } catch {
    await fs.rm(tmp, { force: true }).catch(() => undefined);
  }
}

async function hashFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(file)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Streams the model into a temp file while hashing, verifies, fsyncs and renames into place. */
async function download(registry: Pick<ModelRegistry, 'openModel'>, manifest: CachedModel, dir: string, finalPath: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  const tmpPath = path.join(dir, `.${manifest.sha256}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const file = await fs.open(tmpPath, 'wx');
  try {
    const actual = await writeHashed(registry, manifest, file);
    verify(manifest, actual);
    await file.sync();
    await file.close();
    await fs.rename(tmpPath, finalPath);
    await syncDir(dir);
  } catch (err) {
    await file.close().catch(() => undefined); // already closed on the success path up to rename
    await fs.rm(tmpPath, { force: true });
    throw err;
  }
}

async function writeHashed(
  registry: Pick<ModelRegistry, 'openModel'>,
  manifest: CachedModel,
  file: fs.FileHandle,
): Promise<{ sha256: string; sizeBytes: number }> {
  const stream = await registry.openModel(manifest);
  const hash = createHash('sha256');
  let sizeBytes = 0;
  try {
    for await (const chunk of stream) {
      const buf = chunk as Buffer;
      sizeBytes += buf.length;
      // An object longer than its manifest cannot match: stop instead of filling the disk.
      if (sizeBytes > manifest.sizeBytes) break;
      hash.update(buf);
      await file.write(buf);
    }
  } finally {
    stream.destroy();
  }
  return { sha256: sizeBytes > manifest.sizeBytes ? '(not computed: object is too long)' : hash.digest('hex'), sizeBytes };
}

function verify(manifest: CachedModel, actual: { sha256: string; sizeBytes: number }): void {
  if (actual.sizeBytes === manifest.sizeBytes && actual.sha256 === manifest.sha256) return;
  const sizePart = actual.sizeBytes > manifest.sizeBytes ? `more than ${manifest.sizeBytes} bytes` : `${actual.sizeBytes} bytes`;
  throw new IntegrityError(
    'checksum_mismatch',
    `model ${manifest.name} version ${manifest.version} failed verification: expected sha256 ${manifest.sha256} and ${manifest.sizeBytes} bytes, ` +
      `got sha256 ${actual.sha256} and ${sizePart}`,
  );
}

/** Makes the rename durable; some platforms cannot open a directory, which is fine to skip. */
async function syncDir(dir: string): Promise<void> {
  const handle = await fs.open(dir, 'r').catch(() => null);
  if (!handle) return;
  try {
    await handle.sync().catch(() => undefined);
  } finally {
    await handle.close();
  }
}
