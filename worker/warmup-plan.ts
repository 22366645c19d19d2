/**
 * Becoming a model's worker once its weights are in the disk cache: the warm-up's settings from
 * config, the first session (the thread count a kept profile chose, else the first one warm-up
 * measures, so warm-up starts on this session instead of creating another: a session create is
 * seconds on a large model), then warm-up itself (worker/warmup.ts), which reuses the profile kept
 * beside the cached model. The single-model worker (worker-process.ts) and a shared pool's
 * resident models (resident-model.ts) both take these steps.
 */
import os from 'node:os';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import type { Config } from '../infra/kernel/config.ts';
import type { BatchProfile } from './batch-profile.ts';
import type { EngineInfo, InferenceEngine } from './engine/engine.ts';
import { firstThreads, runWarmup, type WarmupOptions } from './warmup.ts';
import { WARMUP_MAX_RSE } from './warmup-bound.ts';

/** INTRA_OP_THREADS when set; else 1 and every core, which warm-up measures and chooses between. */
export function threadCandidates(config: Config['worker']): number[] {
  return config.intraOpThreads > 0 ? [config.intraOpThreads] : [...new Set([1, os.availableParallelism()])];
}

/** Warm-up's settings for `manifest` at `modelPath` on `engine`, from the worker's config. */
export function warmupPlan(
  config: Config['worker'],
  engine: InferenceEngine,
  manifest: ModelManifest,
  modelPath: string,
  candidates: number[] = threadCandidates(config),
): WarmupOptions {
  return {
    engine,
    modelPath,
    manifest,
    executionProviders: config.executionProviders,
    threadCandidates: candidates,
    batchSizes: manifest.batching.warmupBatches.length > 0 ? manifest.batching.warmupBatches : undefined,
    iterations: config.warmupIterations,
    latencyBudgetMs: config.warmupLatencyBudgetMs,
    ...(config.warmupBudgetMs > 0 ? { bound: { budgetMs: config.warmupBudgetMs, maxRse: WARMUP_MAX_RSE } } : {}),
  };
}

/** The first session of a warm-up: loaded at the count warm-up starts on (see the header). */
export async function loadFirst(plan: WarmupOptions): Promise<{ intraOpThreads: number; info: EngineInfo }> {
  const intraOpThreads = await firstThreads(plan);
  const info = await plan.engine.load(plan.modelPath, { executionProviders: plan.executionProviders, intraOpThreads });
  return { intraOpThreads, info };
}

/** Warm-up on the session loadFirst opened. */
export function warmUp(plan: WarmupOptions, loadedThreads: number, onProgress?: WarmupOptions['onProgress']): Promise<BatchProfile> {
  return runWarmup({ ...plan, loadedThreads, ...(onProgress ? { onProgress } : {}) });
}

/** The profile as the warm-up log shows it: the sizes measured per thread count, and whether a kept one was reused. */
export function summariseProfile(p: BatchProfile) {
  // A bounded warm-up leaves out the sizes it could not pay for.
  const measured = p.candidates.map((c) => `${c.threads}: ${c.entries.map((e) => e.batch).join('/')}`);
  return { threads: p.threads, chosenBatch: p.chosenBatch, rowsPerS: Math.round(p.rowsPerS), measured, reused: p.reused ?? false };
}
