/**
 * Where webhook events come from: the events stream BullMQ writes for every queue
 * (`<prefix>:<queue>:events`). The source discovers the model queues by SCAN every few seconds,
 * reads all their streams with one blocking XREAD, and turns job transitions into deliveries:
 *
 *   active                              → job.started   (only when the job's webhook asks for it)
 *   completed                           → job.succeeded
 *   failed, and the job is now `failed` → job.failed    (an attempt that will be retried is not)
 *
 * At least once: a queue's cursor (`<prefix>:{webhooks}:cursor:<queue>`) advances only after the
 * deliveries of the entries before it are stored, so a crash re-reads some entries, and the
 * store's idempotent enqueue (the delivery id is derived from job id and event) drops the
 * repeats. A queue seen for the first time is read from its start for the same reason.
 * The cursor shares the delivery store's hash tag, so on a Redis Cluster it lives on the same
 * node as the deliveries it vouches for: a node that loses its last writes (SIGKILL under
 * `appendfsync everysec`) loses a delivery and the cursor past it together — an AOF keeps a
 * prefix of the writes — and never keeps a cursor that moved past a delivery it lost.
 * Events trimmed from a stream before they were read are lost: see the stream's maxLen.
 *
 * On a Redis Cluster each queue's stream lies in its own slot (job-contract.ts), and one XREAD
 * cannot span slots: the source then reads every stream with its own non-blocking XREAD
 * (concurrently, so ioredis batches them per node) and polls every `clusterPollMs` while all
 * are empty. Discovery scans every master.
 */
import { Job, Queue } from 'bullmq';
import { isCluster, scanKeys, type RedisClient } from '../../infra/redis/client.ts';
import { webhookCursorKey } from '../../infra/redis/keys.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import { jobView } from '../../infra/queue/job-queue.ts';
import type { JobData, JobResult, JobStatus } from '../../infra/contracts/job.ts';
import type { WebhookEvent } from '../../infra/contracts/webhook.ts';
import { iso, toJobResource, type JobResource } from '../resources/job-resource.ts';
import type { DeliveryStore } from './delivery-store.ts';

export interface EventSourceLog {
  warn(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface EventSourceDeps {
  /** Plain commands and BullMQ job reads. */
  redis: RedisClient;
  /** A connection of its own for the blocking XREAD; the source disconnects it when stopped. */
  blocking: RedisClient;
  prefix: string;
  clock: Clock;
  store: Pick<DeliveryStore, 'enqueue'>;
  log: EventSourceLog;
  /** Called after new deliveries are stored, to wake the delivery loop. */
  onEnqueued?: () => void;
  discoverIntervalMs?: number;
  blockMs?: number;
  batchSize?: number;
  /** Redis Cluster only: the pause between reads that found nothing. Default 100 ms. */
  clusterPollMs?: number;
}

export interface WebhookPayload {
  type: WebhookEvent;
  /** When the event happened (ISO 8601). */
  timestamp: string;
  data: JobResource;
}

const STREAM_EVENTS: Record<string, WebhookEvent> = {
  active: 'job.started',
  completed: 'job.succeeded',
  failed: 'job.failed',
};

const EVENT_STATUS: Record<WebhookEvent, JobStatus> = {
  'job.started': 'running',
  'job.succeeded': 'succeeded',
  'job.failed': 'failed',
};

/** The webhook-id of a job's event: the same on every re-read and every retry. */
export function deliveryId(jobId: string, event: WebhookEvent): string {
  return `msg_${jobId}_${event.slice('job.'.length)}`;
}

export function createEventSource(deps: EventSourceDeps): { run(signal: AbortSignal): Promise<void> } {
  const discoverIntervalMs = deps.discoverIntervalMs ?? 3000;
  const blockMs = deps.blockMs ?? 1000;
  const batchSize = deps.batchSize ?? 100;
  const clusterPollMs = deps.clusterPollMs ?? 100;
  const streamPrefix = `${deps.prefix}:`;
  const cursorKey = (queue: string) => webhookCursorKey(deps.prefix, queue);
  /** Queue name → the id of the last entry handled. */
  const cursors = new Map<string, string>();
  const queues = new Map<string, Queue<JobData, JobResult>>();
  let discoveredAt = Number.NEGATIVE_INFINITY;

  async function discover(): Promise<void> {
    // Queue names are `{infer.<model>.<version>}` (job-contract.ts).
    for await (const keys of scanKeys(deps.redis, `${streamPrefix}{infer.*}:events`, 1000)) {
      for (const key of keys) {
        const name = key.slice(streamPrefix.length, -':events'.length);
        if (!cursors.has(name)) cursors.set(name, (await deps.redis.get(cursorKey(name))) ?? '0-0');
      }
    }
    discoveredAt = deps.clock.now();
  }

  function queue(name: string): Queue<JobData, JobResult> {
    let q = queues.get(name);
    if (!q) {
      // skipMetasUpdate: a reader must not reset the producer's queue settings (events maxLen).
      q = new Queue<JobData, JobResult>(name, { connection: deps.redis, prefix: deps.prefix, skipMetasUpdate: true });
      q.on('error', (err) => deps.log.warn({ err: err.message, queue: name }, 'webhook event source queue error'));
      queues.set(name, q);
    }
    return q;
  }

  /** Stores the delivery an entry calls for, if any; true when one was new. */
  async function handle(name: string, entryId: string, fields: Record<string, string>): Promise<boolean> {
    const event = STREAM_EVENTS[fields.event ?? ''];
    if (!event || !fields.jobId) return false;
    const job = await Job.fromId<JobData, JobResult>(queue(name), fields.jobId);
    if (!job?.id || !job.data.webhook?.events.includes(event)) return false;
    if (event === 'job.failed' && (await job.getState()) !== 'failed') return false;
    const payload: WebhookPayload = {
      type: event,
      timestamp: iso(Number(entryId.split('-')[0])),
      data: toJobResource(jobView(job, EVENT_STATUS[event])),
    };
    return deps.store.enqueue(
      {
        id: deliveryId(job.id, event),
        tenant: job.data.tenant,
        jobId: job.id,
        event,
        url: job.data.webhook.url,
        payload: JSON.stringify(payload),
      },
      deps.clock.now(),
    );
  }

  /** The streams' entries after their cursors: one blocking XREAD, or on a cluster one read per stream. */
  async function readStreams(names: string[], signal: AbortSignal): Promise<StreamReply> {
    const key = (n: string) => `${streamPrefix}${n}:events`;
    if (!isCluster(deps.blocking)) {
      const streams = [...names.map(key), ...names.map((n) => cursors.get(n) ?? '0-0')];
      return ((await deps.blocking.xread('COUNT', batchSize, 'BLOCK', blockMs, 'STREAMS', ...streams)) as StreamReply | null) ?? [];
    }
    // Non-blocking reads: on the command connection, so the blocking one's disconnect at stop
    // (ioredis' cluster client can queue a command sent while it disconnects, for good) never
    // strands one and close() never waits on it.
    const cluster = deps.redis;
    const replies = await Promise.all(
      names.map(
        async (n) => ((await cluster.xread('COUNT', batchSize, 'STREAMS', key(n), cursors.get(n) ?? '0-0')) as StreamReply | null) ?? [],
      ),
    );
    const reply = replies.flat();
    if (reply.length === 0) await deps.clock.sleep(clusterPollMs, signal).catch(() => undefined);
    return reply;
  }

  async function readOnce(signal: AbortSignal): Promise<void> {
    const reply = await readStreams([...cursors.keys()], signal);
    for (const [key, entries] of reply) {
      const name = key.slice(streamPrefix.length, -':events'.length);
      let added = 0;
      for (const [id, flat] of entries) if (await handle(name, id, pairs(flat))) added++;
      const last = entries.at(-1)?.[0];
      if (last === undefined) continue;
      await deps.redis.set(cursorKey(name), last);
      cursors.set(name, last);
      if (added > 0) deps.onEnqueued?.();
    }
  }

  async function run(signal: AbortSignal): Promise<void> {
    const stop = () => deps.blocking.disconnect();
    signal.addEventListener('abort', stop, { once: true });
    try {
      while (!signal.aborted) {
        try {
          if (deps.clock.now() - discoveredAt >= discoverIntervalMs) await discover();
          if (cursors.size === 0) await deps.clock.sleep(Math.min(discoverIntervalMs, 1000), signal);
          else await readOnce(signal);
        } catch (err) {
          if (signal.aborted) break;
          // Redis away or a job unreadable: the cursor has not moved, so the same entries come again.
          deps.log.warn({ err: (err as Error).message }, 'webhook event source: read failed; retrying');
          await deps.clock.sleep(1000, signal).catch(() => undefined);
        }
      }
    } finally {
      signal.removeEventListener('abort', stop);
      await Promise.allSettled([...queues.values()].map((q) => q.close()));
    }
  }

  return { run };
}

type StreamReply = Array<[string, Array<[string, string[]]>]>;

function pairs(flat: string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i] as string] = flat[i + 1] as string;
  return fields;
}
