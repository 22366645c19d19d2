/**
 * Warm-up from an empty profile, bounded (the worker's WARMUP_BUDGET_MS) against the unbounded
 * plan (every size 1 + WARMUP_ITERATIONS passes, as before the bound), in one process on the real
 * thread engine, alternating so drift in the host's load falls on both:
 *
 *   node --import tsx scripts/bench/warmup-probe.ts [--model FILE.onnx --input-shape 3,48,192]
 *     [--runs 5] [--iterations 5] [--budget-ms 1500] [--write FILE.onnx]
 *
 * Without --model it probes the PaddleOCR-class CNN fixture (buildOcrClassifierModel) at
 * 3×48×192; --write writes that model for `warmpool bench --model`. Sizes are the bench's
 * (BENCH_BATCHES), thread counts the worker's ([1, cores]). Per run it prints where the time
 * went (size × timed passes at p50, skipped sizes and why), then medians and ratios.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { readOnnxMetadata } from '../../infra/registry/onnx-metadata.ts';
import type { BatchProfile } from '../../worker/batch-profile.ts';
import { createThreadEngine } from '../../worker/engine/thread-engine.ts';
import { runWarmup, type WarmupOptions, type WarmupProgress } from '../../worker/warmup.ts';
import { WARMUP_MAX_RSE } from '../../worker/warmup-bound.ts';
import { buildOcrClassifierModel } from '../fixtures/onnx-models.ts';
import { BENCH_BATCHES, BENCH_MAX_BATCH, userModel } from './bench-models.ts';

const { values } = parseArgs({
  options: {
    model: { type: 'string' },
    'input-shape': { type: 'string' },
    runs: { type: 'string', default: '5' },
    iterations: { type: 'string', default: String(loadConfig().worker.warmupIterations) },
    'budget-ms': { type: 'string', default: String(loadConfig().worker.warmupBudgetMs) },
    write: { type: 'string' },
  },
});

const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-warmup-probe-'));
const modelPath = path.join(dir, 'model.onnx');
const bytes = values.model ? userModel(values.model, values['input-shape']).bytes : buildOcrClassifierModel();
writeFileSync(modelPath, bytes);
if (values.write) writeFileSync(values.write, buildOcrClassifierModel());
const meta = readOnnxMetadata(bytes);
const fixtureShape = values.model ? {} : { warmupShapes: { x: [3, 48, 192] } };
const manifest: ModelManifest = {
  ...{ name: 'probe', version: '1', format: 'onnx', sha256: '0'.repeat(64), sizeBytes: bytes.length, labels: {} },
  inputs: meta.inputs,
  outputs: meta.outputs,
  batching: { maxBatch: BENCH_MAX_BATCH, warmupBatches: [...BENCH_BATCHES], ...fixtureShape },
  createdAt: new Date(0).toISOString(),
};
const threadCandidates = [...new Set([1, os.availableParallelism()])];
const engine = createThreadEngine();
const totals: Record<'bounded' | 'unbounded', number[]> = { bounded: [], unbounded: [] };
const chosen: Record<'bounded' | 'unbounded', number[]> = { bounded: [], unbounded: [] };

try {
  for (let run = 0; run < Number(values.runs); run++) {
    const order: Array<'bounded' | 'unbounded'> = run % 2 === 0 ? ['bounded', 'unbounded'] : ['unbounded', 'bounded'];
    for (const mode of order) {
      // As the worker does: the session of the first thread count exists before warm-up starts.
      await engine.load(modelPath, { executionProviders: ['cpu'], intraOpThreads: threadCandidates[0] ?? 1 });
      const events: WarmupProgress[] = [];
      const options: WarmupOptions = {
        engine,
        modelPath,
        manifest,
        executionProviders: ['cpu'],
        threadCandidates,
        iterations: Number(values.iterations),
        latencyBudgetMs: 250,
        profileFile: null,
        loadedThreads: threadCandidates[0] ?? 1,
        ...(mode === 'bounded' ? { bound: { budgetMs: Number(values['budget-ms']), maxRse: WARMUP_MAX_RSE } } : {}),
        onProgress: (e) => events.push(e),
      };
      const started = performance.now();
      const profile = await runWarmup(options);
      const ms = performance.now() - started;
      totals[mode].push(ms);
      chosen[mode].push(profile.rowsPerS);
      process.stdout.write(`${mode.padEnd(9)} ${ms.toFixed(0).padStart(5)} ms  ${describe(events, profile)}\n`);
    }
  }
  for (const mode of ['bounded', 'unbounded'] as const) {
    const sorted = [...totals[mode]].sort((a, b) => a - b);
    process.stdout.write(
      `${mode}: warm-up p50 ${med(sorted).toFixed(0)} ms, max ${sorted.at(-1)?.toFixed(0)} ms; chosen rows/s p50 ${med(chosen[mode]).toFixed(0)}\n`,
    );
  }
  const ratio = med(totals.bounded) / med(totals.unbounded);
  const rate = med(chosen.bounded) / med(chosen.unbounded);
  process.stdout.write(`bounded / unbounded: time ${ratio.toFixed(2)}, chosen rows/s ${rate.toFixed(2)}\n`);
} finally {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
}

function med(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)] ?? Number.NaN;
}

/** `t1: 1×3@2.1 8×3@12.5 …, 128 skipped (budget) | t2: …  → t2 b128 968 rows/s`. */
function describe(events: WarmupProgress[], profile: BatchProfile): string {
  const parts = new Map<number, string[]>();
  for (const e of events) {
    if (e.type === 'measured')
      parts.set(e.threads, [...(parts.get(e.threads) ?? []), `${e.entry.batch}×${e.entry.samples}@${e.entry.p50Ms.toFixed(1)}`]);
    if (e.type === 'skipped') parts.set(e.threads, [...(parts.get(e.threads) ?? []), `${e.batch}: ${e.reason}`]);
  }
  const cells = [...parts].map(([t, p]) => `t${t}: ${p.join(' ')}`).join(' | ');
  return `${cells}  → t${profile.threads} b${profile.chosenBatch} ${profile.rowsPerS.toFixed(0)} rows/s`;
}
