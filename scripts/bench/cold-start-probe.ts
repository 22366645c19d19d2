/**
 * `warmpool bench`'s cold-start section alone, repeated: a real `warmpool worker` process started
 * with an empty cache and then again with the model cached, phases from its own state log
 * (cold-start.ts), for one checkout or several side by side (`--root` each; a checkout of an
 * earlier commit gives the before of a before/after), alternating so the host's load falls on
 * all alike:
 *
 *   node --import tsx scripts/bench/cold-start-probe.ts [--model FILE.onnx --input-shape 3,48,192]
 *     [--runs 7] [--root .] [--root ../before]
 *
 * Without --model it starts the PaddleOCR-class CNN fixture at 3×48×192. Each --root must hold
 * a built dist/ (`npm run build`); node flags for the worker (e.g. `--cpu-prof`) go in
 * PROBE_NODE_FLAGS. Prints each phase's median and spread per root, and `total` (spawn → active).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { type Closer, closeAll } from '../../infra/kernel/lifecycle.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { buildDist, staleReason } from '../build.mjs';
import { stopChild } from '../dev/stop-child.ts';
import { buildOcrClassifierModel } from '../fixtures/onnx-models.ts';
import { publishBenchModel, userModel } from './bench-models.ts';
import { phasesFrom, type StateMark, stateMarkOf } from './cold-start.ts';
import { scopedEnv, startBenchContext, waitForWorkers } from './services.ts';

const { values } = parseArgs({
  options: {
    model: { type: 'string' },
    'input-shape': { type: 'string' },
    runs: { type: 'string', default: '7' },
    root: { type: 'string', multiple: true },
  },
});
const roots = values.root ?? ['.'];
const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-cold-start-probe-'));
const closers: Closer[] = [];
const samples = new Map<string, number[]>();

try {
  if (staleReason()) await buildDist();
  const ctx = await startBenchContext(dir, false, () => {}, closers);
  const fixture = path.join(dir, 'ocr-classifier.onnx');
  if (!values.model) writeFileSync(fixture, buildOcrClassifierModel());
  const model = userModel(values.model ?? fixture, values.model ? values['input-shape'] : '3,48,192');
  const manifest = await publishBenchModel(ctx.registry, model);
  for (let run = 0; run < Number(values.runs); run++) {
    for (const root of run % 2 === 0 ? roots : [...roots].reverse()) {
      const cacheDir = path.join(dir, `cache-${run}-${roots.indexOf(root)}`);
      mkdirSync(cacheDir, { recursive: true });
      for (const cache of ['cold', 'warm']) {
        const { env, config } = scopedEnv(ctx, `probe-${run}-${cache}`, { MODEL_CACHE_DIR: cacheDir, LOG_LEVEL: 'info' });
        const redis = createRedis(config.redisUrl);
        const marks: StateMark[] = [];
        const flags = (process.env.PROBE_NODE_FLAGS ?? '').split(' ').filter(Boolean);
        const args = [...flags, path.join(root, 'bin/warmpool.mjs'), 'worker', '--model', manifest.name, '--version', manifest.version];
        const spawnedAt = Date.now();
        const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'ignore'] });
        createInterface({ input: child.stdout }).on('line', (line) => {
          const mark = stateMarkOf(line);
          if (mark) marks.push(mark);
        });
        try {
          await waitForWorkers(redis, config, manifest.name, 'active');
          // The log line of `active` is written just before its heartbeat; give stdout a moment.
          for (let i = 0; i < 50 && !marks.some((m) => m.state === 'active'); i++) await new Promise((r) => setTimeout(r, 20));
        } finally {
          await stopChild(child, { graceMs: 10_000 });
          await closeRedis(redis);
        }
        const active = marks.find((m) => m.state === 'active')?.at ?? Number.NaN;
        for (const [phase, ms] of Object.entries({ ...phasesFrom(spawnedAt, marks), total: active - spawnedAt })) {
          const key = `${root} ${cache} ${phase}`;
          samples.set(key, [...(samples.get(key) ?? []), ms]);
        }
      }
    }
  }
  for (const [key, ms] of samples) {
    const sorted = [...ms].sort((a, b) => a - b);
    const at = (q: number) => sorted[Math.round(q * (sorted.length - 1))]?.toFixed(0);
    process.stdout.write(`${key.padEnd(40)} p50 ${at(0.5)} ms  (min ${at(0)}, max ${at(1)}, n ${sorted.length})\n`);
  }
} finally {
  await closeAll([...closers].reverse());
  rmSync(dir, { recursive: true, force: true });
}
