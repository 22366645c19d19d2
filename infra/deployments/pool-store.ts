/**
 * Shared pools (infra/contracts/shared-pool.ts) in Redis, beside the deployments that join them:
 *
 *   <prefix>:{deployments}:pools                 hash; field = pool name, value = the current record (JSON)
 *   <prefix>:{deployments}:pool-history:<pool>   list, newest first: every revision written, capped
 *
 * Writes are revisions, compare-and-set as a deployment's are (revision-commit.ts): 1, 2, 3… per
 * name, never reused, even across a delete; `ifRevision` pins the one expected (409
 * `revision_conflict`). `createdAt` is the first revision's since the pool was last deleted.
 *
 * A pool is deleted only when no deployment names it: the delete script reads the deployments
 * hash in the same slot and, when some still name the pool, refuses (409 `pool_in_use`) naming
 * them. With the deployment commit's own check (a deployment joins only a pool that exists),
 * no deployment ever names a pool that is gone.
 */

import { type SharedPool, type SharedPoolConfig, type SharedPoolInput, validateSharedPool } from '../contracts/shared-pool.ts';
import { InvalidInputError, NotFoundError } from '../kernel/errors.ts';
import type { RedisClient } from '../redis/client.ts';
import { deploymentsKey, sharedPoolHistoryKey, sharedPoolsKey } from '../redis/keys.ts';
import { DEFAULT_HISTORY_LIMIT, type WriteOptions } from './deployment-store.ts';
import { REVISION_COMMIT_SCRIPT } from './revision-commit.ts';

export interface SharedPoolStore {
  get(name: string): Promise<SharedPool | null>;
  /** Every pool, by name. */
  list(): Promise<SharedPool[]>;
  /** Replaces the whole config (validated). */
  put(input: SharedPoolInput, options?: WriteOptions): Promise<SharedPool>;
  /** Read-modify-write: `change` gets the current record (null when none) and returns the whole new config. */
  update(name: string, change: (current: SharedPool | null) => SharedPoolInput, options?: WriteOptions): Promise<SharedPool>;
  /** The kept revisions, newest first (the current one included). */
  history(name: string): Promise<SharedPool[]>;
  /** The models whose deployments name the pool, sorted (none for a pool that does not exist). */
  members(name: string): Promise<string[]>;
  /** Deletes the pool: false when there is none; 409 `pool_in_use`, naming them, while deployments name it. */
  remove(name: string): Promise<boolean>;
}

export interface SharedPoolStoreOptions {
  now?: () => number;
  /** Revisions kept per pool (default 20). */
  historyLimit?: number;
}

/** Lost races in a row before an unpinned write gives up (only under pathological contention). */
const MAX_WRITE_ATTEMPTS = 10;

/**
 * Deletes the pool unless a deployment names it. KEYS: the pools hash, the deployments hash.
 * ARGV: pool name. Returns {'absent'}, {'deleted'} or {'in_use', model…}.
 */
const DELETE_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {'absent'} end
local members = {'in_use'}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local ok, d = pcall(cjson.decode, all[i + 1])
  if ok and type(d) == 'table' and d.pool == ARGV[1] then members[#members + 1] = all[i] end
end
if #members > 1 then return members end
redis.call('HDEL', KEYS[1], ARGV[1])
return {'deleted'}
`;

export function createSharedPoolStore(redis: RedisClient, prefix: string, options: SharedPoolStoreOptions = {}): SharedPoolStore {
  const { now = Date.now, historyLimit = DEFAULT_HISTORY_LIMIT } = options;
  const key = sharedPoolsKey(prefix);
  const historyKey = (name: string) => sharedPoolHistoryKey(prefix, name);

  const get = async (name: string) => {
    const raw = await redis.hget(key, name);
    return raw ? parsePool(raw) : null;
  };

  const update: SharedPoolStore['update'] = async (name, change, writeOptions = {}) => {
    for (let attempt = 1; ; attempt++) {
      const [current, head] = await Promise.all([get(name), redis.lindex(historyKey(name), 0)]);
      const currentRevision = current?.revision ?? 0;
      if (writeOptions.ifRevision !== undefined && writeOptions.ifRevision !== currentRevision) {
        throw revisionConflict(name, writeOptions.ifRevision, currentRevision);
      }
      const input = change(current);
      if (input.name !== name) throw new InvalidInputError('invalid_pool', `the change is for pool "${input.name}", not "${name}"`);
      const latest = Math.max(currentRevision, head ? parsePool(head).revision : 0);
      const at = new Date(now()).toISOString();
      const record = toRecord(validateSharedPool(input), latest + 1, current?.createdAt ?? at, at);
      const expectedCurrent = current ? currentRevision : -1;
      const args = [name, JSON.stringify(record), expectedCurrent, latest, historyLimit, ''];
      const outcome = await redis.eval(REVISION_COMMIT_SCRIPT, 3, key, historyKey(name), key, ...args);
      if (outcome === 'ok') return record;
      // Lost a race: the next pass re-reads (and answers 409 when the caller pinned a revision).
      if (attempt >= MAX_WRITE_ATTEMPTS) throw new Error(`pool ${name}: ${attempt} writes in a row lost a race`);
    }
  };

  return {
    get,
    update,
    put: (input, writeOptions) => update(input.name, () => input, writeOptions),
    async list() {
      const all = await redis.hgetall(key);
      return Object.values(all)
        .map(parsePool)
        .sort((a, b) => a.name.localeCompare(b.name));
    },
    history: async (name) => (await redis.lrange(historyKey(name), 0, -1)).map(parsePool),
    async members(name) {
      const all = await redis.hgetall(deploymentsKey(prefix));
      return Object.entries(all)
        .filter(([, raw]) => poolOf(raw) === name)
        .map(([model]) => model)
        .sort();
    },
    async remove(name) {
      const [outcome, ...members] = (await redis.eval(DELETE_SCRIPT, 2, key, deploymentsKey(prefix), name)) as string[];
      if (outcome === 'in_use') throw poolInUse(name, members.sort());
      return outcome === 'deleted';
    },
  };
}

function toRecord(input: SharedPoolInput, revision: number, createdAt: string, updatedAt: string): SharedPool {
  const { name, ...config } = input;
  return { name, ...(config satisfies SharedPoolConfig), revision, createdAt, updatedAt };
}

/** The pool a stored deployment names; undefined for its own pool (and, as in the delete script, for a record that is not JSON). */
function poolOf(raw: string): unknown {
  try {
    return (JSON.parse(raw) as { pool?: unknown }).pool;
  } catch {
    return undefined;
  }
}

function parsePool(raw: string): SharedPool {
  return JSON.parse(raw) as SharedPool;
}

function revisionConflict(name: string, expected: number, actual: number): InvalidInputError {
  return new InvalidInputError(
    'revision_conflict',
    `pool ${name} is at revision ${actual}, not ${expected}: read it again and reapply your change`,
    { status: 409 },
  );
}

function poolInUse(name: string, members: readonly string[]): InvalidInputError {
  const shown = members.length > 10 ? `${members.slice(0, 10).join(', ')} and ${members.length - 10} more` : members.join(', ');
  return new InvalidInputError(
    'pool_in_use',
    `pool ${name} still serves ${members.length === 1 ? 'deployment' : `${members.length} deployments`} ${shown}: ` +
      `move ${members.length === 1 ? 'it' : 'them'} out first (warmpool deploy M --pool none, or another pool)`,
    { status: 409 },
  );
}

/** 404 `pool_not_found`, for readers of one pool. */
export function poolNotFound(name: string): NotFoundError {
  return new NotFoundError('pool_not_found', `pool ${name} does not exist`);
}
