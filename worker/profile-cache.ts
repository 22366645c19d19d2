/**
 * The batch profile kept beside the cached model (`<dir>/<sha256>.onnx` →
 * `<dir>/<sha256>.profile.json`), so a warm-cache restart of the same model on the same host
 * skips the warm-up's measurements (worker/warmup.ts), which on a model like mlp-1024 are most
 * of a warm start.
 *
 * A kept profile is used only where it was measured under the same conditions, which its key
 * lists: the model's sha256, the execution providers, the thread counts and batch sizes tried,
 * the timed runs per cell, a bounded warm-up's budget and precision, the warm-up shape of a model with dynamic dimensions (the manifest's
 * hints, or the sizes tried), the host's CPU count and model, and the ONNX Runtime version. Any
 * other difference (a new release, another instance type under the same cache volume, another
 * WARMUP_BATCHES) measures again and replaces the file. The latency budget is not in the key:
 * the choice is made again from the kept measurements, so a changed budget applies at once.
 *
 * The file is written atomically (temp file, rename) and best-effort: a read-only cache still
 * serves, it just measures every start. A file that does not parse, or does not hold what a
 * profile holds, is ignored and rewritten.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';

/** What a kept profile must have been measured under to be used again. */
export interface ProfileKey {
  sha256: string;
  executionProviders: string[];
  threadCandidates: number[];
  batchSizes: number[];
  iterations: number;
  /** Only for a bounded warm-up (WARMUP_BUDGET_MS): its budget and precision, which decide what it measured. */
  bound?: { budgetMs: number; maxRse: number };
  /**
   * Only for a model with dynamic non-batch dimensions, so a fixed model's key is what it always
   * was: its inputs' non-batch dimensions as warm-up plans them (fixed, from the manifest's
   * warm-up shape, or -1 where it tries sizes), and the sizes it tries.
   */
  inputShapes?: Record<string, number[]>;
  shapeCandidates?: number[];
  cpus: number;
  cpuModel: string;
  engine: string;
}

interface ProfileFile<P> {
  version: typeof FILE_VERSION;
  key: ProfileKey;
  profile: P;
}

const FILE_VERSION = 1;

/** `<dir>/<sha256>.onnx` → `<dir>/<sha256>.profile.json`; any other name gets `.profile.json` appended. */
export function profileFileFor(modelPath: string): string {
  return modelPath.endsWith('.onnx') ? `${modelPath.slice(0, -'.onnx'.length)}.profile.json` : `${modelPath}.profile.json`;
}

/** The key for this host and engine; the rest comes from the warm-up's own settings. */
export function profileKey(k: Omit<ProfileKey, 'cpus' | 'cpuModel' | 'engine'>): ProfileKey {
  return { ...k, cpus: os.availableParallelism(), cpuModel: os.cpus()[0]?.model ?? 'unknown', engine: engineVersion() };
}

/**
 * The kept profile when its key is `key`'s and `isProfile` accepts it; undefined when there is
 * none, it differs, or it does not read. (The profile's shape is warm-up's to check.)
 */
export async function readKeptProfile<P>(file: string, key: ProfileKey, isProfile: (x: unknown) => x is P): Promise<P | undefined> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await fs.readFile(file, 'utf8'));
  } catch {
    return undefined;
  }
  const kept = parsed as Partial<ProfileFile<unknown>> | null;
  if (!kept || typeof kept !== 'object' || kept.version !== FILE_VERSION || JSON.stringify(kept.key) !== JSON.stringify(key))
    return undefined;
  return isProfile(kept.profile) ? kept.profile : undefined;
}

/** Keeps `profile` under `key`; never throws (a cache that cannot be written only costs time). */
export async function keepProfile<P>(file: string, key: ProfileKey, profile: P): Promise<boolean> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const body: ProfileFile<P> = { version: FILE_VERSION, key, profile };
  try {
    await fs.writeFile(tmp, JSON.stringify(body), { flag: 'wx' });
    await fs.rename(tmp, file);
    return true;
  } catch {
    await fs.rm(tmp, { force: true }).catch(() => undefined);
    return false;
  }
}

let engineVersionMemo: string | undefined;

/** `onnxruntime-node@1.30.0`: a new ONNX Runtime may choose differently. */
function engineVersion(): string {
  if (engineVersionMemo === undefined) {
    try {
      const pkg = createRequire(import.meta.url)('onnxruntime-node/package.json') as { version?: string };
      engineVersionMemo = `onnxruntime-node@${pkg.version ?? 'unknown'}`;
    } catch {
      engineVersionMemo = 'onnxruntime-node@unknown';
    }
  }
  return engineVersionMemo;
}
