/**
 * The Idempotency-Key header's form, checked where a submission arrives: the region's routes and
 * the edge gateway (api/edge/), which must refuse a bad key before it stores a submission under it.
 */
import { InvalidInputError } from '../../infra/kernel/errors.ts';

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
