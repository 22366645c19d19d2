/**
 * How a model's serving parts (worker/serving.ts) close. Its own module, importing types only, so
 * a worker can name the steps without loading BullMQ and prom-client before `downloading`.
 */
import type { Serving } from './serving.ts';

/**
 * How serving closes, in order: the intake first (it stops fetching and, through BullMQ's close,
 * waits for the jobs it holds, whose passes need the batcher), then the batcher, then the
 * releasers' last flushes. Each step is the caller's to run and to survive failing.
 */
export function servingCloseSteps(serving: Serving | undefined): Array<[string, () => Promise<unknown>]> {
  return [
    ['intake', async () => serving?.intake.close()],
    ['batcher', async () => serving?.batcher.close()],
    ['completions', async () => serving?.completions.close()],
    ['open-jobs', async () => serving?.openJobs.close()],
    ['stored-bytes', async () => serving?.storedBytes?.close()],
  ];
}
