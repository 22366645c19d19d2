/**
 * Several sessions of one model behind one InferenceEngine, so that several forward passes run at
 * once (issue 30: a model that takes one request a pass cannot use more cores by batching). Each
 * engine is its own inference thread with its own ONNX Runtime session: ORT's `run` holds the
 * thread it is called on, so passes in one thread are one at a time.
 *
 * A pass goes to the engine with the fewest passes in flight (the first such, so a lone pass
 * always lands on the first engine, the one warm-up measured). `busy` and `mostBusy` (sessions in a
 * pass at once) are counted for the worker's metrics. An engine that is lost (any rejection but
 * EngineRejectedError) loses the pool: the worker treats it as it treats one lost engine.
 */
import type { EngineLoadOptions, InferenceEngine } from './engine.ts';

export interface EnginePool extends InferenceEngine {
  readonly size: number;
  /** Sessions running a forward pass now, and the most that ever ran at once. */
  readonly busy: number;
  readonly mostBusy: number;
}

export function createEnginePool(engines: readonly InferenceEngine[]): EnginePool {
  if (engines.length === 0) throw new Error('an engine pool needs at least one engine');
  const calls = engines.map(() => 0);
  let busy = 0;
  let mostBusy = 0;
  let closed: Promise<void> | undefined;
  return {
    size: engines.length,
    get busy() {
      return busy;
    },
    get mostBusy() {
      return mostBusy;
    },
    async load(modelPath: string, options: EngineLoadOptions) {
      const [first, ...rest] = await Promise.all(engines.map((e) => e.load(modelPath, options)));
      return { ...(first as NonNullable<typeof first>), loadMs: Math.max(first?.loadMs ?? 0, ...rest.map((i) => i.loadMs)) };
    },
    async run(inputs, outputNames) {
      let pick = 0;
      for (let i = 1; i < engines.length; i++) if ((calls[i] as number) < (calls[pick] as number)) pick = i;
      // A call to an engine already in a pass waits in its thread: only an idle one adds a pass.
      if (calls[pick] === 0) busy++;
      calls[pick] = (calls[pick] as number) + 1;
      mostBusy = Math.max(mostBusy, busy);
      try {
        return await (engines[pick] as InferenceEngine).run(inputs, outputNames);
      } finally {
        calls[pick] = (calls[pick] as number) - 1;
        if (calls[pick] === 0) busy--;
      }
    },
    close() {
      closed ??= Promise.all(engines.map((e) => e.close())).then(() => undefined);
      return closed;
    },
  };
}

/** The most sessions the automatic choice opens: each holds the model's weights. */
export const MAX_AUTO_SESSIONS = 4;

/**
 * Sessions a worker opens (SESSIONS_PER_WORKER; 0 = choose). Chosen from what warm-up measured: a
 * model that runs one row a pass (batching cannot fill the cores) and whose pass gained nothing
 * from more intra-op threads (warm-up chose 1) leaves the other cores idle — one more session per
 * core uses them, up to MAX_AUTO_SESSIONS. Any other model batches, or spends the cores inside
 * one pass: one session.
 */
export function sessionsFor(configured: number, oneRowAPass: boolean, chosenThreads: number, cores: number): number {
  if (configured > 0) return configured;
  if (!oneRowAPass || chosenThreads !== 1) return 1;
  return Math.max(1, Math.min(cores, MAX_AUTO_SESSIONS));
}
