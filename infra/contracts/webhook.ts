/**
 * A job's webhook as the submitter asks for it (DESIGN §5): where to deliver and which job events.
 * Its own module so the job and bulk contracts, which both carry one, import it without importing
 * each other.
 */
export const WEBHOOK_EVENTS = ['job.started', 'job.succeeded', 'job.failed'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export interface WebhookSpec {
  url: string;
  /** Default: job.succeeded and job.failed. */
  events: WebhookEvent[];
}
