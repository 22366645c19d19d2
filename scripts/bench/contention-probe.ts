/**
 * Warm-up's thread comparison beside other work, live (worker/host-cpu.ts, issue 34): one bounded
 * warm-up of the OCR-class CNN from an empty profile while `--hogs` busy loops run beside it, then
 * a start on the quiet host, then one more, each on the real thread engine with the kept profile
 * beside the model, as the worker runs them (worker/warmup-plan.ts):
 *
 *   node --import tsx scripts/bench/contention-probe.ts [--hogs 1]
 *
 * Prints each start's events (contended, remeasure, reused), the thread count chosen and the
 * cores the rest of the host took per thread count.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { readOnnxMetadata } from '../../infra/registry/onnx-metadata.ts';
import { createThreadEngine } from '../../worker/engine/thread-engine.ts';
import type { WarmupProgress } from '../../worker/warmup.ts';
import { loadFirst, warmUp, warmupPlan } from '../../worker/warmup-plan.ts';
import { buildOcrClassifierModel } from '../fixtures/onnx-models.ts';
import { BENCH_BATCHES, BENCH_MAX_BATCH } from './bench-models.ts';

const { values } = parseArgs({ options: { hogs: { type: 'string', default: '1' } } });
const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-contention-probe-'));
const bytes = buildOcrClassifierModel();
const sha = 'cd'.repeat(32);
const modelPath = path.join(dir, `${sha}.onnx`);
writeFileSync(modelPath, bytes);
const meta = readOnnxMetadata(bytes);
const manifest: ModelManifest = {
  ...{ name: 'probe', version: '1', format: 'onnx', sha256: sha, sizeBytes: bytes.length, labels: {} },
  inputs: meta.inputs,
  outputs: meta.outputs,
  batching: { maxBatch: BENCH_MAX_BATCH, warmupBatches: [...BENCH_BATCHES], warmupShapes: { x: [3, 48, 192] } },
  createdAt: new Date(0).toISOString(),
};
const config = { ...loadConfig().worker, intraOpThreads: 0 };
const engine = createThreadEngine();

async function start(label: string): Promise<void> {
  const plan = warmupPlan(config, engine, manifest, modelPath);
  const { intraOpThreads } = await loadFirst(plan);
  const events: WarmupProgress[] = [];
  const profile = await warmUp(plan, intraOpThreads, (e) => events.push(e));
  const said = events.filter((e) => e.type === 'contended' || e.type === 'remeasure' || e.type === 'reused').map((e) => e.type);
  const others = profile.candidates.map((c) => `${c.threads}: ${c.othersCores ?? '?'}`).join(', ');
  console.log(
    `${label}: ${said.join(', ') || 'measured'}; chose ${profile.threads} thread(s), batch ${profile.chosenBatch}; others' cores by thread count ${others}`,
  );
}

try {
  const hogs = Array.from({ length: Number(values.hogs) }, () => spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
  await new Promise((r) => setTimeout(r, 300));
  try {
    await start(`beside ${hogs.length} busy loop(s)`);
  } finally {
    for (const h of hogs) h.kill('SIGKILL');
  }
  await new Promise((r) => setTimeout(r, 500));
  await start('quiet, next start');
  await start('quiet, the start after');
} finally {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
}
