/**
 * A bulk run's webhook events (`bulk.progress`, `bulk.succeeded`, `bulk.failed`,
 * `bulk.canceled`) as deliveries in the job webhooks' own store, so the dispatcher signs,
 * retries, dead-letters and replays them exactly like job events. This is the `notify` port of
 * infra/bulk's BulkDeps.
 *
 * How often `bulk.progress` comes is the driver's to say (DriveOptions.webhookIntervalMs: it knows
 * when the run last reported, across its whole drive). Delivery ids are derived from the run and
 * the event (and, for progress, the rows done), so a driver that reports the same thing twice —
 * say, after taking over a run whose driver crashed — stores it once.
 */
import type { BulkRunView, BulkWebhookEvent } from '../../infra/contracts/bulk.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import { type BulkRunResource, toBulkRunResource } from '../resources/bulk-run-resource.ts';
import { iso } from '../resources/job-resource.ts';
import type { DeliveryStore } from './delivery-store.ts';

/** `bulk.progress` webhooks of one run at most this often: what the dispatcher and the CLI ask their drivers for. */
export const BULK_PROGRESS_WEBHOOK_INTERVAL_MS = 10_000;

export interface BulkWebhookPayload {
  type: BulkWebhookEvent;
  /** When the event was stored (ISO 8601). */
  timestamp: string;
  data: BulkRunResource;
}

export interface BulkNotifierDeps {
  store: Pick<DeliveryStore, 'enqueue'>;
  clock: Pick<Clock, 'now'>;
  /** Called after a delivery is stored, to wake the delivery loop. */
  onEnqueued?: () => void;
}

export type BulkNotify = (event: BulkWebhookEvent, run: BulkRunView) => Promise<void>;

/**
 * The webhook-id of a run's event: the same on every retry, and for a repeated report. Run ids
 * are per tenant, so the tenant is part of it (after `msg_bulk_`, ended by a '.', which neither a
 * tenant nor a run id holds): two tenants' runs named alike never share a delivery.
 */
export function bulkDeliveryId(run: Pick<BulkRunView, 'tenant' | 'id' | 'progress'>, event: BulkWebhookEvent): string {
  const kind = event.slice('bulk.'.length);
  const name = `msg_bulk_${run.tenant}.${run.id}`;
  return kind === 'progress' ? `${name}_progress_${run.progress.rowsDone}` : `${name}_${kind}`;
}

export function createBulkNotifier(deps: BulkNotifierDeps): BulkNotify {
  return async (event, run) => {
    const webhook = run.webhook;
    if (!webhook?.events.includes(event)) return;
    const now = deps.clock.now();
    const payload: BulkWebhookPayload = { type: event, timestamp: iso(now), data: toBulkRunResource(run) };
    const added = await deps.store.enqueue(
      {
        id: bulkDeliveryId(run, event),
        tenant: run.tenant,
        // The store's field names are the job events'; a run's id fills `jobId`, and its event
        // name is stored as the string it is (the store and the dispatcher never branch on it).
        jobId: run.id,
        event,
        url: webhook.url,
        payload: JSON.stringify(payload),
      },
      now,
    );
    if (added) deps.onEnqueued?.();
  };
}
