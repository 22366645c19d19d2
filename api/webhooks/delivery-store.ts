/**
 * Webhook deliveries in Redis. A delivery is one event for one job (its id is the
 * `webhook-id`, stable across retries); its attempts are recorded on it.
 *
 *   pending --2xx--> succeeded
 *   pending --410--> failed (gone; no more attempts)
 *   pending --error, schedule left--> pending (due again later)
 *   pending --error, schedule used up--> dead (the dead-letter list)
 *   failed | dead | succeeded --replay--> pending (attempts reset)
 *
 * Keys (under `<prefix>:{webhooks}:`, one Redis Cluster hash tag): `delivery:<id>` a hash; `due` a ZSET of pending ids by
 * due time; `index:<tenant>:<state>` a ZSET of ids by last change, for listing. Finished
 * deliveries expire after `retentionMs`; their index entries are trimmed when listed.
 *
 * Claims: `claimDue` moves each due id's score to `now + leaseMs` and stamps the hash with a
 * claim token, in one Lua script, so two dispatchers never claim the same delivery at once.
 * `recordAttempt` only applies while the token still matches: a dispatcher that outlived its
 * lease cannot overwrite the newer claimant's outcome. The scripts touch hash keys they derive
 * from ids: the shared `{webhooks}` tag keeps all of them in one slot on a Redis Cluster.
 */

import { randomBytes } from 'node:crypto';
import type { BulkWebhookEvent } from '../../infra/contracts/bulk.ts';
import type { WebhookEvent } from '../../infra/contracts/webhook.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { webhookDeliveryKey, webhookDueKey, webhookIndexKey } from '../../infra/redis/keys.ts';

/** Job events, and bulk runs' progress and completion events (the run id stands in `jobId`). */
export type DeliveryEvent = WebhookEvent | BulkWebhookEvent;

export const DELIVERY_STATES = ['pending', 'succeeded', 'failed', 'dead'] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

export interface DeliveryAttempt {
  /** Epoch ms the attempt started. */
  at: number;
  /** The receiver's HTTP status, when it answered. */
  status?: number;
  error?: string;
  durationMs: number;
}

export interface NewDelivery {
  id: string;
  tenant: string;
  jobId: string;
  event: DeliveryEvent;
  url: string;
  /** The JSON body, exactly as signed and sent. */
  payload: string;
}

export interface Delivery extends NewDelivery {
  state: DeliveryState;
  attempts: DeliveryAttempt[];
  /** When the next attempt is due; null once finished. */
  nextAttemptAt: number | null;
  createdAt: number;
  updatedAt: number;
  /** Why it finished unsuccessfully (e.g. `gone`, `retries_exhausted`). */
  reason?: string;
}

/** A delivery this dispatcher holds until it records the attempt or the lease ends. */
export interface ClaimedDelivery extends Delivery {
  claim: string;
}

export type AttemptOutcome =
  | { state: 'pending'; nextAttemptAt: number }
  | { state: 'succeeded' }
  | { state: 'failed' | 'dead'; reason: string };

export type ReplayResult = 'replayed' | 'not_found' | 'pending';

export interface DeliveryStore {
  /** Stores a new pending delivery due at `now`; false (and no change) when the id exists. */
  enqueue(delivery: NewDelivery, now: number): Promise<boolean>;
  claimDue(now: number, limit: number): Promise<ClaimedDelivery[]>;
  /** Appends the attempt and applies the outcome; false when the claim was lost. */
  recordAttempt(claimed: ClaimedDelivery, attempt: DeliveryAttempt, outcome: AttemptOutcome, now: number): Promise<boolean>;
  get(id: string): Promise<Delivery | null>;
  /** Newest first; every state when `state` is absent. */
  list(tenant: string, state: DeliveryState | undefined, limit: number, now: number): Promise<Delivery[]>;
  replay(tenant: string, id: string, now: number): Promise<ReplayResult>;
}

export interface DeliveryStoreOptions {
  /** How long a claim holds before another dispatcher may take the delivery. Default 60 s. */
  leaseMs?: number;
  /** How long finished deliveries are kept. Default 7 days. */
  retentionMs?: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** KEYS: hash, due, pending index. ARGV: id, now, tenant, jobId, event, url, payload. */
const ENQUEUE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'tenant', ARGV[3], 'jobId', ARGV[4], 'event', ARGV[5], 'url', ARGV[6],
  'payload', ARGV[7], 'state', 'pending', 'attempts', '[]', 'nextAttemptAt', ARGV[2], 'createdAt', ARGV[2],
  'updatedAt', ARGV[2], 'reason', '', 'claim', '')
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
return 1
`;

/** KEYS: due. ARGV: now, limit, leaseUntil, token, hash key prefix. */
const CLAIM = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], ARGV[3], id)
  redis.call('HSET', ARGV[5] .. id, 'claim', ARGV[4])
end
return ids
`;

/**
 * KEYS: hash, due, pending index, target index.
 * ARGV: claim, attempts JSON, state, nextAttemptAt, now, reason, retentionMs, id.
 */
const RECORD = `
if redis.call('HGET', KEYS[1], 'claim') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'attempts', ARGV[2], 'state', ARGV[3], 'nextAttemptAt', ARGV[4], 'updatedAt', ARGV[5],
  'reason', ARGV[6], 'claim', '')
if ARGV[3] == 'pending' then
  redis.call('ZADD', KEYS[2], ARGV[4], ARGV[8])
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[8])
else
  redis.call('ZREM', KEYS[2], ARGV[8])
  redis.call('ZREM', KEYS[3], ARGV[8])
  redis.call('ZADD', KEYS[4], ARGV[5], ARGV[8])
  redis.call('PEXPIRE', KEYS[1], ARGV[7])
end
return 1
`;

/** KEYS: hash, due, pending index; ARGV: tenant, now, id, index key prefix. */
const REPLAY = `
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[1] then return 'not_found' end
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'pending' then return 'pending' end
redis.call('PERSIST', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '[]', 'nextAttemptAt', ARGV[2], 'updatedAt', ARGV[2],
  'reason', '', 'claim', '')
redis.call('ZREM', ARGV[4] .. state, ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 'replayed'
`;

export function createDeliveryStore(redis: RedisClient, prefix: string, options: DeliveryStoreOptions = {}): DeliveryStore {
  const leaseMs = options.leaseMs ?? 60_000;
  const retentionMs = options.retentionMs ?? 7 * DAY_MS;
  const hashKey = (id: string) => webhookDeliveryKey(prefix, id);
  const dueKey = webhookDueKey(prefix);
  const indexKey = (tenant: string, state: DeliveryState) => webhookIndexKey(prefix, tenant, state);

  async function load(ids: string[]): Promise<Array<Record<string, string> | null>> {
    if (ids.length === 0) return [];
    const pipeline = redis.pipeline();
    for (const id of ids) pipeline.hgetall(hashKey(id));
    const results = (await pipeline.exec()) ?? [];
    return results.map(([err, h]) => {
      if (err) throw err;
      const hash = h as Record<string, string>;
      return hash.id ? hash : null;
    });
  }

  async function listState(tenant: string, state: DeliveryState, limit: number, now: number): Promise<Delivery[]> {
    const key = indexKey(tenant, state);
    // Finished hashes expire on their own; their index entries go here.
    if (state !== 'pending') await redis.zremrangebyscore(key, '-inf', now - retentionMs);
    const ids = await redis.zrevrange(key, 0, limit - 1);
    const hashes = await load(ids);
    return hashes.flatMap((h) => (h && h.state === state ? [toDelivery(h)] : []));
  }

  return {
    async enqueue(d, now) {
      const added = await redis.eval(
        ENQUEUE,
        3,
        hashKey(d.id),
        dueKey,
        indexKey(d.tenant, 'pending'),
        d.id,
        String(now),
        d.tenant,
        d.jobId,
        d.event,
        d.url,
        d.payload,
      );
      return added === 1;
    },

    async claimDue(now, limit) {
      const claim = randomBytes(12).toString('base64url');
      const ids = (await redis.eval(
        CLAIM,
        1,
        dueKey,
        String(now),
        String(limit),
        String(now + leaseMs),
        claim,
        // The head the script appends each claimed id to.
        hashKey(''),
      )) as string[];
      const hashes = await load(ids);
      const claimed: ClaimedDelivery[] = [];
      for (const [i, h] of hashes.entries()) {
        // Gone (expired) or no longer pending: nothing to deliver; drop it from the due set.
        if (h?.state !== 'pending') await redis.zrem(dueKey, ids[i] as string);
        else claimed.push({ ...toDelivery(h), claim });
      }
      return claimed;
    },

    async recordAttempt(claimed, attempt, outcome, now) {
      const attempts = JSON.stringify([...claimed.attempts, attempt]);
      const nextAt = outcome.state === 'pending' ? String(outcome.nextAttemptAt) : '';
      const reason = outcome.state === 'failed' || outcome.state === 'dead' ? outcome.reason : '';
      const applied = await redis.eval(
        RECORD,
        4,
        hashKey(claimed.id),
        dueKey,
        indexKey(claimed.tenant, 'pending'),
        indexKey(claimed.tenant, outcome.state),
        claimed.claim,
        attempts,
        outcome.state,
        nextAt,
        String(now),
        reason,
        String(retentionMs),
        claimed.id,
      );
      return applied === 1;
    },

    async get(id) {
      const [h] = await load([id]);
      return h ? toDelivery(h) : null;
    },

    async list(tenant, state, limit, now) {
      if (state) return listState(tenant, state, limit, now);
      const all = (await Promise.all(DELIVERY_STATES.map((s) => listState(tenant, s, limit, now)))).flat();
      return all.sort((a, b) => b.updatedAt - a.updatedAt).slice(0, limit);
    },

    async replay(tenant, id, now) {
      const result = await redis.eval(
        REPLAY,
        3,
        hashKey(id),
        dueKey,
        indexKey(tenant, 'pending'),
        tenant,
        String(now),
        id,
        // The head the script appends the delivery's former state to.
        webhookIndexKey(prefix, tenant, ''),
      );
      return result as ReplayResult;
    },
  };
}

function toDelivery(h: Record<string, string>): Delivery {
  const d: Delivery = {
    id: h.id ?? '',
    tenant: h.tenant ?? '',
    jobId: h.jobId ?? '',
    event: h.event as DeliveryEvent,
    url: h.url ?? '',
    payload: h.payload ?? '',
    state: h.state as DeliveryState,
    attempts: JSON.parse(h.attempts ?? '[]') as DeliveryAttempt[],
    nextAttemptAt: h.nextAttemptAt ? Number(h.nextAttemptAt) : null,
    createdAt: Number(h.createdAt),
    updatedAt: Number(h.updatedAt),
  };
  if (h.reason) d.reason = h.reason;
  return d;
}
