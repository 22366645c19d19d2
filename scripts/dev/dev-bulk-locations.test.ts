// `warmpool dev`'s default BULK_LOCATIONS: each API_KEYS tenant gets a folder of its own beside
// the registry's models, which config accepts, and which keeps the tenants apart.
import { describe, expect, it } from 'vitest';
import { createBulkLocations } from '../../infra/bulk/locations.ts';
import { parseS3Url } from '../../infra/bulk/s3-url.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { devBulkLocations } from './main.ts';

const KEY = 'wp_0123456789abcdef0123';

describe('devBulkLocations', () => {
  it('gives the dev tenant s3://<S3_BUCKET>/bulk/dev/, which config accepts beside models/', () => {
    const env = { API_KEYS: `dev:${KEY}`, S3_BUCKET: 'warmpool' };
    expect(devBulkLocations(env)).toBe('dev:s3://warmpool/bulk/dev/');
    const config = loadConfig({ ...env, BULK_LOCATIONS: devBulkLocations(env) });
    expect(config.bulk.locations).toEqual([{ tenant: 'dev', bucket: 'warmpool', prefix: 'bulk/dev/' }]);
    expect(() => createBulkLocations(config).check('dev', parseS3Url('s3://warmpool/bulk/dev/in/', 'input'), 'input')).not.toThrow();
  });

  it('one folder per tenant, under S3_PREFIX, and no tenant reaches another’s', () => {
    const env = { API_KEYS: `a:${KEY},b:${KEY}x,a:${KEY}y`, S3_BUCKET: 'data', S3_PREFIX: '/team/' };
    expect(devBulkLocations(env)).toBe('a:s3://data/team/bulk/a/;b:s3://data/team/bulk/b/');
    const locations = createBulkLocations(loadConfig({ ...env, BULK_LOCATIONS: devBulkLocations(env) }));
    expect(() => locations.check('a', parseS3Url('s3://data/team/bulk/b/in/', 'input'), 'input')).toThrow(/not inside/);
  });

  it('the bucket defaults to config’s (warmpool)', () => {
    expect(devBulkLocations({ API_KEYS: `dev:${KEY}` })).toBe('dev:s3://warmpool/bulk/dev/');
  });
});
