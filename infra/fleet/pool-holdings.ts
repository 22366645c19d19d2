/**
 * Which models a shared pool's worker should hold (issue 31): the channel between whoever places
 * models (the pool controller, tools, tests) and one pool worker (`warmpool worker --pool NAME`,
 * worker/pool-worker.ts). Both sides use this module. The same two Redis parts as the control
 * channel (worker-control.ts), for the same reason (pub/sub alone loses a message sent while the
 * worker reconnects):
 *
 * - the desired-holdings key `${prefix}:pool-holdings:${workerId}` (JSON HoldingsMessage, SET with
 *   a TTL) is the truth: the worker reads it on every heartbeat;
 * - the channel `${prefix}:pool-holdings-bell:${workerId}` is the doorbell, published right after
 *   the write; the worker re-reads the key at once (a late doorbell never undoes a newer write).
 *
 * Both writes are one script over the one key, so `rev` grows by at least one per write (it is
 * max(previous rev + 1, now)) and `askLoad` adds to the set without a read-modify-write race.
 *
 * What the worker does with it (it converges; nothing here waits for it):
 * - a listed model it does not hold: downloaded if needed (sha256 cache), loaded, warmed (one at a
 *   time: the resident-memory measurement of a load is only honest alone), then served;
 * - a held model no longer listed: drained (its intake stops fetching, the jobs it holds finish,
 *   its session is released);
 * - a load that does not fit the worker's memory budget evicts held models least-recently-used
 *   (never one with jobs in flight, nor one used in the last minutes while an older one can go);
 *   an evicted model that is still listed stays out (heartbeat: state `evicted`) until it leaves
 *   the list and comes back, or an `askLoad` names it; if nothing can go, the load waits (state
 *   `no-room`) and is tried again at every heartbeat;
 * - `askLoad` (a single "load this now", for the controller's single-flight placement of a model
 *   nobody holds): the model joins the set and is loaded before any other pending load, evicting
 *   to make room, even if this worker evicted it before.
 * A missing key (never written, or expired with its TTL) means "no change": the worker keeps what it
 * holds. The controller re-sends each tick; the heartbeat's `models` says what the worker holds.
 */

import type { RedisClient } from '../redis/client.ts';
import { holdingsChannel, holdingsKey } from '../redis/keys.ts';

/** One model version. */
export interface ModelRef {
  model: string;
  version: string;
}

/** What the key holds and the doorbell carries (JSON). */
export interface HoldingsMessage {
  /** The model versions the worker should hold, in the order it should load them. */
  models: ModelRef[];
  /** Grows with every write to this worker's key (see the header). */
  rev: number;
  /** The model the last askLoad named, if the last write was one: it is loaded first, evicted or not before. */
  loadNow?: ModelRef;
  /** Epoch ms when it was written; for logs and tools. */
  sentAt: number;
}

/** Three default heartbeat TTLs, like the control channel's: the controller re-sends each tick. */
export const DEFAULT_HOLDINGS_TTL_MS = 30_000;

export interface SendHoldingsOptions {
  /** How long the desired holdings outlive a sender that stopped; default DEFAULT_HOLDINGS_TTL_MS. */
  ttlMs?: number;
  now?: number;
}

type HoldingsRedis = Pick<RedisClient, 'eval'>;

/**
 * KEYS[1] the holdings key. ARGV: channel, mode (`set` | `add`), models JSON (set) or one model
 * JSON (add), now, ttl ms. An empty Lua table encodes as `{}`: parseHoldings reads it as no models.
 */
const WRITE_SCRIPT = `
local rev, models = 0, {}
local raw = redis.call('GET', KEYS[1])
if raw then
  local ok, old = pcall(cjson.decode, raw)
  if ok and type(old) == 'table' then
    rev = tonumber(old.rev) or 0
    if type(old.models) == 'table' then models = old.models end
  end
end
local now = tonumber(ARGV[4])
local message = { rev = math.max(rev + 1, now), sentAt = now }
if ARGV[2] == 'set' then
  message.models = cjson.decode(ARGV[3])
else
  local ask = cjson.decode(ARGV[3])
  local found = false
  for _, m in ipairs(models) do
    if m.model == ask.model and m.version == ask.version then found = true end
  end
  if not found then table.insert(models, ask) end
  message.models = models
  message.loadNow = ask
end
local body = cjson.encode(message)
redis.call('SET', KEYS[1], body, 'PX', ARGV[5])
redis.call('PUBLISH', ARGV[1], body)
return message.rev
`;

/** Sets the worker's whole desired set, then rings the doorbell. Idempotent in effect. Returns the new rev. */
export async function sendHoldings(
  redis: HoldingsRedis,
  prefix: string,
  workerId: string,
  models: readonly ModelRef[],
  options: SendHoldingsOptions = {},
): Promise<number> {
  const list = models.map(({ model, version }) => ({ model, version }));
  return write(redis, prefix, workerId, 'set', JSON.stringify(list), options);
}

/** Adds one model to the worker's set and asks it to load that one first (see the header). Returns the new rev. */
export async function askLoad(
  redis: HoldingsRedis,
  prefix: string,
  workerId: string,
  ref: ModelRef,
  options: SendHoldingsOptions = {},
): Promise<number> {
  return write(redis, prefix, workerId, 'add', JSON.stringify({ model: ref.model, version: ref.version }), options);
}

async function write(
  redis: HoldingsRedis,
  prefix: string,
  workerId: string,
  mode: 'set' | 'add',
  body: string,
  options: SendHoldingsOptions,
): Promise<number> {
  const now = Math.floor(options.now ?? Date.now());
  const ttlMs = Math.max(1, Math.round(options.ttlMs ?? DEFAULT_HOLDINGS_TTL_MS));
  const channel = holdingsChannel(prefix, workerId);
  return Number(await redis.eval(WRITE_SCRIPT, 1, holdingsKey(prefix, workerId), channel, mode, body, String(now), String(ttlMs)));
}

/** The worker's desired holdings, if written within the TTL. */
export async function readHoldings(
  redis: Pick<RedisClient, 'get'>,
  prefix: string,
  workerId: string,
): Promise<HoldingsMessage | undefined> {
  return parseHoldings(await redis.get(holdingsKey(prefix, workerId)));
}

/** A well-formed message, or undefined for anything else; malformed entries are dropped, not guessed at. */
export function parseHoldings(raw: string | null | undefined): HoldingsMessage | undefined {
  if (!raw) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!value || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  if (typeof v.rev !== 'number' || !Number.isFinite(v.rev)) return undefined;
  // The script's empty list arrives as {} (Lua cannot tell an empty array from an empty object).
  const listed = Array.isArray(v.models) ? v.models : [];
  const models: ModelRef[] = [];
  for (const m of listed) {
    const ref = asRef(m);
    if (ref && !models.some((x) => sameRef(x, ref))) models.push(ref);
  }
  const loadNow = asRef(v.loadNow);
  return { models, rev: v.rev, sentAt: typeof v.sentAt === 'number' ? v.sentAt : 0, ...(loadNow ? { loadNow } : {}) };
}

export function sameRef(a: ModelRef, b: ModelRef): boolean {
  return a.model === b.model && a.version === b.version;
}

/** `model@version`: a map key for a model version. */
export function refKey(ref: ModelRef): string {
  return `${ref.model}@${ref.version}`;
}

function asRef(x: unknown): ModelRef | undefined {
  if (!x || typeof x !== 'object') return undefined;
  const { model, version } = x as Record<string, unknown>;
  return typeof model === 'string' && model !== '' && typeof version === 'string' && version !== '' ? { model, version } : undefined;
}
