/**
 * The process's BullMQ handles: per Redis client and key prefix, one Queue and one QueueEvents
 * per queue name, shared by everything in the process that uses that client (the API's job
 * queue, queue stats, the bulk chunk queues, the webhook event source). Each user takes a
 * lease; the handles close when the last lease is released, so a user's `close()` never closes
 * a handle another user still reads from.
 *
 * Two kinds of Queue. A producer's writes the queue's settings when it opens (the events
 * stream's maxLen, EVENTS_STREAM_MAX_LEN). A reader's never does (skipMetasUpdate): without it
 * BullMQ would reset maxLen to its default (10,000) on every open, and the webhook event source
 * would lose events once it lags that far (the chaos suite's webhook-down scenario found
 * webhooks that were never delivered). A read takes the producer when the process has one.
 *
 * A QueueEvents opens a blocking connection of its own from the client's options, minus any
 * fail-fast settings: a blocking read waits out an outage and resumes, where a request should
 * fail at once. On a Redis Cluster the client's options are the cluster's, which BullMQ would
 * read as one node's (127.0.0.1:6379): there it gets a cluster client of its own, closed with
 * it. It starts reading from the events stream's last id as of *before* it exists, so an event
 * emitted while its connection is still starting is not lost.
 *
 * The Queues use the client itself; BullMQ does not close a client it was handed: its owner
 * closes it, after releasing its lease.
 */
import { type ConnectionOptions, Queue, QueueEvents, type QueueOptions } from 'bullmq';
import { EVENTS_STREAM_MAX_LEN } from '../contracts/job.ts';
import type { QueueJobData, QueueJobResult } from '../contracts/queue-job.ts';
import { blockingOptions, closeRedis, duplicateClient, isCluster, type RedisClient } from '../redis/client.ts';
import { bullQueueKey } from './bullmq-keys.ts';

/** A queue's BullMQ handle: never handed outside infra/queue (index.ts offers capabilities instead). */
export type JobQueueHandle = Queue<QueueJobData, QueueJobResult>;

/** The QueueEvents events that name a job; a listener gets its id. */
export type QueueEventName = 'active' | 'waiting' | 'delayed' | 'completed' | 'failed' | 'removed' | 'member-ended';

/** Connection errors of a Queue or QueueEvents (the calls that fail also reject). */
export type QueueErrorHandler = (err: Error, queue: string) => void;

export interface QueueLease {
  /** The queue's producer handle: adds jobs; its first open writes the queue's settings. */
  producer(name: string): JobQueueHandle;
  /** A handle for reads that never rewrites the queue's settings. */
  reader(name: string): JobQueueHandle;
  /**
   * Calls `listener` with the job id of each of `events` on the queue, from the moment this
   * resolves (the QueueEvents reads) until the returned function is called or the lease released.
   */
  listen(name: string, events: readonly QueueEventName[], listener: (jobId: string) => void): Promise<() => void>;
  /** Idempotent; closes the handles when no other lease holds them. */
  release(): Promise<void>;
}

/** Client → prefix → its handles. Weak: a client nobody holds takes its (closed) entry with it. */
const registry = new WeakMap<RedisClient, Map<string, SharedQueues>>();

/** A lease on the handles of `redis` under `prefix`; `onError` hears their errors while it is held. */
export function leaseQueues(redis: RedisClient, prefix: string, onError?: QueueErrorHandler): QueueLease {
  let byPrefix = registry.get(redis);
  if (!byPrefix) {
    byPrefix = new Map();
    registry.set(redis, byPrefix);
  }
  let shared = byPrefix.get(prefix);
  if (!shared) {
    const entries = byPrefix;
    shared = new SharedQueues(redis, prefix, () => entries.delete(prefix));
    byPrefix.set(prefix, shared);
  }
  return shared.lease(onError);
}

class SharedQueues {
  private readonly producers = new Map<string, JobQueueHandle>();
  private readonly readers = new Map<string, JobQueueHandle>();
  private readonly events = new Map<string, Promise<QueueEvents>>();
  /** The QueueEvents' own cluster clients: BullMQ does not close a client it was given. */
  private readonly ownClients = new Set<RedisClient>();
  private readonly errorHandlers = new Set<QueueErrorHandler>();
  private leases = 0;

  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly forget: () => void,
  ) {}

  lease(onError: QueueErrorHandler | undefined): QueueLease {
    this.leases++;
    // A wrapper of its own, so two leases handing in the same function each remove only theirs.
    const handler: QueueErrorHandler | undefined = onError && ((err, queue) => onError(err, queue));
    if (handler) this.errorHandlers.add(handler);
    const unlisteners = new Set<() => void>();
    let released: Promise<void> | undefined;
    const assertHeld = () => {
      if (released) throw new Error('the queue lease is closed');
    };
    return {
      producer: (name) => {
        assertHeld();
        return this.producer(name);
      },
      reader: (name) => {
        assertHeld();
        return this.producers.get(name) ?? this.reader(name);
      },
      listen: async (name, events, listener) => {
        assertHeld();
        // Typed as plain emitter calls: `member-ended` is our own event (tombstones.ts), which
        // QueueEvents emits like BullMQ's, but its listener map does not name it.
        const qe = (await this.queueEvents(name)) as unknown as {
          on(event: string, fn: (e: { jobId: string }) => void): void;
          off(event: string, fn: (e: { jobId: string }) => void): void;
        };
        const onEvent = ({ jobId }: { jobId: string }) => listener(jobId);
        const off = () => {
          for (const event of events) qe.off(event, onEvent);
          unlisteners.delete(off);
        };
        if (released) return () => undefined; // released while it opened
        for (const event of events) qe.on(event, onEvent);
        unlisteners.add(off);
        return off;
      },
      release: () => {
        released ??= (async () => {
          for (const off of [...unlisteners]) off();
          if (handler) this.errorHandlers.delete(handler);
          if (--this.leases === 0) await this.close();
        })();
        return released;
      },
    };
  }

  private producer(name: string): JobQueueHandle {
    return this.open(this.producers, name, { streams: { events: { maxLen: EVENTS_STREAM_MAX_LEN } } });
  }

  private reader(name: string): JobQueueHandle {
    return this.open(this.readers, name, { skipMetasUpdate: true });
  }

  private open(into: Map<string, JobQueueHandle>, name: string, options: Omit<QueueOptions, 'connection' | 'prefix'>): JobQueueHandle {
    let q = into.get(name);
    if (!q) {
      q = new Queue<QueueJobData, QueueJobResult>(name, { connection: this.redis, prefix: this.prefix, ...options });
      // An 'error' event with no listener would crash the process.
      q.on('error', this.reportFor(name));
      into.set(name, q);
    }
    return q;
  }

  private reportFor(name: string): (err: Error) => void {
    return (err) => {
      for (const handler of this.errorHandlers) handler(err, name);
    };
  }

  private queueEvents(name: string): Promise<QueueEvents> {
    let pending = this.events.get(name);
    if (!pending) {
      pending = this.openQueueEvents(name);
      this.events.set(name, pending);
    }
    return pending;
  }

  private async openQueueEvents(name: string): Promise<QueueEvents> {
    const last = await this.redis.xrevrange(bullQueueKey(this.prefix, name, 'events'), '+', '-', 'COUNT', 1);
    const lastEventId = last[0]?.[0] ?? '0-0';
    // (Cast: BullMQ declares ioredis' retryStrategy without its `null` return; the value is ioredis' own.)
    const own = isCluster(this.redis) ? duplicateClient(this.redis, blockingOptions({})) : undefined;
    const connection = own ?? (blockingOptions(this.redis.options) as ConnectionOptions);
    const qe = new QueueEvents(name, { connection, prefix: this.prefix, lastEventId });
    if (own) this.ownClients.add(own);
    qe.on('error', this.reportFor(name));
    try {
      await qe.waitUntilReady();
    } catch (err) {
      this.events.delete(name);
      await qe.close().catch(() => undefined);
      if (own) {
        this.ownClients.delete(own);
        await closeRedis(own).catch(() => undefined);
      }
      throw err;
    }
    return qe;
  }

  /** Every Queue and QueueEvents, then their own clients; each runs even if another fails. */
  private async close(): Promise<void> {
    this.forget(); // a lease taken from now on opens fresh handles
    const results = await Promise.allSettled([
      ...[...this.producers.values(), ...this.readers.values()].map((q) => q.close()),
      ...[...this.events.values()].map(async (pending) => (await pending).close()),
    ]);
    await Promise.allSettled([...this.ownClients].map((c) => closeRedis(c)));
    const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    if (errors.length > 0) throw new AggregateError(errors, 'closing the BullMQ queues failed');
  }
}
