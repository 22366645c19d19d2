/**
 * `s3://bucket/prefix/` locations in one normal form, for config (BULK_LOCATIONS, validated at
 * start) and for requests (a bulk run's input and output) alike, so the two compare as equals.
 * Pure parsing, below config and the bulk subsystem.
 *
 * The normal form: the bucket by S3's naming rules; the prefix empty (the whole bucket) or
 * segments joined by '/' and ending with '/'. A prefix ending with '/' is what makes "inside"
 * a plain string test: `runs/a/` never matches `runs/ab/…`, and `s3://a-data/` never matches
 * `s3://a-data-evil/` (buckets compare whole).
 *
 * Refused, never resolved: empty segments (`//`, a leading '/'), `.` and `..` segments, '%'
 * (no layer gets to decode `%2F` into a '/' the check did not see), '\' and control characters.
 * S3 itself treats keys as opaque strings, but S3-compatible servers on a file system, proxies
 * and HTTP stacks may normalise a path: a check made on one spelling and an access made on
 * another is how a prefix check is escaped, so only spellings with one meaning are accepted.
 */

export interface S3Area {
  bucket: string;
  /** '' (the whole bucket) or ends with '/'. */
  prefix: string;
}

/** S3's bucket naming rules, loosely: what an S3-compatible server also accepts. */
const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const FORBIDDEN_CHARS = /[%\\\u0000-\u001f\u007f]/;

/** The location in normal form, or why it is refused (a sentence fragment naming the part). */
export function parseS3Location(url: string): S3Area | { error: string } {
  const match = /^s3:\/\/([^/]*)(?:\/(.*))?$/.exec(url.trim());
  if (!match) return { error: `must look like s3://bucket/prefix/, got "${url}"` };
  const bucket = match[1] as string;
  if (!BUCKET.test(bucket) || bucket.includes('..')) return { error: `"${bucket}" is not a valid bucket name` };
  let prefix = match[2] ?? '';
  if (prefix === '') return { bucket, prefix };
  if (FORBIDDEN_CHARS.test(prefix)) return { error: `prefix "${prefix}" has '%', '\\' or a control character` };
  if (!prefix.endsWith('/')) prefix += '/';
  const segments = prefix.slice(0, -1).split('/');
  if (segments.some((s) => s === '')) return { error: `prefix "${prefix}" has an empty path segment` };
  if (segments.some((s) => s === '.' || s === '..')) return { error: `prefix "${prefix}" has a "." or ".." segment` };
  return { bucket, prefix };
}

export function formatS3Location(area: S3Area, key = area.prefix): string {
  return `s3://${area.bucket}/${key}`;
}

/** Whether `inner` lies inside `outer` (the same bucket, `outer`'s prefix a folder of `inner`'s, or equal). */
export function isWithin(inner: S3Area, outer: S3Area): boolean {
  return inner.bucket === outer.bucket && inner.prefix.startsWith(outer.prefix);
}

/** Whether one lies inside the other. */
export function overlaps(a: S3Area, b: S3Area): boolean {
  return isWithin(a, b) || isWithin(b, a);
}

/**
 * Where the model registry keeps models: `<S3_PREFIX>/models/` in S3_BUCKET
 * (infra/registry/model-registry.ts builds its keys from this). Never a bulk location.
 */
export function registryModelsArea(bucket: string, s3Prefix: string): S3Area {
  const p = s3Prefix.replace(/^\/+|\/+$/g, '');
  return { bucket, prefix: p ? `${p}/models/` : 'models/' };
}
