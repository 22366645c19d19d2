/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): a secret is `whsec_` + base64
 * key bytes; the signature is `v1,` + base64 HMAC-SHA256 over `${id}.${timestampS}.${body}`.
 * During a secret rotation a message carries one signature per active secret, space-separated,
 * and a receiver accepts the message when any of them verifies.
 */
import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';
/** 24 bytes = 192 bits, within the spec's 24–64-byte recommendation. */
const SECRET_BYTES = 24;

export function newSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** `v1,<base64 HMAC-SHA256 of "id.timestampS.body">` under one `whsec_` secret. */
export function sign(secret: string, id: string, timestampS: number, body: string): string {
  const mac = createHmac('sha256', secretKey(secret)).update(`${id}.${timestampS}.${body}`).digest('base64');
  return `v1,${mac}`;
}

/** The `webhook-signature` value: one signature per secret, space-separated (rotation overlap). */
export function signatureHeader(secrets: readonly string[], id: string, timestampS: number, body: string): string {
  if (secrets.length === 0) throw new Error('signatureHeader needs at least one secret');
  return secrets.map((s) => sign(s, id, timestampS, body)).join(' ');
}

/** The three Standard Webhooks headers of one attempt. */
export function webhookHeaders(secrets: readonly string[], id: string, timestampS: number, body: string): Record<string, string> {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampS),
    'webhook-signature': signatureHeader(secrets, id, timestampS, body),
  };
}

function secretKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('a webhook secret starts with whsec_');
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
}
