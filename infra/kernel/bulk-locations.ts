/**
 * BULK_LOCATIONS: which S3 locations each tenant's bulk runs may read and write (docs/SECURITY.md).
 *
 *   BULK_LOCATIONS="tenant-a:s3://a-data/,s3://a-out/;tenant-b:s3://b/scoring/"
 *
 * Entries are `tenant:location[,location…]`, separated by ';'. A tenant named twice gets the
 * locations of both entries. A tenant not named has none, so it can start no bulk run. Parsed
 * once at start by config.ts: a bad entry, or a location that overlaps the model registry's
 * models folder (a bulk run must never read or overwrite a model), stops the process naming the
 * variable.
 */
import { ConfigError } from './errors.ts';
import { formatS3Location, overlaps, parseS3Location, type S3Area } from './s3-location.ts';
import { TENANT_PATTERN } from './tenant.ts';

/** One location one tenant may use. */
export interface BulkLocationGrant extends S3Area {
  tenant: string;
}

export function parseBulkLocations(raw: string, registry: S3Area): BulkLocationGrant[] {
  const grants: BulkLocationGrant[] = [];
  for (const entry of raw
    .split(';')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const colon = entry.indexOf(':');
    const tenant = colon > 0 ? entry.slice(0, colon).trim() : '';
    if (!TENANT_PATTERN.test(tenant)) fail(`"${entry}" must be tenant:s3://bucket/prefix/[,…], tenant of [A-Za-z0-9_-]`);
    const urls = entry
      .slice(colon + 1)
      .split(',')
      .map((u) => u.trim())
      .filter(Boolean);
    if (urls.length === 0) fail(`tenant ${tenant} names no location`);
    for (const url of urls) {
      const area = parseS3Location(url);
      if ('error' in area) fail(`tenant ${tenant}'s location ${area.error}`);
      if (overlaps(area, registry)) {
        fail(
          `${formatS3Location(area)} (tenant ${tenant}) overlaps the model registry's ${formatS3Location(registry)}; ` +
            'bulk runs never read or write models: name a prefix beside it',
        );
      }
      grants.push({ tenant, ...area });
    }
  }
  return grants;
}

function fail(message: string): never {
  throw new ConfigError('invalid_config', `BULK_LOCATIONS: ${message}`);
}
