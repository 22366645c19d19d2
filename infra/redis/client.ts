/**
 * Redis connections. BullMQ needs `maxRetriesPerRequest: null` on connections it blocks on;
 * every connection here is created on demand (never at import time) and closed by its owner.
 *
 * Single node or Redis Cluster, chosen by REDIS_URL alone (so every process and every child
 * a process spawns agrees from one variable): `redis://…` is one node, and
 * `redis+cluster://[user:pass@]host:port,host:port[,…]` (or `rediss+cluster://` for TLS) is a
 * cluster reached through any of the listed nodes. A cluster client is an ioredis `Cluster`.
 *
 * Why `RedisClient = Redis | Cluster` rather than an interface of our own: both are ioredis
 * Commanders with the same command signatures, so every command call compiles unchanged on
 * the union, while the few things only one node can do (`scanStream`, `SCAN` itself, `MGET`
 * across slots, `duplicate(options)`) stop compiling or are routed through the helpers here
 * (scanKeys, getMany, duplicateClient), which visit every master of a cluster.
 */
import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import { type ClusterAddress, parseClusterUrl } from '../kernel/redis-url.ts';

/** A connection to one Redis node or to a Redis Cluster (see the header). */
export type RedisClient = Redis | Cluster;

/** Type guard: the client talks to a Redis Cluster (also for a narrowed `Pick<RedisClient, …>`). */
export function isCluster(redis: object): redis is Cluster {
  return redis instanceof Cluster || (redis as { isCluster?: boolean }).isCluster === true;
}

/**
 * ioredis reconnects by itself and fails the commands issued meanwhile, so callers see the
 * outage where it matters; without a listener it would also print every connection error as
 * "Unhandled error event". `onError` receives them (default: ignored, the commands report).
 *
 * For a cluster, `options` apply to every node connection; `enableOfflineQueue` also to the
 * cluster's own queue (commands issued before the slot map is known or while it is refreshed).
 */
export function createRedis(url: string, options: RedisOptions = {}, onError: (err: Error) => void = () => {}): RedisClient {
  const base: RedisOptions = { maxRetriesPerRequest: null, enableReadyCheck: true, lazyConnect: false, ...options };
  const cluster = parseClusterUrl(url);
  const redis = cluster ? new Cluster(cluster.nodes, clusterOptions(cluster, base)) : new Redis(url, base);
  redis.on('error', onError);
  return redis;
}

function clusterOptions(address: ClusterAddress, base: RedisOptions): ClusterOptions {
  const { enableOfflineQueue, enableReadyCheck, lazyConnect, enableAutoPipelining: _autoPipelining, ...nodeOptions } = base;
  const redisOptions: RedisOptions = { ...nodeOptions };
  if (address.username !== undefined) redisOptions.username = address.username;
  if (address.password !== undefined) redisOptions.password = address.password;
  if (address.tls) redisOptions.tls = {};
  const options: ClusterOptions = { redisOptions, enableReadyCheck: enableReadyCheck ?? true, lazyConnect: lazyConnect ?? false };
  if (enableOfflineQueue !== undefined) options.enableOfflineQueue = enableOfflineQueue;
  // No auto-pipelining on a cluster whatever was asked: ioredis' cluster auto-pipeline cannot run
  // the commands BullMQ defines (its Lua scripts: "pipeline[functionName] is not a function").
  return options;
}

/**
 * A second connection to the same Redis with the same options (plus `overrides`): for blocking
 * reads and subscriptions, which must not share a connection with ordinary commands.
 */
export function duplicateClient(redis: RedisClient, overrides: RedisOptions = {}): RedisClient {
  if (!isCluster(redis)) return redis.duplicate(overrides);
  const { enableOfflineQueue, enableAutoPipelining: _autoPipelining, ...nodeOverrides } = overrides;
  const options: ClusterOptions = { ...redis.options, redisOptions: { ...redis.options.redisOptions, ...nodeOverrides } };
  if (enableOfflineQueue !== undefined) options.enableOfflineQueue = enableOfflineQueue;
  return redis.duplicate(undefined, options);
}

/** What scanKeys needs: SCAN (a client, a Cluster, or a narrow test double of one node). */
export interface KeyScanner {
  scan(cursor: string, match: 'MATCH', pattern: string, count: 'COUNT', n: number): Promise<[string, string[]]>;
}

/** What getMany needs. */
export interface ValueReader {
  mget(keys: string[]): Promise<Array<string | null>>;
  get(key: string): Promise<string | null>;
}

/** The connections that hold keys: the masters of a cluster, or the one node. */
export async function masterNodes<R extends object>(redis: R): Promise<Array<R | Redis>> {
  if (!isCluster(redis)) return [redis];
  // The node list is filled in from the slot map once the cluster is ready: a command waits
  // for that (or fails at once when the offline queue is off, like any command during an outage).
  if (redis.status !== 'ready') await redis.ping();
  return redis.nodes('master');
}

/**
 * Every key matching `pattern`, batch by batch. On a cluster SCAN only sees the node it is
 * sent to, so each master is scanned in turn; a key may be reported twice if slots move
 * meanwhile (callers treat the result as a set).
 */
export async function* scanKeys(redis: KeyScanner, pattern: string, count = 500): AsyncGenerator<string[]> {
  for (const node of await masterNodes(redis)) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', count);
      cursor = next;
      if (batch.length > 0) yield batch;
    } while (cursor !== '0');
  }
}

/**
 * MGET for keys of any slots: one MGET on a single node; on a cluster one GET per key (run
 * concurrently, so ioredis pipelines them per node), since MGET across slots is refused.
 */
export async function getMany(redis: ValueReader, keys: readonly string[]): Promise<Array<string | null>> {
  if (keys.length === 0) return [];
  if (!isCluster(redis)) return redis.mget([...keys]);
  return Promise.all(keys.map((key) => redis.get(key)));
}

/** Deletes keys of any slots (DEL of several keys on a cluster needs them in one slot). */
export async function deleteMany(redis: Pick<RedisClient, 'del'>, keys: readonly string[]): Promise<number> {
  if (keys.length === 0) return 0;
  if (!isCluster(redis)) return redis.del(...keys);
  const counts = await Promise.all(keys.map((key) => redis.del(key)));
  return counts.reduce((a, b) => a + b, 0);
}

/**
 * `{name}`: a Redis Cluster hash tag. Keys that contain the same tag (the first `{…}` in the
 * key) hash to the same slot, which Lua scripts, MULTI and multi-key commands over them need.
 * On a single node it is just part of the name.
 */
export function hashTag(name: string): string {
  return `{${name}}`;
}

/**
 * Options for a connection that answers on a request's path (the API's): while Redis is
 * unreachable a command fails at once instead of waiting in ioredis' offline queue until
 * Redis returns. Without them a submission made during an outage hangs for as long as the
 * outage lasts, and is then carried out after its client has given up (a job nobody was told
 * about). Never for BullMQ Workers or QueueEvents: their blocking reads must wait out outages.
 *
 * - enableOfflineQueue false: no queueing while disconnected or reconnecting;
 * - maxRetriesPerRequest 0: a command already sent when the connection drops is failed, not
 *   resent after the reconnect (its effect is unknown: the caller's 503 says "retry");
 * - commandTimeout: a Redis that accepts connections but does not answer (paused, swapping)
 *   fails the command after this long instead of holding the request;
 * - retryStrategy: reconnect soon after Redis returns.
 */
export const FAIL_FAST_REDIS_OPTIONS: Readonly<RedisOptions> = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  commandTimeout: 5_000,
  // Reconnect attempts at most 500 ms apart (ioredis' default backs off to 2 s): while the
  // connection is down every request is a 503, so coming back soon after Redis does matters.
  retryStrategy: (times) => Math.min(times * 50, 500),
};

/** Options for a blocking connection (BullMQ QueueEvents/Worker) derived from a fail-fast one's. */
export function blockingOptions(options: RedisOptions): RedisOptions {
  // No auto-pipelining either: a blocking read must not hold other commands behind it.
  return { ...options, enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined, enableAutoPipelining: false };
}

const UNAVAILABLE_MESSAGES = [
  /Stream isn't writeable/i,
  /Connection is closed/i,
  /Command timed out/i,
  /max retries per request/i,
  // Replies of a Redis that is up but cannot serve yet (loading its AOF after a restart) or now.
  /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|READONLY)\b/,
  // ioredis' Cluster while its nodes are unreachable (it has no offline queue on the API's connections).
  /Cluster isn't ready/i,
  /None of startup nodes is available/i,
  /Failed to refresh slots cache/i,
  /Too many Cluster redirections/i,
  /^(Cluster|Node) is disconnected/i,
];
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN', 'EHOSTUNREACH']);

/**
 * True when `err` (or one of its causes) says Redis could not be reached or could not serve,
 * rather than that the command was wrong: the API answers 503 `unavailable` with Retry-After.
 * The connection codes (ECONNREFUSED, …) are matched on any cause, so a store reached over
 * TCP that is down (S3: the registry behind GET /v1/models) is answered the same way.
 */
export function isUnavailableError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e.name === 'MaxRetriesPerRequestError') return true;
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
    if (UNAVAILABLE_MESSAGES.some((re) => re.test(e instanceof Error ? e.message : ''))) return true;
    if (e instanceof AggregateError && e.errors.some(isUnavailableError)) return true;
  }
  return false;
}

/**
 * True when `err` (or a cause) is Redis refusing a write at its `maxmemory` under `noeviction`
 * (`OOM command not allowed when used memory > 'maxmemory'`): up, but full until something is
 * freed. The API answers 503 `storage_full` (api/http/errors.ts); a worker's attempt fails and
 * is retried, the job kept.
 */
export function isStorageFullError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (/^OOM\b/.test(e.message)) return true;
    if (e instanceof AggregateError && e.errors.some(isStorageFullError)) return true;
  }
  return false;
}

/** Closes politely (QUIT), falling back to disconnect when the server is already gone. */
export async function closeRedis(redis: RedisClient): Promise<void> {
  if (redis.status === 'end') return;
  // QUIT waits for its reply, which is queued while the connection is down (a process stopping
  // with Redis unreachable waited for it until its drain bound): only a ready connection says goodbye.
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}
