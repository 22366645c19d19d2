/**
 * Which S3 locations a tenant's bulk runs may touch: a run's input and its output must each lie
 * inside one of the tenant's BULK_LOCATIONS (config.ts, kernel/bulk-locations.ts), and never
 * overlap the model registry's models folder. Asked before any S3 call a run makes — the
 * listings that check the input and the empty output included — when a run is started, and
 * again each time a run is driven (a location an operator took back, or a run recorded before
 * locations existed, ends as `failed` with `location_forbidden` instead of reading on).
 *
 * Everything outside is the same 403 `location_forbidden`, whether the bucket exists, is
 * another tenant's, or is the registry's: the answer says nothing about what lies there. The
 * message names only the caller's own locations.
 */
import type { S3Location } from '../contracts/bulk.ts';
import type { BulkLocationGrant } from '../kernel/bulk-locations.ts';
import type { Config } from '../kernel/config.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { formatS3Location, isWithin, overlaps, registryModelsArea, type S3Area } from '../kernel/s3-location.ts';

export interface BulkLocations {
  /** Throws InvalidInputError 403 `location_forbidden` unless `location` may be used by `tenant` as `field`. */
  check(tenant: string, location: S3Location, field: 'input' | 'output'): void;
  /** The tenant's locations (for messages and the CLI). */
  of(tenant: string): readonly S3Area[];
}

export function createBulkLocations(config: Pick<Config, 'bulk' | 's3'>): BulkLocations {
  return bulkLocations(config.bulk.locations, registryModelsArea(config.s3.bucket, config.s3.prefix));
}

export function bulkLocations(grants: readonly BulkLocationGrant[], registry: S3Area): BulkLocations {
  const byTenant = new Map<string, S3Area[]>();
  for (const { tenant, bucket, prefix } of grants) {
    const list = byTenant.get(tenant) ?? [];
    list.push({ bucket, prefix });
    byTenant.set(tenant, list);
  }
  const of = (tenant: string): readonly S3Area[] => byTenant.get(tenant) ?? [];
  return {
    of,
    check(tenant, location, field) {
      const own = of(tenant);
      if (own.length === 0) {
        throw forbidden(`tenant ${tenant} has no bulk locations; an operator grants them in BULK_LOCATIONS`);
      }
      // The registry check is config's too (it refuses such grants at start); kept here so no
      // policy built another way can hand out the models folder.
      if (overlaps(location, registry) || !own.some((area) => isWithin(location, area))) {
        throw forbidden(
          `"${field}" ${formatS3Location(location)} is not inside one of tenant ${tenant}'s bulk locations (${own.map((a) => formatS3Location(a)).join(', ')})`,
        );
      }
    },
  };
}

function forbidden(message: string): InvalidInputError {
  return new InvalidInputError('location_forbidden', message, { status: 403 });
}
