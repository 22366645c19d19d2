/**
 * Nothing accepted is lost when a worker goes away:
 * - SIGKILL mid-batch: BullMQ's lock on each held job expires, the next worker's stalled-job
 *   check puts them back, and they run again (at-least-once).
 * - SIGTERM: the worker drains — takes no new job, finishes the ones it holds — and exits 0;
 *   the rest wait in the queue for the next worker.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { EntryData } from '../infra/contracts/entry.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const F = 256;
let stack: TestStack;

beforeAll(async () => {
  // Short locks so the test does not wait 30 s for BullMQ to notice the dead worker.
  // Queue entries of two requests at most: 300 requests are then ≥ 150 entries, more than a worker
  // holds at once (its concurrency counts entries), so some always wait when it drains.
  stack = await startStack({ LOCK_DURATION_MS: '2000', STALLED_INTERVAL_MS: '1000', WARMUP_ITERATIONS: '1', COALESCE_MAX_REQUESTS: '2' });
  const slow = buildMlpModel({ features: F, hidden: 2048, layers: 4, seed: 3 });
  for (const name of ['slow', 'slow-drain']) {
    await stack.registry.publish({ name, version: '1', bytes: slow, maxBatch: 16, warmupBatches: [1, 16] });
    await stack.deployments.put({ model: name, version: '1', min: 1, max: 2, standby: 0 });
  }
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

/**
 * Waits until the worker holds queue entries and has finished some: mid-stream, a batch in its
 * pass. The entries it holds, each with the requests it carries.
 */
function midStream(model: string): Promise<Array<{ entryId: string; members: string[] }>> {
  return stack.withQueue(model, '1', async (queue) => {
    for (let tries = 0; tries < 6000; tries++) {
      const [active, completed] = await Promise.all([queue.getActive(), queue.getCompletedCount()]);
      if (active.length > 0 && completed > 0) {
        return active.map((j) => ({ entryId: j.id as string, members: (j.data as EntryData).members.map((m) => m.id) }));
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    return [];
  });
}

it('a worker killed with SIGKILL mid-batch loses no job', async () => {
  // Queue everything first, then start the worker: the kill then lands mid-stream for sure.
  const ids = await stack.submitMany('slow', 300, { features: F });
  const first = await stack.startWorker('slow', '1', { INTRA_OP_THREADS: '1' });
  const running = await midStream('slow');
  expect(running.length).toBeGreaterThan(0);
  first.kill('SIGKILL');
  await new Promise((resolve) => first.once('exit', resolve));

  await stack.startWorker('slow', '1', { INTRA_OP_THREADS: '1' });
  const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id, 120_000)));
  expect(jobs.filter((j) => j.status !== 'succeeded')).toEqual([]);
  for (const id of running.flatMap((e) => e.members)) expect(jobs[ids.indexOf(id)]?.status).toBe('succeeded');
}, 180_000);

it('SIGTERM drains: held jobs finish, the worker exits 0, the rest wait for the next worker', async () => {
  // Heavier jobs (8 rows each), all queued before the worker starts, so that plenty are still
  // queued when the signal lands.
  const ids = await stack.submitMany('slow-drain', 300, { features: F, rows: 8 });
  const first = await stack.startWorker('slow-drain', '1', { INTRA_OP_THREADS: '1' });
  const held = await midStream('slow-drain');
  expect(held.length).toBeGreaterThan(0);
  first.kill('SIGTERM');
  const code = await new Promise<number | null>((resolve) => first.once('exit', (c) => resolve(c)));
  expect(code).toBe(0);

  await stack.withQueue('slow-drain', '1', async (queue) => {
    // Nothing left held by the departed worker, nothing failed, and the jobs it held are done.
    expect(await queue.getActiveCount()).toBe(0);
    expect(await queue.getFailedCount()).toBe(0);
    for (const { entryId } of held) expect(await queue.getJobState(entryId)).toBe('completed');
    expect((await queue.getWaitingCount()) + (await queue.getPrioritizedCount())).toBeGreaterThan(0);
  });

  await stack.startWorker('slow-drain', '1', { INTRA_OP_THREADS: '1' });
  const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id, 120_000)));
  expect(jobs.filter((j) => j.status !== 'succeeded')).toEqual([]);
}, 180_000);
