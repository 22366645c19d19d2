/**
 * What a tenant's name may be, wherever config names one (`API_KEYS`, `BULK_LOCATIONS`): one
 * pattern, so a tenant that can hold a key can always be granted locations. Names go into Redis
 * keys and S3 prefixes (`bulk/<tenant>/`), hence no ':' or '/'.
 */
export const TENANT_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
