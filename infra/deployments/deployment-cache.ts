/**
 * A read-through cache of deployments for the API's hot path: every submit asks which version
 * serves a model (and its bound, its fallback), and one Redis read and JSON parse per request
 * for a record that changes a few times a day cost more than the answer is worth.
 *
 * `get` answers from memory for `ttlMs` (absent deployments too: most models are never
 * deployed). Writes through this cache drop the model's entry, so the process that changed a
 * deployment routes by the new one at once; another process (another API, the canary guard's
 * rollback) sees a change within `ttlMs`. Everything but `get` passes through.
 */
import type { Clock } from '../kernel/clock.ts';
import type { Deployment, DeploymentStore } from './deployment-store.ts';

export interface DeploymentCacheOptions {
  clock: Pick<Clock, 'now'>;
  /** Default 1000 ms. */
  ttlMs?: number;
}

export function cacheDeployments(store: DeploymentStore, options: DeploymentCacheOptions): DeploymentStore {
  const ttlMs = options.ttlMs ?? 1000;
  const entries = new Map<string, { value: Promise<Deployment | null>; at: number }>();
  const drop = <T>(model: string, write: Promise<T>): Promise<T> => {
    entries.delete(model);
    return write.finally(() => entries.delete(model));
  };
  return {
    get(model) {
      const now = options.clock.now();
      const hit = entries.get(model);
      // A clock that went backwards (now < at) counts as expired.
      if (hit && now >= hit.at && now - hit.at < ttlMs) return hit.value;
      const value = store.get(model);
      entries.set(model, { value, at: now });
      value.catch(() => entries.delete(model));
      return value;
    },
    list: () => store.list(),
    put: (input, writeOptions) => drop(input.model, store.put(input, writeOptions)),
    update: (model, change, writeOptions) => drop(model, store.update(model, change, writeOptions)),
    rollback: (model, writeOptions) => drop(model, store.rollback(model, writeOptions)),
    history: (model) => store.history(model),
    remove: (model) => drop(model, store.remove(model)),
  };
}
