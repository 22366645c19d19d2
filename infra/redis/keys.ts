/**
 * Every Redis key warmpool names, in one place, with its Redis Cluster hash tag. A key outside
 * the tag its scripts expect is a production bug on a cluster (CROSSSLOT) that a single node
 * never shows, so no module builds a key by hand: each family is a function here.
 *
 * Every key lies under `<p>:` (QUEUE_PREFIX, which holds no braces: config.ts refuses them, or
 * its tag would win). The hash tag is what Redis Cluster hashes: the text between the first `{`
 * and the next `}` (`hashTag` below). The families, `<p>` = `wp`, `<q>` = a queue's name
 * (`queueName()` in infra/contracts/job.ts, itself the tag `{infer.<model>.<version>}`):
 *
 *   family              example key                              tag              written by                   TTL
 *   --- one queue's slot: BullMQ's scripts touch many keys of a queue at once ---
 *   BullMQ's keys       wp:{infer.m.1}:wait (…:events, :meta, :<id>) {infer.m.1}    infra/queue (BullMQ)          BullMQ's
 *   job tombstone       wp:{infer.m.1}:tomb:<jobId>              {infer.m.1}      infra/queue job-queue (bury)  JOB_RETENTION_S
 *   entry inputs        wp:{infer.m.1}:in:<entryId>  (binary)    {infer.m.1}      infra/queue entry-writer      JOB_RETENTION_S, deleted at the end
 *   entry outputs       wp:{infer.m.1}:out:<entryId> (binary)    {infer.m.1}      worker (intake)               JOB_RETENTION_S
 *   entry skips         wp:{infer.m.1}:skip:<entryId>  (set)     {infer.m.1}      infra/queue tombstones        JOB_RETENTION_S
 *   bulk fair share     wp:{infer.m.1}:bulk-fair  (hash)        {infer.m.1}      infra/queue fair-share        none (reset when no chunk waits)
 *   requests per entry  wp:{infer.m.1}:members-per-entry        {infer.m.1}      infra/queue entry-writer      1 h
 *   rows per request    wp:{infer.m.1}:rows-per-request         {infer.m.1}      infra/queue entry-writer      1 h
 *   canary cursor       wp:canary:cursor:{infer.m.1}             {infer.m.1}      infra/canary outcomes         cursor TTL
 *   canary aggregate    wp:canary:agg:{infer.m.1}:<bucketMs>     {infer.m.1}      infra/canary outcomes         window + 2 buckets
 *   --- {deployments}: a deployment write is one compare-and-set script over both ---
 *   deployments         wp:{deployments}                         {deployments}    infra/deployments             none
 *   deployment history  wp:{deployments}:history:<model>         {deployments}    infra/deployments             none (capped)
 *   shared pools        wp:{deployments}:pools                   {deployments}    infra/deployments pool-store  none
 *   shared pool history wp:{deployments}:pool-history:<pool>     {deployments}    infra/deployments pool-store  none (capped)
 *                       (beside the deployments: a deployment joins only a pool that exists, and a pool
 *                       goes only when no deployment names it, each checked in the script that writes)
 *   --- {webhooks}: the delivery scripts; a cursor lives beside the deliveries it vouches for ---
 *   delivery            wp:{webhooks}:delivery:<id>              {webhooks}       api/webhooks delivery-store   retention, once finished
 *   tenant due set      wp:{webhooks}:due:<tenant>               {webhooks}       api/webhooks delivery-store   none
 *   due tenants         wp:{webhooks}:due-tenants                {webhooks}       api/webhooks delivery-store   none
 *   due set (before)    wp:{webhooks}:due                        {webhooks}       api/webhooks delivery-store   none (drained by claims)
 *   delivery index      wp:{webhooks}:index:<tenant>:<state>     {webhooks}       api/webhooks delivery-store   none (trimmed when listed)
 *   dispatcher cursor   wp:{webhooks}:cursor:{infer.m.1}         {webhooks}       api/webhooks event-source     none
 *   --- {bulk}: a run's counting script touches its keys and the running set ---
 *   running runs        wp:{bulk}:running                        {bulk}           infra/bulk run-store          none
 *   bulk run            wp:{bulk}:run:<ref>[:parts|:objects|:outstanding] {bulk}  infra/bulk run-store          30 days, once ended
 *   bulk run lease      wp:{bulk}:run:<ref>:lease                {bulk}           infra/bulk driver (lease)     lease TTL
 *   active bulk runs    wp:{bulk}:active-runs[:<tenant>] (zsets) {bulk}           infra/bulk active-runs        none (members leave as runs end)
 *                       (<ref> = <tenant>/<runId>: run ids are per tenant; a bare <runId> is a run from before)
 *   --- {<tenant>}: a tenant's stored-bytes ledger, one script over its two keys ---
 *   stored bytes        wp:stored-bytes:{t}:expiry (zset), :sizes (hash) {t}   infra/redis stored-bytes     charges pruned at their expiry; keys at the last
 *   --- no tag: single-key commands, spread over the shards by key ---
 *   job index           wp:job:<jobId>                           -                infra/queue job-queue         JOB_RETENTION_S
 *   result cache        wp:result:<model>:<version>:<digest>     -                infra/redis result-cache      RESULT_CACHE_TTL_S
 *   idempotency         wp:idem:<scope>:<sha256(key)>            -                api/http idempotency          IDEMPOTENCY_TTL_S (60 s pending)
 *   rate limit bucket   wp:ratelimit:<tenant>                    -                api/http rate-limiter         until full again
 *                       (also wp:ratelimit:bytes:<tenant>, a tenant's request-body bytes, and :auth-fail:<address>)
 *   open jobs           wp:open-jobs:<tenant>  (sorted set)      -                infra/redis open-jobs         entries pruned after JOB_RETENTION_S
 *   webhook secret      wp:webhooks:secret:<tenant>              -                api/webhooks secrets          none
 *   heartbeat           wp:workers:<workerId>                    -                worker (heartbeat)            HEARTBEAT_TTL_MS
 *   control state       wp:control-state:<workerId>              -                infra/fleet worker-control    30 s
 *   control channel     wp:control:<workerId>  (pub/sub)         -                infra/fleet worker-control    -
 *   pool holdings       wp:pool-holdings:<workerId>              -                infra/fleet pool-holdings     30 s (re-sent each tick)
 *   holdings doorbell   wp:pool-holdings-bell:<workerId> (pub/sub) -              infra/fleet pool-holdings     -
 *   metrics snapshot    wp:metrics:<owner>                       -                infra/telemetry metrics       a few publish periods
 *   arrival history     wp:arrivals:<model>:<yyyymmdd> (and completions) -        infra/telemetry arrival-history 35 days after the day
 *   dashboard samples   wp:dashboard:<due|counters|samples>:<model> -             api/insights samples          due, counters: PX; samples capped
 *   bulk capacity       wp:bulk:capacity:<model>                 -                infra/deployments capacity    60 s
 *   scaler state        wp:scaler:<leader|memory:<m>|worker-rate:<m>|cold-start:<m>[:pending]> - infra/scaler controller   lock TTL; 1 day; 30 days
 *                       (wp:scaler-shadow:… for a shadow scaler, so it never holds the live one's lock)
 *   scaler decisions    wp:scaler:decisions:<model>              -                infra/scaler decision-log     none (capped)
 *   canary events       wp:canary:events:<model>                 -                infra/canary event-log        none (capped)
 *   canary breach       wp:canary:breach:<model>:<version>       -                infra/canary assessment       2 × max gap
 *
 * A function called with an empty last id gives its family's head, which a script appends ids
 * to (delivery-store) or a SCAN pattern ends with `*` after (heartbeats, metrics).
 *
 * The single-node layout before the hash tags (`wp:infer.m.1:wait`, `wp:deployments`, …) exists
 * only in `warmpool migrate-keys` (key-migration.ts), which moves those keys to these names.
 */

/** The text Redis Cluster hashes for `key`: between the first `{` and the next `}` when not empty; null (the whole key) otherwise. */
export function hashTag(key: string): string | null {
  const open = key.indexOf('{');
  if (open < 0) return null;
  const close = key.indexOf('}', open + 1);
  return close > open + 1 ? key.slice(open + 1, close) : null;
}

// ---- one queue's slot: the queue's name is its tag ----

/** `<p>:<queue>`: what BullMQ puts before each of a queue's keys (its Queue's `qualifiedName`). */
export function queueKeyPrefix(prefix: string, queue: string): string {
  return `${prefix}:${queue}`;
}

/** One of BullMQ's keys of a queue (`wait`, `events`, …), as its Queue's `toKey(type)` names it: for readers that hold no Queue. */
export function queueKey(prefix: string, queue: string, type: string): string {
  return `${queueKeyPrefix(prefix, queue)}:${type}`;
}

/** A job the API ended itself (infra/queue job-queue `bury`): beside the queue's keys, in its slot. */
export function jobTombstoneKey(prefix: string, queue: string, jobId: string): string {
  return queueKey(prefix, queue, `tomb:${jobId}`);
}

/** A queue entry's packed input rows (infra/contracts/entry.ts): written with the entry, deleted when it ends. */
export function entryInputsKey(prefix: string, queue: string, entryId: string): string {
  return queueKey(prefix, queue, `in:${entryId}`);
}

/** A queue entry's packed output rows, written by the worker that completed it. */
export function entryOutputsKey(prefix: string, queue: string, entryId: string): string {
  return queueKey(prefix, queue, `out:${entryId}`);
}

/** Requests per queue entry lately (a decimal), written by the APIs' entry writers once a second: turns entry counts into request counts. */
export function entryMembersKey(prefix: string, queue: string): string {
  return queueKey(prefix, queue, 'members-per-entry');
}

/** Rows per request lately (a decimal), written by the APIs' entry writers beside requests per entry: turns request counts into row counts. */
export function entryRowsKey(prefix: string, queue: string): string {
  return queueKey(prefix, queue, 'rows-per-request');
}

/** The members of a queued entry the API canceled or expired: the worker skips them. */
export function entrySkipKey(prefix: string, queue: string, entryId: string): string {
  return queueKey(prefix, queue, `skip:${entryId}`);
}

/** The id of the last entry of the queue's events stream the canary guard aggregated. */
export function canaryCursorKey(prefix: string, queue: string): string {
  return `${prefix}:canary:cursor:${queue}`;
}

/** One bucket of a queue's outcomes (infra/canary outcomes.ts). */
export function canaryAggKey(prefix: string, queue: string, bucketStartMs: number): string {
  return `${prefix}:canary:agg:${queue}:${bucketStartMs}`;
}

// ---- fixed tags ----

export const DEPLOYMENTS_TAG = '{deployments}';
export const WEBHOOKS_TAG = '{webhooks}';
export const BULK_TAG = '{bulk}';

/** Hash: model → its current deployment record. */
export function deploymentsKey(prefix: string): string {
  return `${prefix}:${DEPLOYMENTS_TAG}`;
}

/** List, newest first: every revision of a model's deployment. */
export function deploymentHistoryKey(prefix: string, model: string): string {
  return `${deploymentsKey(prefix)}:history:${model}`;
}

/** Hash: shared pool name → its current record (infra/contracts/shared-pool.ts). */
export function sharedPoolsKey(prefix: string): string {
  return `${deploymentsKey(prefix)}:pools`;
}

/** List, newest first: every revision of a shared pool. */
export function sharedPoolHistoryKey(prefix: string, pool: string): string {
  return `${deploymentsKey(prefix)}:pool-history:${pool}`;
}

/** Hash: one webhook delivery and its attempts. */
export function webhookDeliveryKey(prefix: string, deliveryId: string): string {
  return `${prefix}:${WEBHOOKS_TAG}:delivery:${deliveryId}`;
}

/** ZSET: pending delivery ids by due time, as stored before the per-tenant sets; claims drain it. */
export function webhookDueKey(prefix: string): string {
  return `${prefix}:${WEBHOOKS_TAG}:due`;
}

/** ZSET: one tenant's pending delivery ids by due time (a claimed one's: its lease's end). */
export function webhookTenantDueKey(prefix: string, tenant: string): string {
  return `${prefix}:${WEBHOOKS_TAG}:due:${tenant}`;
}

/** ZSET: the tenants with a pending delivery, by the due time of their earliest. */
export function webhookDueTenantsKey(prefix: string): string {
  return `${prefix}:${WEBHOOKS_TAG}:due-tenants`;
}

/** ZSET: a tenant's delivery ids in one state, by last change. */
export function webhookIndexKey(prefix: string, tenant: string, state: string): string {
  return `${prefix}:${WEBHOOKS_TAG}:index:${tenant}:${state}`;
}

/** The id of the last entry of a queue's events stream the webhook dispatcher turned into deliveries. */
export function webhookCursorKey(prefix: string, queue: string): string {
  return `${prefix}:${WEBHOOKS_TAG}:cursor:${queue}`;
}

/** Set: the refs of running bulk runs. */
export function bulkRunningKey(prefix: string): string {
  return `${prefix}:${BULK_TAG}:running`;
}

/** Hash: a bulk run's record; `ref` is infra/bulk run-store's `<tenant>/<runId>` (or a bare run id from before run ids were per tenant). */
export function bulkRunKey(prefix: string, ref: string): string {
  return `${prefix}:${BULK_TAG}:run:${ref}`;
}

/** Hash: chunk → its part result. */
export function bulkRunPartsKey(prefix: string, runId: string): string {
  return `${bulkRunKey(prefix, runId)}:parts`;
}

/** Hash: input object → its stats, once read whole. */
export function bulkRunObjectsKey(prefix: string, runId: string): string {
  return `${bulkRunKey(prefix, runId)}:objects`;
}

/** Set: chunks enqueued and not yet counted. */
export function bulkRunOutstandingKey(prefix: string, runId: string): string {
  return `${bulkRunKey(prefix, runId)}:outstanding`;
}

/** The lease of the process driving a run. */
export function bulkRunLeaseKey(prefix: string, runId: string): string {
  return `${bulkRunKey(prefix, runId)}:lease`;
}

/**
 * A tenant's stored-bytes ledger (infra/redis/stored-bytes.ts): `expiry`, a sorted set (charge id
 * → expires at, epoch ms) and `sizes`, a hash (charge id → bytes, plus the running total). The
 * tenant is the tag (tenant names hold no braces: infra/kernel/tenant.ts), so one script reaches both.
 */
export function storedBytesKey(prefix: string, tenant: string, part: 'expiry' | 'sizes'): string {
  return `${prefix}:stored-bytes:{${tenant}}:${part}`;
}

/**
 * ZSET of bulk runs not yet ended (member: ref, score: admitted at, epoch ms): the tenant's when
 * `tenant` is given, all tenants' when it is undefined. `''` gives the tenant family's head
 * (`…:active-runs:`), which infra/bulk run-store's end script appends the run's tenant to.
 */
export function bulkActiveRunsKey(prefix: string, tenant?: string): string {
  const all = `${prefix}:${BULK_TAG}:active-runs`;
  return tenant === undefined ? all : `${all}:${tenant}`;
}

// ---- no tag ----

/** A job's queue name while BullMQ holds it, or its tombstone (JSON) once the API ended it. */
export function jobIndexKey(prefix: string, jobId: string): string {
  return `${prefix}:job:${jobId}`;
}

export function resultCacheKey(prefix: string, model: string, version: string, digest: string): string {
  return `${prefix}:result:${model}:${version}:${digest}`;
}

/** `keyDigest`: the sha256 of the client's Idempotency-Key (never the key itself). */
export function idempotencyKey(prefix: string, scope: string, keyDigest: string): string {
  return `${prefix}:idem:${scope}:${keyDigest}`;
}

/** A token bucket; `bucket` is the tenant. */
export function rateLimitKey(prefix: string, bucket: string): string {
  return `${prefix}:ratelimit:${bucket}`;
}

/** Sorted set: a tenant's accepted jobs not yet ended (member: job id, score: accepted at, epoch ms). */
export function openJobsKey(prefix: string, tenant: string): string {
  return `${prefix}:open-jobs:${tenant}`;
}

/** Hash: a tenant's webhook signing secrets. Not under `{webhooks}`: only single-key commands use it. */
export function webhookSecretKey(prefix: string, tenant: string): string {
  return `${prefix}:webhooks:secret:${tenant}`;
}

/** A worker's heartbeat (DESIGN §6). */
export function workerKey(prefix: string, workerId: string): string {
  return `${prefix}:workers:${workerId}`;
}

/** The pub/sub channel that rings a worker's control doorbell. */
export function controlChannel(prefix: string, workerId: string): string {
  return `${prefix}:control:${workerId}`;
}

/** The last control command sent to a worker: the truth the doorbell points at. */
export function controlStateKey(prefix: string, workerId: string): string {
  return `${prefix}:control-state:${workerId}`;
}

// ---- a shared pool's worker: which models it should hold (infra/fleet/pool-holdings.ts) ----

/** The models a pool worker should hold (JSON): the truth its doorbell points at. */
export function holdingsKey(prefix: string, workerId: string): string {
  return `${prefix}:pool-holdings:${workerId}`;
}

/** The pub/sub channel that rings a pool worker's holdings doorbell. */
export function holdingsChannel(prefix: string, workerId: string): string {
  return `${prefix}:pool-holdings-bell:${workerId}`;
}

/** A process's published metrics snapshot (a worker's id, `scaler`, `dispatcher-<id>`). */
export function metricsKey(prefix: string, owner: string): string {
  return `${prefix}:metrics:${owner}`;
}

/** One UTC day (`yyyymmdd`) of a model's per-minute arrival, completion, late-completion or result-cache-hit counters. */
export function arrivalHistoryKey(
  prefix: string,
  kind: 'arrivals' | 'completions' | 'late' | 'cached',
  model: string,
  day: string,
): string {
  return `${prefix}:${kind}:${model}:${day}`;
}

/** The dashboard's pool samples of a model: `due` (sampling throttle), `counters` (the last read), `samples` (a stream). */
export function dashboardKey(prefix: string, kind: 'due' | 'counters' | 'samples', model: string): string {
  return `${prefix}:dashboard:${kind}:${model}`;
}

/** Hash: late bulk runs' requests for capacity on a model. */
export function bulkCapacityKey(prefix: string, model: string): string {
  return `${prefix}:bulk:capacity:${model}`;
}

/**
 * Hash: a queue's bulk fair-share tags (infra/queue fair-share.ts): run ref → the virtual time its
 * next chunk starts at. In the queue's slot: the script reads the queue's prioritized set.
 */
export function bulkFairShareKey(prefix: string, queue: string): string {
  return queueKey(prefix, queue, 'bulk-fair');
}

/** A shadow scaler keeps its own state, so it never holds the live scaler's lock or bends its memory. */
function scalerNamespace(prefix: string, shadow: boolean): string {
  return `${prefix}:${shadow ? 'scaler-shadow' : 'scaler'}`;
}

/** The scaler's leader lock. */
export function scalerLeaderKey(prefix: string, shadow: boolean): string {
  return `${scalerNamespace(prefix, shadow)}:leader`;
}

/** The policy's memory of a model between ticks. */
export function scalerMemoryKey(prefix: string, shadow: boolean, model: string): string {
  return `${scalerNamespace(prefix, shadow)}:memory:${model}`;
}

/** A model's self-tuning choice in force (infra/scaler/controller-tuning.ts). */
export function scalerTuningKey(prefix: string, shadow: boolean, model: string): string {
  return `${scalerNamespace(prefix, shadow)}:tuning:${model}`;
}

/** A model's measured rows/s per worker. */
export function scalerWorkerRateKey(prefix: string, shadow: boolean, model: string): string {
  return `${scalerNamespace(prefix, shadow)}:worker-rate:${model}`;
}

/** List: a model's measured cold starts. */
export function scalerColdStartKey(prefix: string, shadow: boolean, model: string): string {
  return `${scalerNamespace(prefix, shadow)}:cold-start:${model}`;
}

/** Hash: launches of a model whose cold start is still being timed. */
export function scalerColdStartPendingKey(prefix: string, shadow: boolean, model: string): string {
  return `${scalerColdStartKey(prefix, shadow, model)}:pending`;
}

/** Stream: a model's scaler decisions (a shadow scaler's too, flagged `shadow: true`). */
export function decisionStreamKey(prefix: string, model: string): string {
  return `${prefix}:scaler:decisions:${model}`;
}

/** List, newest first: a model's canary rollbacks. */
export function canaryEventsKey(prefix: string, model: string): string {
  return `${prefix}:canary:events:${model}`;
}

/** A canary version's breach carried between guard ticks. */
export function canaryBreachKey(prefix: string, model: string, version: string): string {
  return `${prefix}:canary:breach:${model}:${version}`;
}
