/**
 * What makes two submissions "the same request" for an Idempotency-Key (its fingerprint); the
 * header's form is api/http/idempotency-key-header.ts. Apart from submit-job.ts, which claims
 * and commits the key (api/http/idempotency.ts stores it), because it is a pure function of the
 * request.
 */
import { createHash } from 'node:crypto';

/**
 * What makes two submissions "the same request" for an Idempotency-Key: the model and version
 * asked for (not the one resolved: a redeploy in between must not turn a retry into a
 * conflict) and the body, as canonical JSON (object keys sorted), and its binary inputs' bytes
 * (by name, in name order), hashed.
 */
export function fingerprint(input: { model: string; version?: string; body: unknown; binary?: ReadonlyMap<string, Uint8Array> }): string {
  const canonical = JSON.stringify({ model: input.model, version: input.version ?? null, body: input.body }, sortKeys);
  const hash = createHash('sha256').update(canonical);
  const names = [...(input.binary?.keys() ?? [])].sort();
  for (const name of names) {
    const bytes = input.binary?.get(name) as Uint8Array;
    hash.update(`\0${name}\0${bytes.byteLength}\0`).update(bytes);
  }
  return hash.digest('hex');
}

/**
 * The id of the job a keyed submission makes: `job_` + 20 URL-safe characters of
 * sha256(tenant, key, fingerprint), the form of newJobId's. Being a function of the request, a
 * retry that finds no answer recorded (its first holder was killed between placing the job and
 * committing the key) can look the job up instead of placing a second one. A different request
 * under the same key (after its answer expired) gets a different id.
 */
export function keyedJobId(tenant: string, key: string, requestFingerprint: string): string {
  const digest = createHash('sha256').update(`${tenant}\0${key}\0${requestFingerprint}`).digest('base64url');
  return `job_${digest.slice(0, 20)}`;
}

function sortKeys(_key: string, value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries);
}
