/**
 * The webhook dispatcher: the event source turns job transitions into stored deliveries, and
 * the delivery loop claims due deliveries, attempts them with bounded concurrency and records
 * each outcome. It runs apart from the workers (its own process, or in-process in `warmpool
 * dev`), so a slow receiver never holds an inference worker. Several dispatchers may run at
 * once: claims are exclusive (delivery-store.ts) and enqueues idempotent.
 *
 * Shares: at most `config.concurrency` attempts in flight, and at most
 * `config.concurrencyPerTenant` of one tenant's. A claim passes the tenants' counts in flight, and
 * the store leaves a tenant at its share where it is (due, unclaimed, no attempt counted), so
 * free slots go to other tenants' due deliveries. A tenant whose receivers hang (each held up
 * to `timeoutMs`) holds its own share, never the others' slots. When every due delivery is of
 * a tenant at its share, the claim comes back empty and the loop sleeps until an attempt ends,
 * a delivery is enqueued or the poll interval passes: no spinning. Shares are per dispatcher:
 * two dispatchers may each hold a tenant's share.
 *
 * Work-conserving: slots nobody else wants are lent past a tenant's share, but one share is
 * always kept free. After the fair claim, a second claim may give any tenant up to
 * `concurrency - concurrencyPerTenant` in flight, for as many slots as leave `perTenant` free. A
 * tenant alone (the common case: one product team's webhooks) is not held to a quarter of the
 * dispatcher, while a tenant that turns up finds its share free at once, and no tenant can take
 * that reserve: the fair claim leaves a tenant over its share where it is.
 *
 * Lifecycle: start() once; close() stops claiming, stops the event source, waits for the
 * attempts in flight to be recorded, and is safe to call twice.
 */

import type { Clock } from '../../infra/kernel/clock.ts';
import type { Config } from '../../infra/kernel/config.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import type { Log } from '../../infra/kernel/log.ts';
import { duplicateClient, type RedisClient } from '../../infra/redis/client.ts';
import { type AttemptResult, deliverOnce, type ResolveAll } from './deliver.ts';
import type { WebhookMetrics } from './delivery-metrics.ts';
import { type AttemptOutcome, type ClaimedDelivery, createDeliveryStore, type DeliveryStore } from './delivery-store.ts';
import { createEventSource } from './event-source.ts';
import { nextAttemptAt } from './retry-schedule.ts';
import { createWebhookSecrets } from './secrets.ts';
import { webhookHeaders } from './signing.ts';

export interface DispatcherDeps {
  /** Used for commands; the dispatcher duplicates it once for its blocking reads. Not closed here. */
  redis: RedisClient;
  prefix: string;
  clock: Clock;
  config: Config['webhooks'];
  log: Log;
  /** DNS resolution for deliveries; tests map names with it. Default: dns.lookup. */
  resolve?: ResolveAll;
  /** How often the delivery loop looks for due deliveries when nothing wakes it. Default 250 ms. */
  pollIntervalMs?: number;
  /** How often new model queues are looked for. Default 3 s. */
  discoverIntervalMs?: number;
  random?: () => number;
  /** Counts each recorded attempt (api/webhooks/delivery-metrics.ts); none when absent. */
  metrics?: Pick<WebhookMetrics, 'record'>;
  /** MAX_JSON_OUTPUT_ELEMENTS: job payloads leave out outputs past it (event-source.ts); unlimited when absent. */
  maxJsonOutputElements?: number;
}

export interface Dispatcher {
  start(): void;
  close(): Promise<void>;
  /** The store it delivers from (for tests and tools). */
  readonly store: DeliveryStore;
}

/**
 * How long a claim holds a delivery: it outlives the slowest attempt (DNS + request, both under
 * timeoutMs) with room to record it. A claim whose reply never reached the dispatcher (Redis
 * went away after applying it) is picked up again when it ends: that webhook is late by up to
 * this long, never lost.
 */
export function deliveryLeaseMs(config: Pick<Config['webhooks'], 'timeoutMs'>): number {
  return 2 * config.timeoutMs + 30_000;
}

export function createDispatcher(deps: DispatcherDeps): Dispatcher {
  const concurrency = deps.config.concurrency;
  const perTenant = Math.min(deps.config.concurrencyPerTenant, concurrency);
  const inFlightByTenant = new Map<string, number>();
  const pollIntervalMs = deps.pollIntervalMs ?? 250;
  const random = deps.random ?? Math.random;
  const store = createDeliveryStore(deps.redis, deps.prefix, { leaseMs: deliveryLeaseMs(deps.config) });
  const secrets = createWebhookSecrets(deps.redis, deps.prefix, deps.clock);
  const blocking = duplicateClient(deps.redis);
  blocking.on('error', (err: Error) => deps.log.warn({ err: err.message }, 'webhook dispatcher: redis error'));
  const stop = new AbortController();
  const inFlight = new Set<Promise<void>>();
  let wake: AbortController | undefined;
  let loops: Promise<unknown> | undefined;
  let closing: Promise<void> | undefined;

  const source = createEventSource({
    redis: deps.redis,
    blocking,
    prefix: deps.prefix,
    clock: deps.clock,
    store,
    log: deps.log,
    discoverIntervalMs: deps.discoverIntervalMs,
    maxJsonOutputElements: deps.maxJsonOutputElements,
    onEnqueued: () => wake?.abort(),
  });

  async function attempt(d: ClaimedDelivery): Promise<void> {
    const at = deps.clock.now();
    const signingSecrets = await secrets.activeSecrets(d.tenant, at);
    const result = await deliverOnce({
      url: d.url,
      headers: webhookHeaders(signingSecrets, d.id, Math.floor(at / 1000), d.payload),
      body: d.payload,
      timeoutMs: deps.config.timeoutMs,
      allowedPrivateHosts: deps.config.allowedPrivateHosts,
      resolve: deps.resolve,
    });
    const now = deps.clock.now();
    const outcome = outcomeOf(result, d.attempts.length + 1, now);
    const recorded = await store.recordAttempt(d, { at, ...statusOf(result), durationMs: result.durationMs }, outcome, now);
    const detail = result.outcome === 'retry' ? result.detail : undefined;
    // The log keeps the error itself; the stored attempt (the tenant's view) only its category.
    const fields = {
      delivery: d.id,
      url: d.url,
      outcome: result.outcome,
      state: outcome.state,
      ...statusOf(result),
      ...(detail ? { detail } : {}),
    };
    if (recorded) deps.metrics?.record(d.event, outcome);
    if (!recorded) deps.log.warn(fields, 'webhook attempt finished after its claim was lost; another dispatcher has it');
    else if (outcome.state === 'dead' || outcome.state === 'failed') deps.log.warn(fields, 'webhook delivery gave up');
    else deps.log.debug(fields, 'webhook attempt');
  }

  function outcomeOf(result: AttemptResult, attempts: number, now: number): AttemptOutcome {
    if (result.outcome === 'succeeded') return { state: 'succeeded' };
    if (result.outcome === 'gone') return { state: 'failed', reason: 'gone' };
    const next = nextAttemptAt({
      attempt: attempts,
      now,
      scheduleMs: deps.config.retryScheduleMs,
      retryAfterHeader: result.retryAfter,
      random,
    });
    return next === null ? { state: 'dead', reason: 'retries_exhausted' } : { state: 'pending', nextAttemptAt: next };
  }

  function track(d: ClaimedDelivery): void {
    inFlightByTenant.set(d.tenant, (inFlightByTenant.get(d.tenant) ?? 0) + 1);
    const p = attempt(d)
      .catch((err: Error) =>
        deps.log.warn({ err: err.message, delivery: d.id }, 'webhook attempt could not be recorded; it is retried when its claim expires'),
      )
      .finally(() => {
        inFlight.delete(p);
        const left = (inFlightByTenant.get(d.tenant) ?? 1) - 1;
        if (left > 0) inFlightByTenant.set(d.tenant, left);
        else inFlightByTenant.delete(d.tenant);
        wake?.abort();
      });
    inFlight.add(p);
  }

  async function deliveryLoop(): Promise<void> {
    while (!stop.signal.aborted) {
      wake = new AbortController();
      const free = concurrency - inFlight.size;
      try {
        const share = { perTenant, inFlight: inFlightByTenant };
        const claimed = free > 0 ? await store.claimDue(deps.clock.now(), free, share) : [];
        for (const d of claimed) track(d);
        if (claimed.length === free && free > 0) continue; // more may be due right now
        // Slots the fair claim left idle are lent, keeping one share free for whoever comes next.
        const spare = free - claimed.length - perTenant;
        if (spare > 0 && claimed.length < free) {
          const lent = await store.claimDue(deps.clock.now(), spare, { perTenant: concurrency - perTenant, inFlight: inFlightByTenant });
          for (const d of lent) track(d);
        }
      } catch (err) {
        deps.log.warn({ err: errorMessage(err) }, 'webhook dispatcher: claiming failed; retrying');
      }
      await deps.clock.sleep(pollIntervalMs, AbortSignal.any([stop.signal, wake.signal])).catch(() => undefined);
    }
  }

  return {
    store,
    start() {
      if (loops || closing) return;
      loops = Promise.allSettled([source.run(stop.signal), deliveryLoop()]);
      deps.log.info({ concurrency, perTenant }, 'webhook dispatcher started');
    },
    close() {
      closing ??= (async () => {
        stop.abort();
        await loops;
        await Promise.allSettled([...inFlight]);
        // The source disconnected it at the stop. ioredis' disconnect() on a connection already
        // closed still arms its 2 s destroy timer, which nothing then clears: the process would
        // stay up that long after everything else had stopped.
        if (blocking.status !== 'end') blocking.disconnect();
      })();
      return closing;
    },
  };
}

function statusOf(result: AttemptResult): { status?: number; error?: string } {
  const out: { status?: number; error?: string } = {};
  if (result.status !== undefined) out.status = result.status;
  if (result.outcome === 'retry' && result.error !== undefined) out.error = result.error;
  return out;
}
