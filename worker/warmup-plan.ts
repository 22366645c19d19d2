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
import type { Log } from '../infra/kernel/log.ts';
import type { BatchProfile } from './batch-profile.ts';
import type { EngineInfo, InferenceEngine } from './engine/engine.ts';
import { procStatMeter } from './host-cpu.ts';
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
    // A thread count measured beside another process's load is measured again once the host is quiet.
    hostCpu: procStatMeter(),
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

/** A warm-up listener that logs when the thread comparison ran beside other work, and when a kept one is measured again. */
export function logContention(log: Pick<Log, 'info' | 'warn'>): NonNullable<WarmupOptions['onProgress']> {
  return (e) => {
    if (e.type === 'contended')
      log.warn(
        { threads: e.threads, othersCores: e.othersCores },
        'warm-up compared thread counts beside other work: a start that finds the host quiet measures again',
      );
    else if (e.type === 'remeasure')
      log.info(
        { othersCoresNow: e.othersCoresNow },
        'the kept profile was measured beside other work and the host is quiet: measuring again',
      );
  };
}

/** The profile as the warm-up log shows it: the sizes measured per thread count, and whether a kept one was reused. */
export function summariseProfile(p: BatchProfile) {
  // A bounded warm-up leaves out the sizes it could not pay for.
  // With the cores the rest of the host took meanwhile, where warm-up could tell (worker/host-cpu.ts).
  const measured = p.candidates.map(
    (c) =>
      `${c.threads}: ${c.entries.map((e) => e.batch).join('/')}${c.othersCores !== undefined ? ` (others ${c.othersCores} cores)` : ''}`,
  );
  return { threads: p.threads, chosenBatch: p.chosenBatch, rowsPerS: Math.round(p.rowsPerS), measured, reused: p.reused ?? false };
}
