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
 * Keys (under `<prefix>:{webhooks}:`, one Redis Cluster hash tag): `delivery:<id>` a hash;
 * `due:<tenant>` a ZSET of that tenant's pending ids by due time; `due-tenants` a ZSET of the
 * tenants with a pending delivery, by their earliest one's due time (every script that changes a
 * `due:<tenant>` sets its tenant's score from its new head); `index:<tenant>:<state>` a ZSET of
 * ids by last change, for listing. Finished deliveries expire after `retentionMs`; their index
 * entries are trimmed when listed. `due`, the one ZSET of every tenant's ids from before, is
 * drained into the per-tenant sets by claims, 100 ids a claim.
 *
 * Claims: `claimDue` moves each claimed id's score to `now + leaseMs` and stamps the hash with a
 * claim token, in one Lua script, so two dispatchers never claim the same delivery at once.
 * `recordAttempt` only applies while the token still matches: a dispatcher that outlived its
 * lease cannot overwrite the newer claimant's outcome. The scripts touch keys they derive from
 * ids and tenants: the shared `{webhooks}` tag keeps all of them in one slot on a Redis Cluster.
 *
 * Fair shares: the claimer says how many attempts each tenant has in flight at it and how many a
 * tenant may have (`TenantShare`). The claim walks the due tenants earliest first, skips those at
 * their share and takes one delivery per tenant per round, so a tenant with a million due
 * deliveries and hanging receivers costs another tenant's claim only its own skipped entry: the
 * per-tenant sets are why (in one set of all ids, its backlog would stand in front).
 */

import { randomBytes } from 'node:crypto';
import type { BulkWebhookEvent } from '../../infra/contracts/bulk.ts';
import type { WebhookEvent } from '../../infra/contracts/webhook.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { webhookDeliveryKey, webhookDueKey, webhookDueTenantsKey, webhookIndexKey, webhookTenantDueKey } from '../../infra/redis/keys.ts';

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

/** What a claimer holds already: a claim leaves a tenant at its share, for others' deliveries. */
export interface TenantShare {
  /** Attempts one tenant may have in flight at this claimer. */
  perTenant: number;
  /** The claimer's attempts in flight now, by tenant (a tenant absent has none). */
  inFlight: ReadonlyMap<string, number>;
}

export interface DeliveryStore {
  /** Stores a new pending delivery due at `now`; false (and no change) when the id exists. */
  enqueue(delivery: NewDelivery, now: number): Promise<boolean>;
  /** Up to `limit` due deliveries, none of a tenant past its share (no share: `limit` each). */
  claimDue(now: number, limit: number, share?: TenantShare): Promise<ClaimedDelivery[]>;
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

/** How many ids of the set from before the per-tenant sets one claim moves over. */
const LEGACY_DRAIN_PER_CLAIM = 100;

/** Sets a tenant's score in `due-tenants` from the head of its due set, or drops it. */
const REFRESH = `
local function refresh(tenants, due, tenant)
  local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  if head[1] then redis.call('ZADD', tenants, head[2], tenant) else redis.call('ZREM', tenants, tenant) end
end
`;

/** KEYS: hash, tenant due, pending index, due tenants. ARGV: id, now, tenant, jobId, event, url, payload. */
const ENQUEUE = `${REFRESH}
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'tenant', ARGV[3], 'jobId', ARGV[4], 'event', ARGV[5], 'url', ARGV[6],
  'payload', ARGV[7], 'state', 'pending', 'attempts', '[]', 'nextAttemptAt', ARGV[2], 'createdAt', ARGV[2],
  'updatedAt', ARGV[2], 'reason', '', 'claim', '')
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
refresh(KEYS[4], KEYS[2], ARGV[3])
return 1
`;

/**
 * KEYS: due tenants, the due set from before. ARGV: now, limit, leaseUntil, token, hash key
 * head, tenant due key head, per-tenant share, legacy drain count, then (tenant, in flight) pairs.
 *
 * Tenants at their share are skipped; there are at most as many as the pairs, so fetching
 * `limit + full` due tenants finds `limit` that may take one. A round takes one delivery of each
 * tenant still under its share; an id whose hash is gone or finished is dropped from its set.
 */
const CLAIM = `${REFRESH}
local now, limit, leaseUntil, token = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local hashes, dues, share = ARGV[5], ARGV[6], tonumber(ARGV[7])
local old = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[8]) - 1, 'WITHSCORES')
for i = 1, #old, 2 do
  local tenant = redis.call('HGET', hashes .. old[i], 'tenant')
  if tenant then
    redis.call('ZADD', dues .. tenant, old[i + 1], old[i])
    refresh(KEYS[1], dues .. tenant, tenant)
  end
  redis.call('ZREM', KEYS[2], old[i])
end
local free, full = {}, 0
for i = 9, #ARGV, 2 do
  free[ARGV[i]] = share - tonumber(ARGV[i + 1])
  if free[ARGV[i]] <= 0 then full = full + 1 end
end
local tenants = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit + full)
local claimed, steps = {}, 0
while #claimed < limit and #tenants > 0 and steps < 4 * limit + 100 do
  local again = {}
  for _, tenant in ipairs(tenants) do
    local left = free[tenant] or share
    if #claimed < limit and left > 0 then
      local due = dues .. tenant
      local id = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, 1)[1]
      if id then
        steps = steps + 1
        if redis.call('HGET', hashes .. id, 'state') == 'pending' then
          redis.call('ZADD', due, leaseUntil, id)
          redis.call('HSET', hashes .. id, 'claim', token)
          claimed[#claimed + 1] = id
          left = left - 1
          free[tenant] = left
        else
          redis.call('ZREM', due, id)
        end
        refresh(KEYS[1], due, tenant)
        if left > 0 then again[#again + 1] = tenant end
      end
    end
  end
  tenants = again
end
return claimed
`;

/**
 * KEYS: hash, tenant due, pending index, target index, due tenants.
 * ARGV: claim, attempts JSON, state, nextAttemptAt, now, reason, retentionMs, id, tenant.
 */
const RECORD = `${REFRESH}
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
refresh(KEYS[5], KEYS[2], ARGV[9])
return 1
`;

/** KEYS: hash, tenant due, pending index, due tenants; ARGV: tenant, now, id, index key prefix. */
const REPLAY = `${REFRESH}
if redis.call('HGET', KEYS[1], 'tenant') ~= ARGV[1] then return 'not_found' end
local state = redis.call('HGET', KEYS[1], 'state')
if state == 'pending' then return 'pending' end
redis.call('PERSIST', KEYS[1])
redis.call('HSET', KEYS[1], 'state', 'pending', 'attempts', '[]', 'nextAttemptAt', ARGV[2], 'updatedAt', ARGV[2],
  'reason', '', 'claim', '')
redis.call('ZREM', ARGV[4] .. state, ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
refresh(KEYS[4], KEYS[2], ARGV[1])
return 'replayed'
`;

export function createDeliveryStore(redis: RedisClient, prefix: string, options: DeliveryStoreOptions = {}): DeliveryStore {
  const leaseMs = options.leaseMs ?? 60_000;
  const retentionMs = options.retentionMs ?? 7 * DAY_MS;
  const hashKey = (id: string) => webhookDeliveryKey(prefix, id);
  const legacyDueKey = webhookDueKey(prefix);
  const tenantDueKey = (tenant: string) => webhookTenantDueKey(prefix, tenant);
  const dueTenantsKey = webhookDueTenantsKey(prefix);
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
        4,
        hashKey(d.id),
        tenantDueKey(d.tenant),
        indexKey(d.tenant, 'pending'),
        dueTenantsKey,
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

    async claimDue(now, limit, share) {
      if (limit <= 0) return [];
      const claim = randomBytes(12).toString('base64url');
      const inFlight = [...(share?.inFlight ?? [])].flatMap(([tenant, n]) => [tenant, String(n)]);
      const ids = (await redis.eval(
        CLAIM,
        2,
        dueTenantsKey,
        legacyDueKey,
        String(now),
        String(limit),
        String(now + leaseMs),
        claim,
        // The heads the script appends an id, a tenant to.
        hashKey(''),
        tenantDueKey(''),
        String(share?.perTenant ?? limit),
        String(LEGACY_DRAIN_PER_CLAIM),
        ...inFlight,
      )) as string[];
      // The script claimed only pending ones; one that finished since is left to its lease.
      const hashes = await load(ids);
      return hashes.flatMap((h) => (h?.state === 'pending' ? [{ ...toDelivery(h), claim }] : []));
    },

    async recordAttempt(claimed, attempt, outcome, now) {
      const attempts = JSON.stringify([...claimed.attempts, attempt]);
      const nextAt = outcome.state === 'pending' ? String(outcome.nextAttemptAt) : '';
      const reason = outcome.state === 'failed' || outcome.state === 'dead' ? outcome.reason : '';
      const applied = await redis.eval(
        RECORD,
        5,
        hashKey(claimed.id),
        tenantDueKey(claimed.tenant),
        indexKey(claimed.tenant, 'pending'),
        indexKey(claimed.tenant, outcome.state),
        dueTenantsKey,
        claimed.claim,
        attempts,
        outcome.state,
        nextAt,
        String(now),
        reason,
        String(retentionMs),
        claimed.id,
        claimed.tenant,
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
        4,
        hashKey(id),
        tenantDueKey(tenant),
        indexKey(tenant, 'pending'),
        dueTenantsKey,
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
