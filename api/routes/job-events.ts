/**
 * GET /v1/jobs/{id}/events: Server-Sent Events of a job's status. The current status is sent at
 * once, then each change; the event name is the status and the data is the same JSON as
 * GET /v1/jobs/{id}. The stream ends after the terminal event (succeeded, failed, canceled).
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
  log?: Log;
}

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
      try {
        await deps.jobs.watch(
          id,
          async (view) => {
            await stream.writeSSE({ event: view.status, data: jobEventJson(view, deps.maxJsonOutputElements) });
            beats ??= heartbeat(stream, deps, stop.signal);
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
        await beats;
      }
    });
  });

  return app;
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
