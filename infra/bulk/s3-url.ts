/**
 * `s3://bucket/prefix/` locations for bulk inputs and outputs, in the normal form of
 * kernel/s3-location.ts (the one BULK_LOCATIONS is parsed into, so a request and a tenant's
 * locations compare as equals): the prefix always ends with '/' (or is empty for the whole
 * bucket), so `prefix + name` never merges a key into a neighbouring folder (`runs/a` would also
 * match `runs/ab…`), and spellings a server could read another way (`..`, `//`, '%') are refused.
 */

import type { S3Location } from '../contracts/bulk.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { formatS3Location, parseS3Location } from '../kernel/s3-location.ts';

export { overlaps } from '../kernel/s3-location.ts';

export function parseS3Url(url: unknown, field: string): S3Location {
  if (typeof url !== 'string') throw invalid(field, `must be an s3:// URL, got ${JSON.stringify(url ?? null)}`);
  const location = parseS3Location(url);
  if ('error' in location) throw invalid(field, location.error);
  return location;
}

export function formatS3Url(location: S3Location, key = location.prefix): string {
  return formatS3Location(location, key);
}

function invalid(field: string, message: string): InvalidInputError {
  return new InvalidInputError('invalid_location', `"${field}" ${message}`);
}
