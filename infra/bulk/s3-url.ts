/**
 * `s3://bucket/prefix/` locations for bulk inputs and outputs. The prefix is kept as given but
 * always ends with '/' (or is empty for the whole bucket), so `prefix + name` never merges a
 * key into a neighbouring folder (`runs/a` would also match `runs/ab…`).
 */

import type { S3Location } from '../contracts/bulk.ts';
import { InvalidInputError } from '../kernel/errors.ts';

/** S3's bucket naming rules, loosely: what an S3-compatible server also accepts. */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

export function parseS3Url(url: unknown, field: string): S3Location {
  if (typeof url !== 'string') throw invalid(field, `must be an s3:// URL, got ${JSON.stringify(url ?? null)}`);
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url.trim());
  if (!match) throw invalid(field, `must look like s3://bucket/prefix/, got "${url}"`);
  const bucket = match[1] as string;
  if (!BUCKET.test(bucket)) throw invalid(field, `"${bucket}" is not a valid bucket name`);
  let prefix = match[2] as string;
  if (prefix.includes('//') || prefix.startsWith('/')) throw invalid(field, `prefix "${prefix}" has an empty path segment`);
  if (prefix !== '' && !prefix.endsWith('/')) prefix += '/';
  return { bucket, prefix };
}

export function formatS3Url(location: S3Location, key = location.prefix): string {
  return `s3://${location.bucket}/${key}`;
}

/** Whether one location lies inside the other (same bucket, one prefix under the other): outputs must never be read as inputs. */
export function overlaps(a: S3Location, b: S3Location): boolean {
  return a.bucket === b.bucket && (a.prefix.startsWith(b.prefix) || b.prefix.startsWith(a.prefix));
}

function invalid(field: string, message: string): InvalidInputError {
  return new InvalidInputError('invalid_location', `"${field}" ${message}`);
}
