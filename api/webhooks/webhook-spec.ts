/**
 * The `webhook` field of a job submission, validated at submit (issue 3 §3–4). A URL whose
 * host is a literal blocked address (or a `localhost` name) is refused here with
 * `webhook_url_blocked`; host names are checked again on their resolved addresses at every
 * delivery (api/webhooks/deliver.ts), which is what defeats DNS rebinding.
 */

import { WEBHOOK_EVENTS, type WebhookEvent, type WebhookSpec } from '../../infra/contracts/webhook.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { blockedHostReason, isAllowedHost, urlHost } from './address-policy.ts';

export const MAX_WEBHOOK_URL_LENGTH = 2048;
export const DEFAULT_WEBHOOK_EVENTS: readonly WebhookEvent[] = ['job.succeeded', 'job.failed'];

export interface WebhookSpecOptions {
  /** Host names (or literal addresses) exempt from the private-address rules. */
  allowedPrivateHosts: readonly string[];
}

/** undefined when no webhook was asked for; throws InvalidInputError (422) when it is wrong. */
export function parseWebhookSpec(raw: unknown, options: WebhookSpecOptions): WebhookSpec | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (typeof raw !== 'object' || Array.isArray(raw)) invalid('webhook must be an object {url, events?}');
  const { url, events, ...rest } = raw as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) invalid(`webhook has unknown field "${extra[0]}"; allowed: url, events`);
  const parsedUrl = parseUrl(url);
  checkHost(parsedUrl, options);
  return { url: parsedUrl.href, events: parseEvents(events) };
}

function parseUrl(url: unknown): URL {
  if (typeof url !== 'string' || url.length === 0) invalid('webhook.url must be a non-empty string');
  if (url.length > MAX_WEBHOOK_URL_LENGTH) invalid(`webhook.url is longer than ${MAX_WEBHOOK_URL_LENGTH} characters`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    invalid('webhook.url is not a valid absolute URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') invalid('webhook.url must use http or https');
  if (parsed.username !== '' || parsed.password !== '') invalid('webhook.url must not carry credentials');
  if (parsed.hostname === '') invalid('webhook.url has no host');
  // Normalisation (punycode, IPv4 notations) can lengthen a URL; the stored form must fit too.
  if (parsed.href.length > MAX_WEBHOOK_URL_LENGTH) invalid(`webhook.url is longer than ${MAX_WEBHOOK_URL_LENGTH} characters`);
  return parsed;
}

function checkHost(url: URL, options: WebhookSpecOptions): void {
  const host = urlHost(url);
  if (isAllowedHost(host, options.allowedPrivateHosts)) return;
  const reason = blockedHostReason(host);
  if (reason) {
    throw new InvalidInputError(
      'webhook_url_blocked',
      `webhook.url host ${host} is blocked (${reason}); webhooks may only reach public hosts unless WEBHOOK_ALLOWED_PRIVATE_HOSTS names them`,
      { status: 422 },
    );
  }
}

function parseEvents(events: unknown): WebhookEvent[] {
  if (events === undefined) return [...DEFAULT_WEBHOOK_EVENTS];
  if (!Array.isArray(events) || events.length === 0) {
    invalid(`webhook.events must be a non-empty array of ${WEBHOOK_EVENTS.join(', ')}`);
  }
  const unique = new Set<WebhookEvent>();
  for (const e of events) {
    if (!(WEBHOOK_EVENTS as readonly unknown[]).includes(e)) {
      invalid(`webhook.events: unknown event ${JSON.stringify(e)}; known: ${WEBHOOK_EVENTS.join(', ')}`);
    }
    unique.add(e as WebhookEvent);
  }
  return [...unique];
}

function invalid(message: string): never {
  throw new InvalidInputError('invalid_webhook', message, { status: 422 });
}
