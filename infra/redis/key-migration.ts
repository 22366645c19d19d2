/**
 * A one-off move of a deployment's Redis keys from the single-node layout to the Redis Cluster
 * layout, where the keys every multi-key script touches share a hash tag. It runs against the
 * old single node (the old layout never ran anywhere else), before the data moves into a cluster.
 *
 * What moves, under `<p>:` (QUEUE_PREFIX), old → new:
 *
 *   queue        infer.<m>.<v>:<rest>              → {infer.<m>.<v>}:<rest>  (every BullMQ key of the
 *                                                    queue: lists, sets, events, meta, job hashes, locks…)
 *   deployments  deployments                        → {deployments}
 *                deployments:history:<m>            → {deployments}:history:<m>
 *   webhooks     webhooks:delivery:<id>, webhooks:due, webhooks:index:<tenant>:<state>
 *                                                  → {webhooks}:…   (the delivery store's keys only)
 *                webhooks:cursor:infer.<m>.<v>      → {webhooks}:cursor:{infer.<m>.<v>}
 *   bulk         bulk:running, bulk:run:<id>[:parts|:objects|:outstanding|:lease] → {bulk}:…
 *   canary       canary:cursor:infer.<m>.<v>        → canary:cursor:{infer.<m>.<v>}
 *                canary:agg:infer.<m>.<v>:<bucket>  → canary:agg:{infer.<m>.<v>}:<bucket>
 *
 * and one value: the job index `<p>:job:<id>` holding an old queue name gets the new one (a
 * tombstone, JSON, stays: the new code reads it there too). Everything else keeps its name:
 * webhooks:secret:*, bulk:capacity:*, workers:*, control*, scaler*, arrivals/completions,
 * metrics, dashboard, result, idem, ratelimit, canary:events/breach. No value holds a key name.
 *
 * The new names come from keys.ts (its table lists every family); the old ones exist only here.
 *
 * Plan, then apply. Planning only reads (SCAN, never KEYS). Applying is idempotent: each rename
 * is one script that renames only while the source exists and the target does not, so a re-run
 * after a crash finishes the rest, and a target that exists is a conflict, reported and never
 * overwritten. RENAME keeps a key's TTL; the index rewrite keeps it too (SET … KEEPTTL, Redis 6+).
 *
 * Every warmpool process must be stopped first: an old one would go on writing old keys after
 * the move, a new one writes new keys the move would collide with. Apply refuses (unless forced)
 * while it sees signs of one: worker heartbeats, the scaler's leader lock, a BullMQ job lock
 * under an old queue name (an old worker holds a job), a bulk run's lease. API processes leave
 * no such trace: the operator stops them.
 */
import type { Redis } from 'ioredis';
import { parseQueueName, queueName } from '../contracts/job.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { scanKeys } from './client.ts';
import { BULK_TAG, DEPLOYMENTS_TAG, jobIndexKey, scalerLeaderKey, WEBHOOKS_TAG, webhookCursorKey, workerKey } from './keys.ts';

export const KEY_FAMILIES = ['queue', 'deployments', 'webhooks', 'bulk', 'canary'] as const;
export type KeyFamily = (typeof KEY_FAMILIES)[number];

export interface KeyRename {
  family: KeyFamily;
  from: string;
  to: string;
}

/** A job index value: an old queue name → the new one. */
export interface ValueRewrite {
  key: string;
  from: string;
  to: string;
}

export interface KeyMigrationPlan {
  prefix: string;
  /** Renames whose target did not exist when planned. */
  renames: KeyRename[];
  rewrites: ValueRewrite[];
  /** `<from> -> <to>` for each rename whose target exists already: left as they are. */
  conflicts: string[];
  /** Signs of running warmpool processes seen while planning (see the header). */
  live: string[];
}

export interface KeyMigrationResult {
  renamed: Record<KeyFamily, number>;
  rewritten: number;
  /** Renames an earlier run made already or whose key expired meanwhile; values that changed meanwhile. */
  skipped: number;
  /** Renames whose target appeared after planning: nothing overwritten. */
  conflicts: string[];
}

/** `infer.<m>.<v>` as the single-node layout named queues (no hash tag). */
export function isOldQueueName(name: string): boolean {
  return !/[{}]/.test(name) && parseQueueName(name) !== null;
}

/** The queue name of the cluster layout for an old one. */
function tagged(oldName: string): string {
  const { model, version } = parseQueueName(oldName) as { model: string; version: string };
  return queueName(model, version);
}

/** `<queue>:<rest>` with an old queue name → `{queue}:<rest>`; null otherwise. */
function retagQueueHead(rest: string): string | null {
  const colon = rest.indexOf(':');
  const name = colon < 0 ? rest : rest.slice(0, colon);
  if (!isOldQueueName(name)) return null;
  return tagged(name) + (colon < 0 ? '' : rest.slice(colon));
}

/** Families whose keys move under a fixed hash tag: old head → new head (see the header). */
const TAGGED_HEADS: ReadonlyArray<{ family: KeyFamily; test: (rest: string) => boolean; from: string; to: string }> = [
  {
    family: 'deployments',
    test: (r) => r === 'deployments' || r.startsWith('deployments:history:'),
    from: 'deployments',
    to: DEPLOYMENTS_TAG,
  },
  {
    family: 'webhooks',
    test: (r) => r === 'webhooks:due' || r.startsWith('webhooks:delivery:') || r.startsWith('webhooks:index:'),
    from: 'webhooks',
    to: WEBHOOKS_TAG,
  },
  { family: 'bulk', test: (r) => r === 'bulk:running' || r.startsWith('bulk:run:'), from: 'bulk', to: BULK_TAG },
];

/** Keys of ours that embed a queue name after a fixed head (`to`: the head's new name under a prefix, when it moves too). */
const QUEUE_NAMED_HEADS: ReadonlyArray<{ family: KeyFamily; head: string; to?: (prefix: string) => string }> = [
  { family: 'webhooks', head: 'webhooks:cursor:', to: (prefix) => webhookCursorKey(prefix, '') },
  { family: 'canary', head: 'canary:cursor:' },
  { family: 'canary', head: 'canary:agg:' },
];

/** The new name of a key of the old layout under `prefix`, with its family; null for a key that keeps its name. */
export function migratedKey(prefix: string, key: string): { family: KeyFamily; to: string } | null {
  const head = `${prefix}:`;
  if (!key.startsWith(head)) return null;
  const rest = key.slice(head.length);
  if (rest.startsWith('infer.')) {
    const moved = retagQueueHead(rest);
    // A key of BullMQ's always has a part after the queue's name.
    return moved !== null && rest.includes(':') ? { family: 'queue', to: head + moved } : null;
  }
  for (const t of TAGGED_HEADS) {
    if (t.test(rest)) return { family: t.family, to: head + t.to + rest.slice(t.from.length) };
  }
  for (const { family, head: named, to } of QUEUE_NAMED_HEADS) {
    if (!rest.startsWith(named)) continue;
    const moved = retagQueueHead(rest.slice(named.length));
    if (moved !== null) return { family, to: (to ? to(prefix) : head + named) + moved };
  }
  return null;
}

/** The job index's new value for an old one: the tagged queue name; null when it stays (tombstones, new names). */
export function migratedIndexValue(value: string): string | null {
  return isOldQueueName(value) ? tagged(value) : null;
}

/** What a key says about a running warmpool process (see the header); null when nothing. */
export function liveProcessSign(prefix: string, key: string): string | null {
  const head = `${prefix}:`;
  if (!key.startsWith(head)) return null;
  const rest = key.slice(head.length);
  if (key.startsWith(workerKey(prefix, ''))) return `worker heartbeat ${key}`;
  if (key === scalerLeaderKey(prefix, false) || key === scalerLeaderKey(prefix, true)) return `scaler leader lock ${key}`;
  if (rest.endsWith(':lock') && migratedKey(prefix, key)?.family === 'queue') return `old-version BullMQ job lock ${key}`;
  // The old layout's lease: an old-version bulk run still drives.
  if (rest.startsWith('bulk:run:') && rest.endsWith(':lease')) return `bulk run lease ${key}`;
  return null;
}

/** Renames per family. */
export function countByFamily(renames: readonly Pick<KeyRename, 'family'>[]): Record<KeyFamily, number> {
  const counts = Object.fromEntries(KEY_FAMILIES.map((f) => [f, 0])) as Record<KeyFamily, number>;
  for (const r of renames) counts[r.family]++;
  return counts;
}

const SCAN_COUNT = 1000;
/** Renames (scripts) in flight at once: ioredis writes them back to back, one round trip a batch. */
const APPLY_BATCH = 500;

/** KEYS: source, target. Renames only while the source exists and the target does not. */
const RENAME_SCRIPT = `
local source = redis.call('EXISTS', KEYS[1]) == 1
local target = redis.call('EXISTS', KEYS[2]) == 1
if source and target then return 'conflict' end
if target then return 'done' end
if not source then return 'gone' end
redis.call('RENAME', KEYS[1], KEYS[2])
return 'renamed'
`;

/** KEYS: index key. ARGV: old value, new value. Compare-and-set, keeping the TTL. */
const REWRITE_SCRIPT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
`;

function assertPrefix(prefix: string): void {
  if (/[{}]/.test(prefix)) {
    throw new InvalidInputError(
      'invalid_prefix',
      `QUEUE_PREFIX "${prefix}" contains a brace: its hash tag would override the keys' own, so it cannot take the Redis Cluster layout`,
    );
  }
}

/** A SCAN pattern for every key under `prefix`. */
function underPrefix(prefix: string): string {
  return `${prefix.replace(/[*?[\]\\]/g, '\\$&')}:*`;
}

/** Reads the keyspace under `prefix` and says what applyKeyMigration would do. Changes nothing. */
export async function planKeyMigration(redis: Redis, prefix: string): Promise<KeyMigrationPlan> {
  assertPrefix(prefix);
  const renames = new Map<string, KeyRename>();
  const indexKeys = new Set<string>();
  const live = new Set<string>();
  // SCAN may report a key twice: everything is collected by key first.
  for await (const batch of scanKeys(redis, underPrefix(prefix), SCAN_COUNT)) {
    for (const key of batch) {
      const moved = migratedKey(prefix, key);
      if (moved) renames.set(key, { family: moved.family, from: key, to: moved.to });
      if (key.startsWith(jobIndexKey(prefix, ''))) indexKeys.add(key);
      const sign = liveProcessSign(prefix, key);
      if (sign) live.add(sign);
    }
  }
  const plan: KeyMigrationPlan = {
    prefix,
    renames: [],
    rewrites: await indexRewrites(redis, [...indexKeys]),
    conflicts: [],
    live: [...live],
  };
  for (const chunk of chunks([...renames.values()], APPLY_BATCH)) {
    const taken = await Promise.all(chunk.map((r) => redis.exists(r.to)));
    for (const [i, r] of chunk.entries()) {
      if (taken[i] === 1) plan.conflicts.push(`${r.from} -> ${r.to}`);
      else plan.renames.push(r);
    }
  }
  return plan;
}

async function indexRewrites(redis: Redis, keys: string[]): Promise<ValueRewrite[]> {
  const rewrites: ValueRewrite[] = [];
  for (const chunk of chunks(keys, SCAN_COUNT)) {
    // MGET answers null for a key that is gone or holds no string.
    const values = await redis.mget(chunk);
    for (const [i, value] of values.entries()) {
      const to = value === null ? null : migratedIndexValue(value);
      if (value !== null && to !== null) rewrites.push({ key: chunk[i] as string, from: value, to });
    }
  }
  return rewrites;
}

/** Signs of running warmpool processes under `prefix` (see the header), from one SCAN. */
export async function findLiveProcesses(redis: Redis, prefix: string): Promise<string[]> {
  const signs = new Set<string>();
  for await (const batch of scanKeys(redis, underPrefix(prefix), SCAN_COUNT)) {
    for (const key of batch) {
      const sign = liveProcessSign(prefix, key);
      if (sign) signs.add(sign);
    }
  }
  return [...signs];
}

export interface ApplyOptions {
  /** Migrate even while processes look alive (e.g. heartbeats of workers known to be dead, before their TTL). */
  force?: boolean;
}

/**
 * Carries out a plan (see the header for what is safe to repeat). Throws InvalidInputError
 * `processes_running` (409) while warmpool processes look alive, unless `force`.
 */
export async function applyKeyMigration(redis: Redis, plan: KeyMigrationPlan, options: ApplyOptions = {}): Promise<KeyMigrationResult> {
  assertPrefix(plan.prefix);
  if (!options.force) {
    const live = await findLiveProcesses(redis, plan.prefix);
    if (live.length > 0) throw processesRunning(live);
  }
  const result: KeyMigrationResult = { renamed: countByFamily([]), rewritten: 0, skipped: 0, conflicts: [] };
  for (const chunk of chunks(plan.renames, APPLY_BATCH)) {
    const outcomes = await Promise.all(chunk.map((r) => redis.eval(RENAME_SCRIPT, 2, r.from, r.to) as Promise<string>));
    for (const [i, outcome] of outcomes.entries()) {
      const r = chunk[i] as KeyRename;
      if (outcome === 'renamed') result.renamed[r.family]++;
      else if (outcome === 'conflict') result.conflicts.push(`${r.from} -> ${r.to}`);
      else result.skipped++;
    }
  }
  for (const chunk of chunks(plan.rewrites, APPLY_BATCH)) {
    const done = await Promise.all(chunk.map((w) => redis.eval(REWRITE_SCRIPT, 1, w.key, w.from, w.to) as Promise<number>));
    for (const d of done) {
      if (d === 1) result.rewritten++;
      else result.skipped++;
    }
  }
  return result;
}

function processesRunning(signs: readonly string[]): InvalidInputError {
  const shown = signs.slice(0, 5).join('; ');
  const more = signs.length > 5 ? `; and ${signs.length - 5} more` : '';
  return new InvalidInputError(
    'processes_running',
    `warmpool processes look alive (${shown}${more}). Stop every warmpool process (API, workers, scaler, ` +
      'dispatcher, bulk runs) and let these keys expire, or force the migration if they are known to be dead',
    { status: 409 },
  );
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
