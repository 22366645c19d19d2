/**
 * A shared pool loses a worker mid-traffic, on real processes as `warmpool dev` wires them (the
 * scaler's pool controller, the local provider's `warmpool worker --pool` processes, the API, real
 * Redis/S3 and ONNX Runtime): the worker holding the most models (at least 15 of the 30) is
 * SIGKILLed while jobs for all of them keep coming. Nothing accepted is lost (BullMQ hands the
 * killed worker's jobs back), every answer equals ONNX Runtime's for its model, the killed
 * worker's models are placed on the workers left, and the pool never runs more workers than its
 * max. Every wait is "eventually".
 */

import { afterAll, beforeAll, expect, it } from 'vitest';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { buildDistinctMlpModels } from '../scripts/fixtures/onnx-models.ts';
import { type PoolStack, startPoolStack } from './support/pool-stack.ts';
import { processAlive } from './support/process-alive.ts';
import { waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const F = 16;
const POOL = 'kill';
const MAX = 2;
/** Enough models that the worker killed holds at least 15 (issue 31's figure): 30 over 2 workers. */
const NAMES = Array.from({ length: 30 }, (_, i) => `kill-${i}`);
let pool: PoolStack;
let mostWorkers = 0;

beforeAll(async () => {
  const models = buildDistinctMlpModels(NAMES.length, { features: F, hidden: 32, firstSeed: 4100 });
  pool = await startPoolStack({
    pool: POOL,
    config: { max: MAX, min: MAX, standby: 0, memoryMb: 1024 },
    models: models.map((bytes, i) => ({ name: NAMES[i] as string, bytes })),
    env: {
      SCALER_TICK_MS: '300',
      HEARTBEAT_INTERVAL_MS: '300',
      HEARTBEAT_TTL_MS: '2000',
      LOCK_DURATION_MS: '2000',
      STALLED_INTERVAL_MS: '1000',
      WARMUP_ITERATIONS: '1',
      INTRA_OP_THREADS: '1',
    },
  });
}, 120_000);

afterAll(async () => {
  await pool?.close();
});

async function poolBeats(): Promise<HeartbeatPayload[]> {
  const beats = (await pool.beats()).filter((b) => b.state !== 'stopped');
  // A killed worker's last heartbeat outlives it by its TTL: only live processes count as running.
  mostWorkers = Math.max(mostWorkers, beats.filter((b) => processAlive(b.pid)).length);
  return beats;
}

const activeModels = (b: HeartbeatPayload) => (b.models ?? []).filter((m) => m.state === 'active').map((m) => m.model);

/** submitMany's row for job i: sin(i + k). */
const row = (i: number) => Array.from({ length: F }, (_, k) => Math.sin(i + k));

/** Jobs for every model (`submitMany`'s data: job i's row is sin(i + k)), by model. */
async function traffic(perModel: number): Promise<Map<string, string[]>> {
  const ids = await Promise.all(NAMES.map((m) => pool.stack.submitMany(m, perModel, { features: F })));
  return new Map(NAMES.map((m, i) => [m, ids[i] as string[]]));
}

async function expectAnswered(batches: Array<Map<string, string[]>>): Promise<void> {
  for (const batch of batches) {
    for (const [model, ids] of batch) {
      const jobs = await Promise.all(ids.map((id) => waitForJob(pool.stack, id, 180_000)));
      for (const [i, job] of jobs.entries()) {
        expect(job.status, `${model} job ${i}: ${JSON.stringify(job.error)}`).toBe('succeeded');
        const score = (job.outputs as Array<{ name: string; data: number[] }>).find((o) => o.name === 'score')?.data[0];
        expect(score).toBeCloseTo(await pool.expectedScore(model, row(i)), 5);
      }
    }
  }
}

it('a worker SIGKILLed mid-traffic loses no job, and its models are placed on the workers left', async () => {
  await until(
    'the pool at its minimum, warm',
    async () => ((await poolBeats()).filter((b) => b.state === 'standby' || b.state === 'active').length === MAX ? true : undefined),
    120_000,
  );
  const first = await traffic(6);
  // Every model held somewhere, and some worker holding several.
  const placed = await until(
    'every model placed',
    async () => {
      const beats = await poolBeats();
      const held = new Set(beats.flatMap(activeModels));
      return NAMES.every((m) => held.has(m)) ? beats : undefined;
    },
    180_000,
  );
  const victim = [...placed].sort((a, b) => activeModels(b).length - activeModels(a).length)[0] as HeartbeatPayload;
  const itsModels = activeModels(victim);
  expect(itsModels.length).toBeGreaterThanOrEqual(15);

  // More jobs, then the kill while they are in flight.
  const during = await traffic(6);
  process.kill(victim.pid, 'SIGKILL');
  const after = await traffic(4);
  await expectAnswered([first, during, after]);

  // Its models live on other workers now (once its heartbeat's TTL has run out).
  await until(
    "the killed worker's models placed on the workers left",
    async () => {
      const beats = await poolBeats();
      if (beats.some((b) => b.id === victim.id)) return undefined;
      const held = new Set(beats.flatMap(activeModels));
      return itsModels.every((m) => held.has(m)) ? true : undefined;
    },
    120_000,
  );
  expect(mostWorkers).toBeLessThanOrEqual(MAX);
}, 300_000);
