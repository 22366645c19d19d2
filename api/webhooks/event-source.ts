/**
 * Where webhook events come from: the events stream BullMQ writes for every queue
 * (`<prefix>:<queue>:events`). The source discovers the model queues by SCAN every few seconds,
 * reads all their streams with one blocking XREAD, and turns job transitions into deliveries.
 * A stream event names a BullMQ job, which carries one request (a job from before queue
 * entries) or several (an entry's members, infra/contracts/entry.ts); each request whose
 * webhook asks for the event gets its own delivery:
 *
 *   active                               → job.started    (not for a member canceled while queued,
 *                                                           nor one taken past its deadline: the
 *                                                           worker refuses it, it never starts)
 *   completed                            → the request's own status: succeeded → job.succeeded,
 *                                          failed (a member failed alone: bad input, its deadline)
 *                                          → job.failed, canceled (skipped) → nothing
 *   failed, and the request is now failed → job.failed    (an attempt that will be retried is not)
 *   buried (the API ended a queued request:  → job.failed    (data.status `failed`, error
 *     past its deadline, or canceled)                       `deadline_exceeded`; or data.status
 *                                                           `canceled`, error `canceled`)
 *
 * `buried` is written by the script that ends the request (infra/queue/tombstones.ts) and carries
 * the request's final view and webhook, so it delivers even when the entry that held the request
 * is gone by the time the event is read. Every way a request ends therefore comes through this
 * stream: a worker's outcome (completed, failed), the API's deadline expiry or cancel (buried).
 * A cancel is delivered as `job.failed`: every webhook that asks to hear of failures (the
 * default does) hears of it, and the payload says what happened. `member-ended` (the followers'
 * hint for the same end) and every other event deliver nothing.
 *
 * At least once: a queue's cursor (`<prefix>:{webhooks}:cursor:<queue>`) advances only after the
 * deliveries of the entries before it are stored, so a crash re-reads some entries, and the
 * store's idempotent enqueue (the delivery id is derived from the request's id and event) drops
 * the repeats. A queue seen for the first time is read from its start for the same reason.
 * The cursor shares the delivery store's hash tag, so on a Redis Cluster it lives on the same
 * node as the deliveries it vouches for: a node that loses its last writes (SIGKILL under
 * `appendfsync everysec`) loses a delivery and the cursor past it together — an AOF keeps a
 * prefix of the writes — and never keeps a cursor that moved past a delivery it lost.
 * Events trimmed from a stream before they were read are lost: see the stream's maxLen.
 *
 * A payload is `{type, timestamp, data}`, `data` the job's resource as its event stream sends it
 * (job-resource.ts's boundedJobResource): past `maxJsonOutputElements` (MAX_JSON_OUTPUT_ELEMENTS,
 * counted from the outputs' shapes) the outputs are left out and `outputsOmitted` says how many
 * and how to read them binary, so a job of millions of outputs makes a delivery of a few hundred
 * bytes, stored once and sent per attempt, instead of tens of MB. Below it the text is written
 * from the packed outputs (tensor-json.ts) a slice at a time, the event loop let run between
 * slices (the delivery loop's attempts share it).
 *
 * On a Redis Cluster each queue's stream lies in its own slot (infra/contracts/job.ts), and one XREAD
 * cannot span slots: the source then reads every stream with its own non-blocking XREAD
 * (concurrently, so ioredis batches them per node) and polls every `clusterPollMs` while all
 * are empty. Discovery scans every master.
 *
 * A read round never holds the source for good. ioredis can leave a command on a cluster
 * connection pending forever when the node it went to is killed (its reply never comes and the
 * command is never failed), and a round awaiting it would stop every webhook of the process
 * while jobs go on succeeding. Each round therefore has a deadline: past it the round is given
 * up (it stores nothing more and moves no cursor) and the same entries are read again, which
 * the at-least-once design above already allows. A round that is only slow (a loaded host, a
 * big batch of payloads) must not be given up forever, so the deadline doubles on each round
 * given up and returns to its start after a round that ends in time (roundDeadlines).
 */

import { ENTRY_ID_PREFIX } from '../../infra/contracts/entry.ts';
import type { JobStatus, JobView } from '../../infra/contracts/job.ts';
import { JSON_SLICE_ELEMENTS, jsonParts, outputElements } from '../../infra/contracts/tensor-json.ts';
import type { WebhookEvent, WebhookSpec } from '../../infra/contracts/webhook.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import type { Log } from '../../infra/kernel/log.ts';
import {
  createHeldJobReader,
  type HeldJob,
  type HeldJobReader,
  modelQueuesWithEvents,
  type QueueStreamEntries,
  readEventStreams,
} from '../../infra/queue/index.ts';
import { isCluster, type RedisClient } from '../../infra/redis/client.ts';
import { entrySkipKey, webhookCursorKey } from '../../infra/redis/keys.ts';
import { boundedJobResource, iso, type JobResource } from '../resources/job-resource.ts';
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
  /** MAX_JSON_OUTPUT_ELEMENTS: a payload leaves out outputs past it (see the header); unlimited when absent. */
  maxJsonOutputElements?: number;
  /** How long one read round (the read and its deliveries stored) may take before it is given up and read again; see roundDeadlines. Default max(10 × blockMs, 10 s). */
  roundDeadlineMs?: number;
}

/** A job webhook's body (its JSON text: `webhookPayloadJson`). */
export interface WebhookPayload {
  type: WebhookEvent;
  /** When the event happened (ISO 8601). */
  timestamp: string;
  /** The job as its event stream shows it: `outputsOmitted` instead of outputs past MAX_JSON_OUTPUT_ELEMENTS. */
  data: JobResource;
}

/** The stream events that may deliver something, and the webhook events each may become. */
const STREAM_EVENTS: Record<string, readonly WebhookEvent[]> = {
  active: ['job.started'],
  completed: ['job.succeeded', 'job.failed'],
  failed: ['job.failed'],
};

/** A request the API ended while queued (the `buried` event) → the event it delivers. */
const BURIED_EVENTS: Partial<Record<JobStatus, WebhookEvent>> = {
  failed: 'job.failed',
  canceled: 'job.failed',
};

/** A request's own final status after its BullMQ job completed → the event it delivers (canceled: none). */
const FINAL_EVENTS: Partial<Record<JobStatus, WebhookEvent>> = {
  succeeded: 'job.succeeded',
  failed: 'job.failed',
};

/** A request whose webhook asks for one of the events a stream event may become. */
type Hooked = HeldJob & { webhook: WebhookSpec };

/** Whom a delivery is for. */
type Recipient = Pick<Hooked, 'id' | 'tenant' | 'webhook'>;

/** The webhook-id of a job's event: the same on every re-read and every retry. */
export function deliveryId(jobId: string, event: WebhookEvent): string {
  return `msg_${jobId}_${event.slice('job.'.length)}`;
}

/**
 * The JSON text of `view`'s payload for `event`: what JSON.stringify makes of its WebhookPayload,
 * the outputs bounded and written as the header says. Past one slice of outputs, each part waits
 * for the event loop's next turn.
 */
export async function webhookPayloadJson(
  event: WebhookEvent,
  timestamp: string,
  view: JobView,
  maxJsonOutputElements?: number,
): Promise<string> {
  const data = boundedJobResource(view, maxJsonOutputElements);
  const sliced = outputElements(data.outputs ?? []) > JSON_SLICE_ELEMENTS;
  let text = `{"type":${JSON.stringify(event)},"timestamp":${JSON.stringify(timestamp)},"data":`;
  for (const part of jsonParts(data)) {
    text += part;
    if (sliced) await nextTurn();
  }
  return `${text}}`;
}

/** Resolves on the event loop's next turn, after the I/O waiting (as api/http/infer-response.ts's). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
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

  /** Stores the deliveries a stream entry calls for, one per request that asked; how many were new. */
  async function handle(jobs: HeldJobReader, name: string, streamId: string, fields: Record<string, string>): Promise<number> {
    const kind = fields.event ?? '';
    const jobId = fields.jobId;
    const timestamp = iso(Number(streamId.split('-')[0]));
    if (kind === 'buried') return (await buried(fields, timestamp)) ? 1 : 0;
    const wanted = STREAM_EVENTS[kind];
    if (!wanted || !jobId) return 0;
    const held = await jobs.read(name, jobId);
    const hooked = held.filter((h): h is Hooked => h.webhook?.events.some((e) => wanted.includes(e)) ?? false);
    if (hooked.length === 0) return 0;
    const skipped = kind === 'completed' ? new Set<string>() : await skippedMembers(name, jobId);
    const found = await Promise.all(hooked.filter((h) => !skipped.has(h.id)).map((h) => deliveryOf(kind, h)));
    let added = 0;
    for (const d of found) {
      if (d && (await store(d.job, d.event, timestamp, d.view))) added++;
    }
    return added;
  }

  /** The event a request delivers for stream event `kind`, with its view; null when none, or not one its webhook asks for. */
  async function deliveryOf(kind: string, job: Hooked): Promise<{ job: Hooked; event: WebhookEvent; view: JobView } | null> {
    const asked = (event: WebhookEvent | undefined) => event !== undefined && job.webhook.events.includes(event);
    if (kind === 'active') {
      if (!asked('job.started')) return null;
      const view = await job.view('running');
      // Taken past its deadline: the worker refuses it (deadline_exceeded, delivered on `completed`), as worker/entry-intake.ts decides.
      if (job.deadlineAt !== undefined && view.startedAt !== undefined && view.startedAt > job.deadlineAt) return null;
      return { job, event: 'job.started', view };
    }
    if (kind === 'failed') {
      if (!asked('job.failed') || (await job.status()) !== 'failed') return null;
      return { job, event: 'job.failed', view: await job.view('failed') };
    }
    // Completed: the entry ran, and each member has its own outcome (a job from before entries succeeded).
    const view = await job.view('succeeded');
    const event = FINAL_EVENTS[view.status];
    return event && asked(event) ? { job, event, view } : null;
  }

  /**
   * The members of entry `jobId` the API canceled or expired while it was queued: the worker
   * skipped them, but the entry's own `active` and `failed` say nothing of it. The set is final
   * once the entry left the queue (tombstones.ts adds to it only while the entry is queued).
   */
  async function skippedMembers(queue: string, jobId: string): Promise<ReadonlySet<string>> {
    if (!jobId.startsWith(ENTRY_ID_PREFIX)) return new Set();
    return new Set(await deps.redis.smembers(entrySkipKey(deps.prefix, queue, jobId)));
  }

  /**
   * A `buried` event: the request's final view and webhook ride in it (see the header). Stored
   * when the webhook asks for the event; true when the delivery is new. Fields that do not parse
   * (not written by tombstones.ts) deliver nothing.
   */
  async function buried(fields: Record<string, string>, timestamp: string): Promise<boolean> {
    const parsed = parseBuried(fields);
    if (!parsed) return false;
    const { view, webhook } = parsed;
    const event = BURIED_EVENTS[view.status];
    if (!event || !webhook.events.includes(event)) return false;
    return store({ id: view.id, tenant: view.tenant, webhook }, event, timestamp, view);
  }

  async function store(job: Recipient, event: WebhookEvent, timestamp: string, view: JobView): Promise<boolean> {
    const payload = await webhookPayloadJson(event, timestamp, view, deps.maxJsonOutputElements);
    const delivery = { id: deliveryId(job.id, event), tenant: job.tenant, jobId: job.id, event, url: job.webhook.url, payload };
    return deps.store.enqueue(delivery, deps.clock.now());
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

  /** One round: the streams read after their cursors, each entry handled, each cursor moved. Stops at `round`'s abort. */
  async function readOnce(jobs: HeldJobReader, round: AbortSignal): Promise<void> {
    const reply = await readStreams([...cursors.keys()], round);
    for (const { queue: name, entries } of reply) {
      let added = 0;
      for (const { id, fields } of entries) {
        if (round.aborted) return;
        added += await handle(jobs, name, id, fields);
      }
      const last = entries.at(-1)?.id;
      if (round.aborted) return;
      if (last === undefined) continue;
      await deps.redis.set(cursorKey(name), last);
      if (round.aborted) return;
      cursors.set(name, last);
      if (added > 0) deps.onEnqueued?.();
    }
  }

  /** One round within the current deadline: true when it ended in time, false when it was given up (or the source stopped). */
  async function boundedRound(jobs: HeldJobReader, signal: AbortSignal): Promise<boolean> {
    const ended = new AbortController();
    // Aborted by the source's stop, or once the round ended or was given up: the round stops, and so does the deadline's sleep.
    const round = AbortSignal.any([signal, ended.signal]);
    const work = readOnce(jobs, round).then(() => 'done' as const);
    // A round given up may still fail later, with no one awaiting it.
    work.catch(() => undefined);
    const late = deps.clock.sleep(deadlines.current(), round).then(
      () => 'late' as const,
      () => 'late' as const,
    );
    try {
      return (await Promise.race([work, late])) === 'done' && !signal.aborted;
    } finally {
      ended.abort();
    }
  }

  const deadlines = roundDeadlines(deps.roundDeadlineMs ?? Math.max(10 * blockMs, 10_000));

  async function run(signal: AbortSignal): Promise<void> {
    const stop = () => deps.blocking.disconnect();
    signal.addEventListener('abort', stop, { once: true });
    // Over the process's shared readers of the queues' jobs (never rewriting a queue's settings).
    const jobs = createHeldJobReader({
      redis: deps.redis,
      prefix: deps.prefix,
      outputs: sharedOutputReads(deps.redis),
      onError: (err, queue) => deps.log.warn({ err: err.message, queue }, 'webhook event source queue error'),
    });
    try {
      while (!signal.aborted) {
        try {
          if (deps.clock.now() - discoveredAt >= discoverIntervalMs) await discover();
          if (cursors.size === 0) await deps.clock.sleep(Math.min(discoverIntervalMs, 1000), signal);
          else if (await boundedRound(jobs, signal)) deadlines.inTime();
          else if (!signal.aborted) {
            const overran = deadlines.current();
            deadlines.givenUp();
            deps.log.warn(
              { deadlineMs: overran, nextDeadlineMs: deadlines.current() },
              'webhook event source: a read round overran its deadline; reading again',
            );
          }
        } catch (err) {
          if (signal.aborted) break;
          // Redis away or a job unreadable: the cursor has not moved, so the same entries come again.
          deps.log.warn({ err: errorMessage(err) }, 'webhook event source: read failed; retrying');
          await deps.clock.sleep(1000, signal).catch(() => undefined);
        }
      }
    } finally {
      signal.removeEventListener('abort', stop);
      await jobs.close().catch(() => undefined);
    }
  }

  return { run };
}

/**
 * The deadline of the next read round: `startMs`, doubled on each round given up (up to 64 ×,
 * so a source on a slow host still ends its rounds), back to `startMs` after one that ended in time.
 */
export function roundDeadlines(startMs: number): { current(): number; inTime(): void; givenUp(): void } {
  let factor = 1;
  return {
    current: () => startMs * factor,
    inTime: () => {
      factor = 1;
    },
    givenUp: () => {
      factor = Math.min(factor * 2, 64);
    },
  };
}

/** A `buried` event's view and webhook; undefined when either is missing or malformed. */
function parseBuried(fields: Record<string, string>): { view: JobView; webhook: WebhookSpec } | undefined {
  try {
    const view = JSON.parse(fields.view ?? '') as JobView;
    const webhook = JSON.parse(fields.webhook ?? '') as WebhookSpec;
    if (typeof view?.id !== 'string' || typeof view.tenant !== 'string' || typeof view.status !== 'string') return undefined;
    if (typeof webhook?.url !== 'string' || !Array.isArray(webhook.events)) return undefined;
    return { view, webhook };
  } catch {
    return undefined;
  }
}

/**
 * `redis` with one change: a buffer read (an entry's packed outputs) is made once and shared.
 * Each member's view reads its rows out of the entry's whole output buffer; one stream entry's
 * members, handled together, share that one read instead of one per member.
 */
function sharedOutputReads(redis: RedisClient): Pick<RedisClient, 'get' | 'getBuffer'> {
  const buffers = new Map<string, Promise<Buffer | null>>();
  return {
    get: (key: string) => redis.get(key),
    getBuffer: (key: string) => {
      let read = buffers.get(key);
      if (!read) {
        read = redis.getBuffer(key);
        buffers.set(key, read);
      }
      return read;
    },
  };
}
