/**
 * Issue 31's live line, on real processes: 40 small models with distinct weights in one shared
 * pool of at most 3 workers (1 standby), Zipf traffic over all of them (`npm test`: 12 s;
 * `npm run test:full`: a minute). Wired as `warmpool dev` wires it: the scaler with its pool
 * controller, the local provider forking `warmpool worker --pool` processes, the API, real Redis,
 * S3 and ONNX Runtime.
 *
 * It shows: every answer equals ONNX Runtime's for its model; the pool never has more than 3
 * workers (sampled from the heartbeats and the provider's list all along); the workers hold many
 * models each; every model is served although none was held when its first job came. How long
 * a first job took (created → finished, the job's own timestamps) is printed as a figure, never
 * asserted: no test here depends on time.
 */

import { afterAll, beforeAll, expect, it } from 'vitest';
import { seededRandom } from '../infra/kernel/seeded-random.ts';
import { buildDistinctMlpModels } from '../scripts/fixtures/onnx-models.ts';
import { type PoolStack, startPoolStack } from './support/pool-stack.ts';
import { KEY_A, waitForJob } from './support/stack.ts';
import { sized } from './support/test-scale.ts';
import { until } from './support/until.ts';

const F = 8;
const POOL = 'zipf';
const MODEL_COUNT = 40;
const MAX_WORKERS = 3;
const TRAFFIC_MS = sized(12_000, 60_000);
/** Submissions per second, open loop: paced by due time. */
const RATE = 20;
const names = Array.from({ length: MODEL_COUNT }, (_, i) => `zipf-${i}`);
let pool: PoolStack;

beforeAll(async () => {
  const models = buildDistinctMlpModels(MODEL_COUNT, { features: F, hidden: 16, firstSeed: 4100 });
  pool = await startPoolStack({
    pool: POOL,
    config: { max: MAX_WORKERS, min: 1, standby: 1, memoryMb: 256 },
    models: models.map((bytes, i) => ({ name: names[i] as string, bytes })),
    env: { SCALER_TICK_MS: '500', HEARTBEAT_INTERVAL_MS: '300', HEARTBEAT_TTL_MS: '3000', WARMUP_ITERATIONS: '1', INTRA_OP_THREADS: '1' },
  });
}, 180_000);

afterAll(async () => {
  await pool?.close();
});

const row = (i: number) => Array.from({ length: F }, (_, k) => Math.cos(i * 0.37 + k));

/** Model indices drawn with probability ∝ 1/(k+1): most traffic on a few, a long tail called rarely. */
function zipfDraws(count: number, seed: number): number[] {
  const weights = names.map((_, k) => 1 / (k + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  const random = seededRandom(seed);
  return Array.from({ length: count }, () => {
    let u = random() * total;
    for (const [k, w] of weights.entries()) {
      u -= w;
      if (u <= 0) return k;
    }
    return weights.length - 1;
  });
}

async function submit(model: string, i: number): Promise<string> {
  const res = await pool.stack.call(`/v1/models/${model}/jobs`, {
    method: 'POST',
    key: KEY_A,
    body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: row(i) }], cache: false }),
  });
  if (res.status !== 202) throw new Error(`submit to ${model} answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

it(
  'Zipf traffic over 40 models on at most 3 workers: every answer is its own model’s, workers hold many models each',
  async () => {
    await until('a standby pool worker', async () => (await pool.beats()).find((b) => b.state === 'standby'), 120_000);

    // Every model gets at least one job: the tail's first jobs come late in the run, when the
    // pool holds the head, as a rarely called model's would.
    const total = Math.round((TRAFFIC_MS / 1000) * RATE);
    const draws = zipfDraws(total, 31);
    for (const [k] of names.entries()) if (!draws.includes(k)) draws[total - 1 - k] = k;

    let maxWorkers = 0;
    let mostHeld = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const beats = await pool.beats();
        const listed = await pool.provider.list({ pool: POOL });
        maxWorkers = Math.max(maxWorkers, beats.length, listed.length);
        for (const b of beats) mostHeld = Math.max(mostHeld, (b.models ?? []).filter((m) => m.state === 'active').length);
        await new Promise((r) => setTimeout(r, 200));
      }
    })();

    const started = Date.now();
    const submitted: Array<{ id: string; model: string; i: number }> = [];
    const inFlight: Promise<void>[] = [];
    for (const [i, k] of draws.entries()) {
      const due = started + (i * 1000) / RATE;
      const wait = due - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const model = names[k] as string;
      inFlight.push(submit(model, i).then((id) => void submitted.push({ id, model, i })));
    }
    await Promise.all(inFlight);

    const jobs = await Promise.all(submitted.map(async (s) => ({ ...s, job: await waitForJob(pool.stack, s.id, 180_000) })));
    sampling = false;
    await sampler;

    const firstMs = new Map<string, number>();
    for (const { model, i, job } of jobs) {
      expect(job.status, `${model} job ${i}`).toBe('succeeded');
      const score = (job.outputs as Array<{ name: string; data: number[] }>).find((o) => o.name === 'score')?.data[0];
      expect(score, `${model} job ${i}`).toBeCloseTo(await pool.expectedScore(model, row(i)), 5);
      const took = Date.parse(String(job.finishedAt)) - Date.parse(String(job.createdAt));
      if (!firstMs.has(model)) firstMs.set(model, took);
    }
    expect(new Set(jobs.map((j) => j.model)).size).toBe(MODEL_COUNT);
    expect(maxWorkers).toBeGreaterThan(0);
    expect(maxWorkers).toBeLessThanOrEqual(MAX_WORKERS);
    // 40 models on at most 3 workers, all served: at least one worker held a third of them at once.
    expect(mostHeld).toBeGreaterThanOrEqual(Math.ceil(MODEL_COUNT / MAX_WORKERS / 2));

    const firsts = [...firstMs.values()].sort((a, b) => a - b);
    const at = (q: number) => firsts[Math.min(firsts.length - 1, Math.floor(q * firsts.length))];
    const beats = await pool.beats();
    process.stdout.write(
      `[figures] jobs=${jobs.length} models=${MODEL_COUNT} maxWorkers=${maxWorkers} mostHeldAtOnce=${mostHeld} ` +
        `heldNow=${beats.map((b) => (b.models ?? []).length).join('/')} firstJobMs p50=${at(0.5)} p90=${at(0.9)} max=${firsts.at(-1)}\n`,
    );
  },
  sized(300_000, 600_000),
);
