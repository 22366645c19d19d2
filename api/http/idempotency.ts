/**
 * Idempotency keys (issue 3 §1): the same key from the same tenant gets the first request's
 * answer back for `ttlS`; the same key with a different request is refused (409), because a
 * client that reuses a key for new work has a bug we should surface, not paper over.
 *
 * One key's states, in Redis at `<prefix>:idem:<scope>:<sha256(key)>`:
 *
 *   (absent) --claim wins SET NX--> pending {fingerprint, token}   short TTL: a crashed holder frees it
 *   pending  --commit(value)------> done {fingerprint, value}      kept ttlS
 *   pending  --release()----------> (absent)                       the request failed; a retry may claim
 *
 * A claim that loses the SET NX race reads the record: another fingerprint → 409
 * `idempotency_key_reused`; `done` → a replay of its value; `pending` → it polls until `done`
 * (or absent, then it claims again), up to `waitMs`, then 409 `idempotency_key_in_use`. So two
 * concurrent identical requests create one job. commit and release act only while the record
 * is still this claim's own pending marker (compare-and-set in one script).
 */
import { createHash, randomBytes } from 'node:crypto';
import { type Clock, systemClock } from '../../infra/kernel/clock.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { idempotencyKey } from '../../infra/redis/keys.ts';

/** The slice of ioredis this module uses. */
export interface IdempotencyRedis {
  set(key: string, value: string, ex: 'EX', seconds: number, nx: 'NX'): Promise<'OK' | null>;
  get(key: string): Promise<string | null>;
  eval(script: string, numKeys: number, ...args: Array<string | number>): Promise<unknown>;
}

export interface IdempotencyOptions {
  /** Key prefix (QUEUE_PREFIX). */
  prefix: string;
  /** How long a finished request's answer is replayed (IDEMPOTENCY_TTL_S). */
  ttlS: number;
  /** How long an unfinished claim holds the key if its holder dies; default 60 s. */
  pendingTtlS?: number;
  /** How long a concurrent duplicate waits for the first request's answer; default 10 s. */
  waitMs?: number;
  /** Poll period while waiting; default 25 ms. */
  pollMs?: number;
  clock?: Clock;
}

export type IdempotencyClaim<T> = { kind: 'new'; commit(value: T): Promise<void>; release(): Promise<void> } | { kind: 'replay'; value: T };

export interface IdempotencyStore {
  /**
   * `scope` separates tenants; `fingerprint` identifies the request (a hash of what it asks).
   * The value given to commit must be JSON; a replay returns it parsed, typed as the caller says.
   * `recover`, asked once when another claim is pending, finds that claim's work if it was done
   * (its holder may have died before commit): its value is then replayed at once.
   */
  claim<T>(scope: string, key: string, fingerprint: string, recover?: () => Promise<T | undefined>): Promise<IdempotencyClaim<T>>;
}

type IdempotencyRecord = { state: 'pending'; fingerprint: string; token: string } | { state: 'done'; fingerprint: string; value: unknown };

// Both act only if the key still holds exactly this claim's pending record.
const COMMIT = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  return 1
end
return 0`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

export function createIdempotencyStore(redis: IdempotencyRedis, options: IdempotencyOptions): IdempotencyStore {
  const clock = options.clock ?? systemClock;
  const pendingTtlS = options.pendingTtlS ?? 60;
  const waitMs = options.waitMs ?? 10_000;
  const pollMs = options.pollMs ?? 25;

  function newClaim<T>(redisKey: string, pending: string): IdempotencyClaim<T> {
    return {
      kind: 'new',
      async commit(value) {
        const fingerprint = (JSON.parse(pending) as IdempotencyRecord).fingerprint;
        const done = JSON.stringify({ state: 'done', fingerprint, value } satisfies IdempotencyRecord);
        await redis.eval(COMMIT, 1, redisKey, pending, done, options.ttlS);
      },
      async release() {
        await redis.eval(RELEASE, 1, redisKey, pending);
      },
    };
  }

  return {
    async claim<T>(scope: string, key: string, fingerprint: string, recover?: () => Promise<T | undefined>): Promise<IdempotencyClaim<T>> {
      const redisKey = idempotencyKey(options.prefix, scope, sha256(key));
      const started = clock.now();
      let recovering = recover;
      for (;;) {
        const pending = JSON.stringify({ state: 'pending', fingerprint, token: randomBytes(9).toString('base64url') });
        if ((await redis.set(redisKey, pending, 'EX', pendingTtlS, 'NX')) === 'OK') return newClaim<T>(redisKey, pending);
        const raw = await redis.get(redisKey);
        if (raw !== null) {
          const record = JSON.parse(raw) as IdempotencyRecord;
          if (record.fingerprint !== fingerprint) {
            throw new InvalidInputError(
              'idempotency_key_reused',
              'this Idempotency-Key was already used for a different request (the model, version or body differ); send a new key for new work',
              { status: 409 },
            );
          }
          if (record.state === 'done') return { kind: 'replay', value: record.value as T };
          if (recovering) {
            const found = await recovering();
            recovering = undefined;
            if (found !== undefined) return { kind: 'replay', value: found };
          }
        }
        if (clock.now() - started >= waitMs) {
          throw new InvalidInputError(
            'idempotency_key_in_use',
            'a request with this Idempotency-Key is still being processed; retry it in a moment',
            { status: 409 },
          );
        }
        await clock.sleep(pollMs);
      }
    },
  };
}

function sha256(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}
