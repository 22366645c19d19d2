/**
 * Loads the pool controller asked for and no heartbeat shows yet (as controller-observe.ts
 * `createIntents` does for a deployment's commands): a worker told to hold a model reports it with
 * its next heartbeat, so a tick or a placement in between would see the model unheld and place it
 * again, maybe on another worker. For up to `holdMs` after asking, the controller sees the load
 * as on its way on the worker it asked (pool-observe.ts shows it as `loading`); once the
 * heartbeat lists the model the entry is moot, and after `holdMs` it is forgotten (a load the
 * worker refused shows in its heartbeat as evicted, no-room or failed, and is planned again).
 */

export interface PendingLoads {
  remember(workerId: string, model: string, now: number): void;
  /** Worker id → the models asked of it within `holdMs` of `now`; a clock that went back forgets nothing. */
  active(now: number): Map<string, string[]>;
}

export function createPendingLoads(holdMs: number): PendingLoads {
  const asked = new Map<string, number>();
  const keyOf = (workerId: string, model: string) => `${workerId}\u0000${model}`;
  return {
    remember(workerId, model, now) {
      asked.set(keyOf(workerId, model), now);
    },
    active(now) {
      const out = new Map<string, string[]>();
      for (const [key, at] of asked) {
        if (now - at >= holdMs) {
          asked.delete(key);
          continue;
        }
        const [workerId, model] = key.split('\u0000') as [string, string];
        out.set(workerId, [...(out.get(workerId) ?? []), model]);
      }
      return out;
    },
  };
}

/** Both maps' models per worker, each once. */
export function mergeLoads(a: ReadonlyMap<string, readonly string[]>, b: ReadonlyMap<string, readonly string[]>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const m of [a, b]) for (const [id, models] of m) out.set(id, [...new Set([...(out.get(id) ?? []), ...models])]);
  return out;
}
