// The location matcher: how s3:// URLs are normalised, which ones a tenant's bulk runs may use,
// and how BULK_LOCATIONS is parsed and refused at start.
import { describe, expect, it } from 'vitest';
import { parseBulkLocations } from '../kernel/bulk-locations.ts';
import { loadConfig } from '../kernel/config.ts';
import { ConfigError, InvalidInputError } from '../kernel/errors.ts';
import { parseS3Location, registryModelsArea } from '../kernel/s3-location.ts';
import { bulkLocations, createBulkLocations } from './locations.ts';
import { parseS3Url } from './s3-url.ts';

const REGISTRY = registryModelsArea('models-bucket', 'prod');

function refusal(fn: () => void): InvalidInputError {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

function configError(raw: string, registry = REGISTRY): string {
  try {
    parseBulkLocations(raw, registry);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error(`expected ${JSON.stringify(raw)} to be refused`);
}

describe('parseS3Location', () => {
  it('gives one normal form: the prefix ends with "/", or is empty for the whole bucket', () => {
    expect(parseS3Location('s3://a-data/in')).toEqual({ bucket: 'a-data', prefix: 'in/' });
    expect(parseS3Location('s3://a-data/in/2024/')).toEqual({ bucket: 'a-data', prefix: 'in/2024/' });
    expect(parseS3Location(' s3://a-data/ ')).toEqual({ bucket: 'a-data', prefix: '' });
    expect(parseS3Location('s3://a-data')).toEqual({ bucket: 'a-data', prefix: '' });
  });

  it.each([
    ['a ".." segment', 's3://a-data/in/../../b-data/'],
    ['a trailing ".."', 's3://a-data/in/..'],
    ['a "." segment', 's3://a-data/./in/'],
    ['an empty segment', 's3://a-data/in//x/'],
    ['a leading slash', 's3://a-data//in/'],
    ['an encoded slash', 's3://a-data/in%2F..%2Fx/'],
    ['encoded dots', 's3://a-data/%2e%2e/x/'],
    ['a backslash', 's3://a-data/in\\..\\x/'],
    ['a control character', 's3://a-data/in\u0000/'],
    ['an upper-case bucket', 's3://A-Data/in/'],
    ['a bucket with ".."', 's3://a..b/in/'],
    ['no bucket', 's3:///in/'],
    ['another scheme', 'https://a-data/in/'],
  ])('refuses %s', (_, url) => {
    expect(parseS3Location(url)).toHaveProperty('error');
    expect(() => parseS3Url(url, 'input')).toThrow(InvalidInputError);
  });
});

describe('a tenant’s bulk locations', () => {
  const grants = parseBulkLocations('tenant-a:s3://a-data/,s3://shared/a/out/;tenant-b:s3://b-data/', REGISTRY);
  const policy = bulkLocations(grants, REGISTRY);
  const ok = (tenant: string, url: string) => policy.check(tenant, parseS3Url(url, 'input'), 'input');
  const refused = (tenant: string, url: string) => refusal(() => ok(tenant, url));

  it('allows what lies inside one of them, the location itself included', () => {
    expect(() => ok('tenant-a', 's3://a-data/')).not.toThrow();
    expect(() => ok('tenant-a', 's3://a-data/in/2024/')).not.toThrow();
    expect(() => ok('tenant-a', 's3://shared/a/out/')).not.toThrow();
    expect(() => ok('tenant-a', 's3://shared/a/out/run-1/')).not.toThrow();
    expect(() => ok('tenant-b', 's3://b-data/anything/')).not.toThrow();
  });

  it('refuses everything else with 403 location_forbidden', () => {
    for (const [tenant, url] of [
      ['tenant-a', 's3://b-data/'], // another tenant's
      ['tenant-b', 's3://a-data/in/'],
      ['tenant-a', 's3://a-data-evil/'], // a bucket that merely starts with the name
      ['tenant-a', 's3://shared/a/out-evil/'], // a folder that merely starts with the name
      ['tenant-a', 's3://shared/a/'], // the folder above
      ['tenant-a', 's3://shared/'], // the whole bucket
      ['tenant-a', 's3://no-such-bucket/x/'],
    ] as const) {
      const err = refused(tenant, url);
      expect(err.status, url).toBe(403);
      expect(err.code, url).toBe('location_forbidden');
    }
  });

  it('names only the caller’s own locations when it refuses', () => {
    const message = refused('tenant-b', 's3://a-data/in/').message;
    expect(message).toContain('s3://b-data/');
    // The asked location is echoed; tenant-a's locations are never listed.
    expect(message.replace('s3://a-data/in/', '')).not.toMatch(/a-data|shared/);
  });

  it('a tenant without locations can use none', () => {
    const err = refused('tenant-c', 's3://c-data/');
    expect(err.code).toBe('location_forbidden');
    expect(err.message).toMatch(/no bulk locations/);
  });

  it('never hands out the registry’s models, even from a grant made without config', () => {
    const wide = bulkLocations([{ tenant: 'ops', bucket: 'models-bucket', prefix: '' }], REGISTRY);
    expect(() => wide.check('ops', parseS3Url('s3://models-bucket/prod/bulk/', 'output'), 'output')).not.toThrow();
    expect(refusal(() => wide.check('ops', parseS3Url('s3://models-bucket/prod/models/m/1/', 'output'), 'output')).code).toBe(
      'location_forbidden',
    );
    expect(refusal(() => wide.check('ops', parseS3Url('s3://models-bucket/', 'input'), 'input')).code).toBe('location_forbidden');
  });
});

describe('BULK_LOCATIONS', () => {
  it('parses tenant:location[,location];… into normal-form grants, merging a tenant named twice', () => {
    expect(parseBulkLocations(' tenant-a:s3://a-data/in, s3://a-out ; tenant-b:s3://b-data/ ;tenant-a:s3://extra/x/', REGISTRY)).toEqual([
      { tenant: 'tenant-a', bucket: 'a-data', prefix: 'in/' },
      { tenant: 'tenant-a', bucket: 'a-out', prefix: '' },
      { tenant: 'tenant-b', bucket: 'b-data', prefix: '' },
      { tenant: 'tenant-a', bucket: 'extra', prefix: 'x/' },
    ]);
    expect(parseBulkLocations('', REGISTRY)).toEqual([]);
  });

  it('refuses a bad entry, naming the variable', () => {
    expect(configError('s3://a-data/')).toMatch(/^BULK_LOCATIONS: /);
    expect(configError('tenant a:s3://a-data/')).toMatch(/tenant of/);
    expect(configError('tenant-a:')).toMatch(/names no location/);
    expect(configError('tenant-a:s3://a-data/x/../y/')).toMatch(/tenant tenant-a's location/);
    expect(configError('tenant-a:https://a-data/')).toMatch(/s3:\/\/bucket/);
  });

  it('refuses a location that overlaps the model registry’s models folder', () => {
    expect(configError('ops:s3://models-bucket/')).toMatch(/overlaps the model registry's s3:\/\/models-bucket\/prod\/models\//);
    expect(configError('ops:s3://models-bucket/prod/')).toMatch(/overlaps/);
    expect(configError('ops:s3://models-bucket/prod/models/m/')).toMatch(/overlaps/);
    expect(configError('ops:s3://models-bucket/models/', registryModelsArea('models-bucket', ''))).toMatch(/overlaps/);
    // Beside it is fine.
    expect(parseBulkLocations('ops:s3://models-bucket/prod/bulk/', REGISTRY)).toHaveLength(1);
    expect(parseBulkLocations('ops:s3://models-bucket/bulk/', registryModelsArea('models-bucket', ''))).toHaveLength(1);
  });

  it('is read by loadConfig, which stops the process on a bad value', () => {
    const config = loadConfig({ S3_BUCKET: 'warmpool', BULK_LOCATIONS: 'dev:s3://warmpool/bulk/dev/' });
    expect(config.bulk.locations).toEqual([{ tenant: 'dev', bucket: 'warmpool', prefix: 'bulk/dev/' }]);
    expect(() => createBulkLocations(config).check('dev', parseS3Url('s3://warmpool/bulk/dev/in/', 'input'), 'input')).not.toThrow();
    expect(loadConfig({}).bulk.locations).toEqual([]);
    expect(() => loadConfig({ S3_BUCKET: 'warmpool', BULK_LOCATIONS: 'dev:s3://warmpool/' })).toThrow(/BULK_LOCATIONS: .*overlaps/);
  });
});
