/**
 * GET /v1/jobs/{id}/events: Server-Sent Events of a job's status. The current status is sent at
 * once, then each change; the event name is the status and the data is the same JSON as
 * GET /v1/jobs/{id}. The stream ends after the terminal event (succeeded, failed, canceled).
 * While the job is queued, its `queued` events carry `waiting` (why it waits: no worker yet, a
 * worker starting and in which phase, busy workers; api/use-cases/wait-reason.ts), checked every
 * WAIT_CHECK_MS and sent again when the reason or the phase changes, so a client watching a cold
 * start sees it move rather than 60 s of heartbeats.
 * A comment line every `heartbeatMs` keeps proxies from closing an idle stream. When the client
 * goes away the watch is aborted, which releases its listener slot on the queue's events.
 *
 * Streams are capped per tenant and per process (api/http/stream-slots.ts): past the tenant's
 * cap 429 `too_many_streams`, past the process's 503 `too_many_streams` with Retry-After. The
 * slot is given back when the stream ends, whether the job ended or the client left.
 */
import { Hono } from 'hono';
import { type SSEStreamingApi, streamSSE } from 'hono/streaming';
import { InvalidInputError, isClientError, OverloadedError } from '../../infra/kernel/errors.ts';
import type { Log } from '../../infra/kernel/log.ts';
import type { AuthEnv } from '../http/auth.ts';
import type { StreamSlots } from '../http/stream-slots.ts';
import type { Clock, JobQueue, JobView } from '../ports.ts';
import { jobEventJson } from '../resources/job-resource.ts';
import { getJob } from '../use-cases/get-job.ts';
import type { WaitReason } from '../use-cases/wait-reason.ts';

export interface JobWatcher {
  /** Calls onChange now and at each status change until terminal (resolves) or the signal aborts (rejects). */
  watch(jobId: string, onChange: (view: JobView) => void | Promise<void>, signal?: AbortSignal): Promise<void>;
}

export interface JobEventsDeps {
  jobs: JobQueue & JobWatcher;
  clock: Clock;
  heartbeatMs: number;
  /** Concurrent streams per tenant and in all. */
  slots: StreamSlots;
  /** MAX_JSON_OUTPUT_ELEMENTS: an event leaves out outputs past it (job-resource.ts's jobEventJson); unlimited when absent. */
  maxJsonOutputElements?: number;
  /** Why a queued job waits (wait-reason.ts); without it, queued events carry no `waiting`. */
  why?: (view: JobView) => Promise<WaitReason | undefined>;
  log?: Log;
}

/** How often a queued job's reason to wait is read again (one fleet read serves every stream of the process for a second). */
export const WAIT_CHECK_MS = 2_000;

/** Retry-After of a 503 when the process holds all the streams it may: about a short job's life. */
const STREAMS_RETRY_AFTER_S = 5;

export function jobEventRoutes(deps: JobEventsDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  app.get('/v1/jobs/:id/events', async (c) => {
    const id = c.req.param('id');
    // Before the stream starts, so an unknown (or another tenant's) job is a plain JSON 404.
    const tenant = c.get('tenant');
    await getJob(deps, { tenant, id });
    const slot = deps.slots.acquire(tenant);
    if (slot === 'tenant') {
      const message = `tenant ${tenant} has ${deps.slots.held(tenant)} job event streams open, the most one tenant may hold here; close one, or poll GET /v1/jobs/${id}`;
      throw new InvalidInputError('too_many_streams', message, { status: 429 });
    }
    if (slot === 'process') {
      const message = `this API process holds the most job event streams it serves (${deps.slots.held()}); retry shortly, or poll GET /v1/jobs/${id}`;
      throw new OverloadedError('too_many_streams', message, STREAMS_RETRY_AFTER_S);
    }
    const request = c.req.raw.signal;
    return streamSSE(c, async (stream) => {
      const stop = new AbortController();
      const onGone = () => stop.abort(new Error('client disconnected'));
      stream.onAbort(onGone);
      request.addEventListener('abort', onGone, { once: true });
      // Heartbeats start after the first event, so the current status is always what comes first.
      let beats: Promise<void> | undefined;
      let waits: Promise<void> | undefined;
      const sender = queuedSender(stream, deps);
      try {
        await deps.jobs.watch(
          id,
          async (view) => {
            await sender.send(view);
            beats ??= heartbeat(stream, deps, stop.signal);
            waits ??= deps.why ? watchWaiting(sender, deps.clock, stop.signal) : undefined;
          },
          stop.signal,
        );
      } catch (err) {
        if (!stop.signal.aborted) await streamError(stream, err, deps.log);
      } finally {
        // First: nothing below may keep the slot from coming back.
        slot.release();
        request.removeEventListener('abort', onGone);
        stop.abort();
        await Promise.all([beats, waits]);
      }
    });
  });

  return app;
}

interface QueuedSender {
  /** Sends the view's event (a queued one with its reason to wait). */
  send(view: JobView): Promise<void>;
  /** Reads a queued job's reason again and sends its event when the reason or phase changed. */
  refresh(): Promise<void>;
}

/** The stream's events, one at a time, remembering the last view and the reason it went out with. */
function queuedSender(stream: SSEStreamingApi, deps: JobEventsDeps): QueuedSender {
  let last: JobView | undefined;
  let sentKey = '';
  let chain = Promise.resolve();
  const key = (w: WaitReason | undefined) => (w ? `${w.code}:${w.phase ?? ''}` : '');
  const write = (view: JobView, waiting: WaitReason | undefined) => {
    chain = chain.then(async () => {
      // A newer status went out while this reason was read: it is stale.
      if (view !== last) return;
      sentKey = key(waiting);
      await stream.writeSSE({ event: view.status, data: jobEventJson(view, deps.maxJsonOutputElements, waiting) });
    });
    return chain;
  };
  const reason = async (view: JobView) => (view.status === 'queued' && deps.why ? deps.why(view).catch(() => undefined) : undefined);
  return {
    async send(view) {
      last = view;
      await write(view, await reason(view));
    },
    async refresh() {
      const view = last;
      if (view?.status !== 'queued') return;
      const waiting = await reason(view);
      if (key(waiting) !== sentKey) await write(view, waiting);
    },
  };
}

async function watchWaiting(sender: QueuedSender, clock: Clock, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      await clock.sleep(WAIT_CHECK_MS, signal);
    } catch {
      return; // stopped
    }
    await sender.refresh().catch(() => undefined);
  }
}

async function heartbeat(stream: SSEStreamingApi, deps: JobEventsDeps, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      await deps.clock.sleep(deps.heartbeatMs, signal);
    } catch {
      return; // stopped
    }
    await stream.write(': heartbeat\n\n');
  }
}

/** A failure after the stream began: an `error` event with the usual error body, then the end. */
async function streamError(stream: SSEStreamingApi, err: unknown, log: Log | undefined): Promise<void> {
  const known = isClientError(err);
  if (!known) log?.error({ err }, 'job event stream failed');
  const error = known
    ? { code: err.code, message: err.message }
    : { code: 'internal', message: 'internal error; the server has logged it' };
  await stream.writeSSE({ event: 'error', data: JSON.stringify({ error }) });
}
