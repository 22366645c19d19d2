/**
 * The webhook dispatcher's Prometheus metric: attempts by event and by what came of them, so a
 * dashboard (deploy/grafana/warmpool.json) can show failing receivers and dead letters.
 *
 *   succeeded  the receiver answered 2xx
 *   retrying   it failed and another attempt is scheduled
 *   failed     it answered 410 Gone: no more attempts
 *   dead       the retry schedule is used up: the delivery is in the dead-letter list
 *
 * Like the scaler's, the dispatcher's registry is its own; publishing it to Redis with
 * infra/telemetry/metrics.ts `publishMetricsSnapshot` (key `metricsKey(prefix, 'dispatcher-<id>')`) lets
 * the API's /metrics merge it with the workers'.
 */
import { Counter, type Registry } from 'prom-client';
import type { AttemptOutcome } from './delivery-store.ts';

export const WEBHOOK_ATTEMPT_OUTCOMES = ['succeeded', 'retrying', 'failed', 'dead'] as const;
export type WebhookAttemptOutcome = (typeof WEBHOOK_ATTEMPT_OUTCOMES)[number];

export function createWebhookMetrics(registry: Registry) {
  const attempts = new Counter({
    name: 'warmpool_webhook_attempts_total',
    help: 'Webhook delivery attempts by event and outcome (succeeded, retrying, failed: 410 Gone, dead: retries used up)',
    labelNames: ['event', 'outcome'] as const,
    registers: [registry],
  });
  return {
    attempts,
    /** Counts one recorded attempt; `event` as delivered (`job.succeeded`, `bulk.progress`, …). */
    record(event: string, outcome: AttemptOutcome): void {
      attempts.inc({ event, outcome: outcomeLabel(outcome) });
    },
  };
}

export type WebhookMetrics = ReturnType<typeof createWebhookMetrics>;

export function outcomeLabel(outcome: AttemptOutcome): WebhookAttemptOutcome {
  return outcome.state === 'pending' ? 'retrying' : outcome.state;
}
