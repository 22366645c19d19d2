/**
 * Shared pool use cases (DESIGN §2, §8): list, read with the deployments that joined, set
 * (merge), delete. Shared by the HTTP routes and `warmpool pool`, so both validate and merge the
 * same way. The rules are the contract's (infra/contracts/shared-pool.ts); the store keeps the
 * references whole (infra/deployments/pool-store.ts): a pool that deployments name is not deleted.
 */

import { applyPoolChange, assertPoolName, type SharedPool, type SharedPoolChange } from '../../infra/contracts/shared-pool.ts';
import type { Deployment } from '../../infra/deployments/deployment-store.ts';
import { poolNotFound, type SharedPoolStore } from '../../infra/deployments/pool-store.ts';

export interface PoolUseCaseDeps {
  pools: Pick<SharedPoolStore, 'get' | 'list' | 'update' | 'remove'>;
  /** Who joined which pool: read from the deployments. */
  deployments: { list(): Promise<Pick<Deployment, 'model' | 'pool'>[]> };
}

/** A pool as the API and the CLI show it: its record and the models whose deployments joined it. */
export interface PoolView extends SharedPool {
  deployments: string[];
}

export interface PutPoolInput {
  name: string;
  change: SharedPoolChange;
  /** Optimistic concurrency: apply only on top of this revision (0 = does not exist yet). */
  ifRevision?: number;
}

export async function listPools(deps: PoolUseCaseDeps): Promise<PoolView[]> {
  const [pools, members] = await Promise.all([deps.pools.list(), membersByPool(deps)]);
  return pools.map((p) => ({ ...p, deployments: members.get(p.name) ?? [] }));
}

export async function getPool(deps: PoolUseCaseDeps, name: string): Promise<PoolView> {
  assertPoolName(name);
  const [pool, members] = await Promise.all([deps.pools.get(name), membersByPool(deps)]);
  if (!pool) throw poolNotFound(name);
  return { ...pool, deployments: members.get(name) ?? [] };
}

/**
 * Creates or changes a pool: what the change leaves out keeps its value (a new pool: max given,
 * the rest defaults). `created`: there was no pool of that name when the write landed.
 */
export async function putPool(deps: PoolUseCaseDeps, input: PutPoolInput): Promise<{ pool: PoolView; created: boolean }> {
  const { name, change } = input;
  assertPoolName(name);
  let created = false;
  const [pool, members] = await Promise.all([
    deps.pools.update(
      name,
      (current) => {
        created = current === null; // the last attempt's read is the one that landed
        return applyPoolChange(name, current, change);
      },
      { ifRevision: input.ifRevision },
    ),
    membersByPool(deps),
  ]);
  return { pool: { ...pool, deployments: members.get(name) ?? [] }, created };
}

/** Deletes a pool: 404 when there is none, 409 `pool_in_use` (naming them) while deployments name it. */
export async function deletePool(deps: PoolUseCaseDeps, name: string): Promise<{ name: string; deleted: true }> {
  assertPoolName(name);
  if (!(await deps.pools.remove(name))) throw poolNotFound(name);
  return { name, deleted: true };
}

async function membersByPool(deps: PoolUseCaseDeps): Promise<Map<string, string[]>> {
  const members = new Map<string, string[]>();
  for (const d of await deps.deployments.list()) {
    if (d.pool !== undefined) members.set(d.pool, [...(members.get(d.pool) ?? []), d.model]);
  }
  return members;
}
