/**
 * The single-flight claim on placing one model version in a shared pool (issue 31 §3): one key per
 * (pool, model version), `poolClaimKey`, taken with `SET NX PX`. Whoever takes it — a ring's
 * placement at once, or a tick that loads a model no worker held — is the one that places the
 * model; every other ring, API process and controller finds it taken and loads nothing. Its value
 * (JSON `{workerId, by, at}`) names the worker the model went to once chosen (empty while the
 * placement is choosing), so a tick sees the load as on its way until the worker's heartbeat
 * shows it. It expires on its own (`ttlMs`, a few ticks): a placement that died with its process
 * holds nothing for long, and a model evicted later is placed again.
 *
 *   free --take() wins SET NX--> claimed (no worker yet) --name(worker)--> claimed (worker)
 *   claimed --PX expires, or release() after a failed load--> free
 */

import { getMany, type RedisClient } from '../redis/client.ts';
import { poolClaimKey } from '../redis/keys.ts';
import type { MemberRef } from './pool-observe.ts';

type Ref = { model: string; version: string };

export interface PlacementClaims {
  /** SET NX PX: true when this call took the claim. */
  take(pool: string, ref: Ref, workerId: string, now: number): Promise<boolean>;
  /** Names the worker chosen, on a claim this placement holds (SET XX PX). */
  name(pool: string, ref: Ref, workerId: string, now: number): Promise<void>;
  release(pool: string, ref: Ref): Promise<void>;
  /** The open claims that name a worker: worker id → the members' keys placed on it. */
  open(pool: string, refs: readonly MemberRef[]): Promise<Map<string, string[]>>;
}

export function createPlacementClaims(redis: RedisClient, prefix: string, identity: string, ttlMs: number): PlacementClaims {
  const key = (pool: string, ref: Ref) => poolClaimKey(prefix, pool, ref.model, ref.version);
  const value = (workerId: string, now: number) => JSON.stringify({ workerId, by: identity, at: now });
  return {
    async take(pool, ref, workerId, now) {
      return (await redis.set(key(pool, ref), value(workerId, now), 'PX', ttlMs, 'NX')) === 'OK';
    },
    async name(pool, ref, workerId, now) {
      await redis.set(key(pool, ref), value(workerId, now), 'PX', ttlMs, 'XX');
    },
    async release(pool, ref) {
      await redis.del(key(pool, ref));
    },
    async open(pool, refs) {
      const out = new Map<string, string[]>();
      const values = await getMany(
        redis,
        refs.map((r) => key(pool, r)),
      );
      refs.forEach((r, i) => {
        const workerId = claimWorker(values[i]);
        if (workerId) out.set(workerId, [...(out.get(workerId) ?? []), r.key]);
      });
      return out;
    },
  };
}

function claimWorker(raw: string | null | undefined): string | undefined {
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as { workerId?: unknown };
    return typeof v.workerId === 'string' && v.workerId !== '' ? v.workerId : undefined;
  } catch {
    return undefined;
  }
}
