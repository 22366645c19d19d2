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
 * On a Redis Cluster each queue's stream lies in its own slot (infra/contracts/job.ts), and one XREAD
 * cannot span slots: the source then reads every stream with its own non-blocking XREAD
 * (concurrently, so ioredis batches them per node) and polls every `clusterPollMs` while all
 * are empty. Discovery scans every master.
 */

import type { JobStatus } from '../../infra/contracts/job.ts';
import type { WebhookEvent } from '../../infra/contracts/webhook.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import type { Log } from '../../infra/kernel/log.ts';
import {
  leaseQueues,
  modelQueuesWithEvents,
  type QueueLease,
  type QueueStreamEntries,
  readEventStreams,
  readHeldJob,
} from '../../infra/queue/index.ts';
import { isCluster, type RedisClient } from '../../infra/redis/client.ts';
import { webhookCursorKey } from '../../infra/redis/keys.ts';
import { iso, type JobResource, toJobResource } from '../resources/job-resource.ts';
import type { DeliveryStore } from './delivery-store.ts';

export interface EventSourceDeps {
  /** Plain commands and BullMQ job reads. */
  redis: RedisClient;
  /** A connection of its own for the blocking XREAD; the source disconnects it when stopped. */
  blocking: RedisClient;
  prefix: string;
  clock: Clock;
  store: Pick<DeliveryStore, 'enqueue'>;
  log: Log;
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
  const cursorKey = (queue: string) => webhookCursorKey(deps.prefix, queue);
  /** Queue name → the id of the last entry handled. */
  const cursors = new Map<string, string>();
  let discoveredAt = Number.NEGATIVE_INFINITY;

  async function discover(): Promise<void> {
    for await (const names of modelQueuesWithEvents(deps.redis, deps.prefix)) {
      for (const name of names) {
        if (!cursors.has(name)) cursors.set(name, (await deps.redis.get(cursorKey(name))) ?? '0-0');
      }
    }
    discoveredAt = deps.clock.now();
  }

  /** Stores the delivery an entry calls for, if any; true when one was new. */
  async function handle(queues: QueueLease, name: string, entryId: string, fields: Record<string, string>): Promise<boolean> {
    const event = STREAM_EVENTS[fields.event ?? ''];
    if (!event || !fields.jobId) return false;
    const job = await readHeldJob(queues, name, fields.jobId);
    if (!job?.data.webhook?.events.includes(event)) return false;
    if (event === 'job.failed' && (await job.status()) !== 'failed') return false;
    const payload: WebhookPayload = {
      type: event,
      timestamp: iso(Number(entryId.split('-')[0])),
      data: toJobResource(job.view(EVENT_STATUS[event])),
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
  async function readStreams(names: string[], signal: AbortSignal): Promise<QueueStreamEntries[]> {
    const after = (n: string) => [n, cursors.get(n) ?? '0-0'] as const;
    if (!isCluster(deps.blocking)) {
      return readEventStreams(deps.blocking, deps.prefix, names.map(after), { count: batchSize, blockMs });
    }
    // Non-blocking reads: on the command connection, so the blocking one's disconnect at stop
    // (ioredis' cluster client can queue a command sent while it disconnects, for good) never
    // strands one and close() never waits on it.
    const cluster = deps.redis;
    const replies = await Promise.all(names.map((n) => readEventStreams(cluster, deps.prefix, [after(n)], { count: batchSize })));
    const reply = replies.flat();
    if (reply.length === 0) await deps.clock.sleep(clusterPollMs, signal).catch(() => undefined);
    return reply;
  }

  async function readOnce(queues: QueueLease, signal: AbortSignal): Promise<void> {
    const reply = await readStreams([...cursors.keys()], signal);
    for (const { queue: name, entries } of reply) {
      let added = 0;
      for (const { id, fields } of entries) if (await handle(queues, name, id, fields)) added++;
      const last = entries.at(-1)?.id;
      if (last === undefined) continue;
      await deps.redis.set(cursorKey(name), last);
      cursors.set(name, last);
      if (added > 0) deps.onEnqueued?.();
    }
  }

  async function run(signal: AbortSignal): Promise<void> {
    const stop = () => deps.blocking.disconnect();
    signal.addEventListener('abort', stop, { once: true });
    // The process's shared readers of the queues' jobs (never rewriting a queue's settings).
    const queues = leaseQueues(deps.redis, deps.prefix, (err, queue) =>
      deps.log.warn({ err: err.message, queue }, 'webhook event source queue error'),
    );
    try {
      while (!signal.aborted) {
        try {
          if (deps.clock.now() - discoveredAt >= discoverIntervalMs) await discover();
          if (cursors.size === 0) await deps.clock.sleep(Math.min(discoverIntervalMs, 1000), signal);
          else await readOnce(queues, signal);
        } catch (err) {
          if (signal.aborted) break;
          // Redis away or a job unreadable: the cursor has not moved, so the same entries come again.
          deps.log.warn({ err: errorMessage(err) }, 'webhook event source: read failed; retrying');
          await deps.clock.sleep(1000, signal).catch(() => undefined);
        }
      }
    } finally {
      signal.removeEventListener('abort', stop);
      await queues.release().catch(() => undefined);
    }
  }

  return { run };
}
