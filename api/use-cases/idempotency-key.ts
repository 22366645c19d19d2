/**
 * The Idempotency-Key's rules: the header's form, and what makes two submissions "the same
 * request" (its fingerprint). Apart from submit-job.ts, which claims and commits the key
 * (api/http/idempotency.ts stores it), because both are pure functions of the request.
 */
import { createHash } from 'node:crypto';
import { InvalidInputError } from '../../infra/kernel/errors.ts';

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

function sortKeys(_key: string, value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries);
}

/** The Idempotency-Key header: 1 to 255 printable ASCII characters. */
export function parseIdempotencyKey(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (!/^[\x20-\x7e]{1,255}$/.test(raw)) {
    throw new InvalidInputError(
      'invalid_idempotency_key',
      `Idempotency-Key must be 1 to 255 printable ASCII characters (got ${raw.length} characters${/[^\x20-\x7e]/.test(raw) ? ', some not printable' : ''})`,
    );
  }
  return raw;
}
