/**
 * The deployment store on a real Redis: revisions, history, rollback, and the compare-and-set
 * that keeps concurrent writers from losing each other's changes. Each test has its own prefix
 * and deletes its keys.
 */
import type { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { redisPrefixes, testServices, uniqueId } from '../../test/support/services.ts';
import { InvalidInputError, NotFoundError } from '../kernel/errors.ts';
import { closeRedis, createRedis } from '../redis/client.ts';
import {
  applyChange,
  createDeploymentStore,
  type DeploymentInput,
  type DeploymentStore,
  stableVersion,
  validateDeployment,
} from './deployment-store.ts';

const redis = createRedis(testServices().redisUrl);
const other = createRedis(testServices().redisUrl); // a second client, as a second API process would be
const prefixes = redisPrefixes(redis);

afterEach(async () => {
  await prefixes.cleanup();
});

afterAll(async () => {
  await closeRedis(redis);
  await closeRedis(other);
});

let tick = Date.parse('2024-05-01T00:00:00.000Z');
function newStore(options: { historyLimit?: number; client?: Redis; prefix?: string } = {}): DeploymentStore {
  const prefix = options.prefix ? prefixes.track(options.prefix) : prefixes.take('deployments');
  return createDeploymentStore(options.client ?? redis, prefix, { now: () => (tick += 1000), historyLimit: options.historyLimit });
}

const base = { model: 'scorer', min: 1, max: 2, standby: 0 };

async function rejection(promise: Promise<unknown>): Promise<InvalidInputError | NotFoundError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof InvalidInputError || err instanceof NotFoundError)) throw new Error(`expected a client error, got ${String(err)}`);
  return err;
}

describe('validateDeployment', () => {
  it.each<[string, Partial<DeploymentInput>, RegExp]>([
    ['no version', {}, /at least one version/],
    ['both forms', { version: '1', versions: [{ version: '1', weight: 100 }] }, /either "version" or "versions"/],
    ['weights short of 100', { versions: [{ version: '1', weight: 80 }] }, /sum to 100 \(got 80\)/],
    [
      'weights past 100',
      {
        versions: [
          { version: '1', weight: 90 },
          { version: '2', weight: 20 },
        ],
      },
      /sum to 100 \(got 110\)/,
    ],
    [
      'a duplicate',
      {
        versions: [
          { version: '1', weight: 50 },
          { version: '1', weight: 50 },
        ],
      },
      /"1" is listed twice/,
    ],
    [
      'a negative weight',
      {
        versions: [
          { version: '1', weight: 100 },
          { version: '2', weight: -10 },
          { version: '3', weight: 10 },
        ],
      },
      /weight of version "2" must be an integer percent between 0 and 100 \(got -10\)/,
    ],
    [
      'a fractional weight',
      {
        versions: [
          { version: '1', weight: 99.5 },
          { version: '2', weight: 0.5 },
        ],
      },
      /integer percent/,
    ],
    ['a bad version name', { version: '../1' }, /invalid version "..\/1"/],
    ['eleven versions', { versions: Array.from({ length: 11 }, (_, i) => ({ version: `${i}`, weight: i === 0 ? 100 : 0 })) }, /at most 10/],
    ['min above max', { version: '1', min: 3, max: 2 }, /max \(2\) is below min \(3\)/],
    ['a negative min', { version: '1', min: -1 }, /min must be an integer/],
    ['max 0', { version: '1', min: 0, max: 0 }, /max must be at least 1/],
    ['fractional standby', { version: '1', standby: 1.5 }, /standby must be an integer/],
    ['backlogMax 0', { version: '1', backlogMax: 0 }, /backlogMax must be an integer between 1/],
    ['a policy that is an array', { version: '1', policy: [] as unknown as Record<string, unknown> }, /policy must be a JSON object/],
    ['a huge policy', { version: '1', policy: { blob: 'x'.repeat(20_000) } }, /policy is \d+ bytes/],
    ['a bad model name', { model: 'no/slash', version: '1' }, /invalid model name/],
  ])('refuses %s with a message that says why', (_label, patch, message) => {
    const input = { ...base, ...patch };
    expect(() => validateDeployment(input)).toThrow(InvalidInputError);
    expect(() => validateDeployment(input)).toThrow(message);
  });

  it('expands the one-version shorthand; the stable version is the heaviest, the first on a tie', () => {
    expect(validateDeployment({ ...base, version: '7' }).versions).toEqual([{ version: '7', weight: 100 }]);
    expect(
      stableVersion([
        { version: 'a', weight: 10 },
        { version: 'b', weight: 90 },
      ]),
    ).toBe('b');
    expect(
      stableVersion([
        { version: 'a', weight: 50 },
        { version: 'b', weight: 50 },
      ]),
    ).toBe('a');
  });

  it('merges a change: absent keeps, null clears, a new deployment gets defaults and the latest version', () => {
    const current = { versions: [{ version: '1', weight: 100 }], min: 2, max: 5, standby: 1, backlogMax: 100, policy: { a: 1 } };
    expect(applyChange('m', current, { min: 3 })).toEqual({ model: 'm', ...current, min: 3 });
    expect(applyChange('m', current, { backlogMax: null, policy: null, version: '2' })).toEqual({
      model: 'm',
      version: '2',
      min: 2,
      max: 5,
      standby: 1,
    });
    expect(applyChange('m', null, { min: 4 }, '9')).toEqual({ model: 'm', version: '9', min: 4, max: 4, standby: 0 });
    expect(applyChange('m', null, {}, '9')).toEqual({ model: 'm', version: '9', min: 1, max: 1, standby: 0 });
  });
});

describe('createDeploymentStore', () => {
  it('stores revisions with a derived stable version, and lists deployments by model', async () => {
    const store = newStore();
    const first = await store.put({ ...base, version: '1' });
    expect(first).toMatchObject({ model: 'scorer', version: '1', versions: [{ version: '1', weight: 100 }], revision: 1 });
    const second = await store.put({
      ...base,
      versions: [
        { version: '1', weight: 10 },
        { version: '2', weight: 90 },
      ],
      backlogMax: 50,
    });
    expect(second).toMatchObject({ version: '2', revision: 2, backlogMax: 50 });
    expect(await store.get('scorer')).toEqual(second);
    await store.put({ ...base, model: 'alpha', version: '3' });
    expect((await store.list()).map((d) => [d.model, d.revision])).toEqual([
      ['alpha', 1],
      ['scorer', 2],
    ]);
    expect(await store.get('missing')).toBeNull();
  });

  it('answers 409 to all but one of concurrent writes pinned to the same revision', async () => {
    const store = newStore();
    const twin = createDeploymentStore(other, prefixes.last() as string);
    await store.put({ ...base, version: '1' });
    const writes = Array.from({ length: 8 }, (_, i) =>
      (i % 2 === 0 ? store : twin).put({ ...base, version: '1', min: i, max: 10 }, { ifRevision: 1 }).then(
        (d) => ({ ok: d.min }),
        (err: unknown) => ({ err }),
      ),
    );
    const results = await Promise.all(writes);
    const won = results.flatMap((r) => ('ok' in r ? [r.ok] : []));
    expect(won).toHaveLength(1);
    for (const r of results) {
      if ('err' in r) expect(r.err).toMatchObject({ code: 'revision_conflict', status: 409 });
    }
    expect(await store.get('scorer')).toMatchObject({ revision: 2, min: won[0] });
  });

  it('loses no change when unpinned read-modify-writes race', async () => {
    const store = newStore();
    const twin = createDeploymentStore(other, prefixes.last() as string);
    await store.put({ ...base, version: '1', min: 0, max: 100 });
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        (i % 2 === 0 ? store : twin).update('scorer', (current) => applyChange('scorer', current, { min: (current?.min ?? 0) + 1 })),
      ),
    );
    expect(await store.get('scorer')).toMatchObject({ min: 10, revision: 11 });
    expect((await store.history('scorer')).map((d) => d.revision)).toEqual([11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]);
  });

  it('ifRevision 0 means "create only"', async () => {
    const store = newStore();
    await store.put({ ...base, version: '1' }, { ifRevision: 0 });
    expect(await rejection(store.put({ ...base, version: '2' }, { ifRevision: 0 }))).toMatchObject({ code: 'revision_conflict' });
  });

  it('rolls back to the previous config as a new revision; a second rollback undoes the first', async () => {
    const store = newStore();
    await store.put({ ...base, version: '1', policy: { targetUtilisation: 0.7 } });
    await store.put({
      ...base,
      versions: [
        { version: '1', weight: 90 },
        { version: '2', weight: 10 },
      ],
      min: 2,
      max: 4,
    });
    const back = await store.rollback('scorer');
    expect(back).toMatchObject({
      version: '1',
      versions: [{ version: '1', weight: 100 }],
      min: 1,
      max: 2,
      policy: { targetUtilisation: 0.7 },
      revision: 3,
      restoredFrom: 1,
    });
    expect(await store.get('scorer')).toEqual(back);
    expect(await store.rollback('scorer')).toMatchObject({
      versions: [
        { version: '1', weight: 90 },
        { version: '2', weight: 10 },
      ],
      revision: 4,
      restoredFrom: 2,
    });
    expect(await rejection(store.rollback('scorer', { ifRevision: 3 }))).toMatchObject({ code: 'revision_conflict', status: 409 });
  });

  it('refuses a rollback with nothing before it (409) or nothing deployed (404)', async () => {
    const store = newStore();
    expect(await rejection(store.rollback('scorer'))).toMatchObject({ code: 'deployment_not_found', status: 404 });
    await store.put({ ...base, version: '1' });
    expect(await rejection(store.rollback('scorer'))).toMatchObject({ code: 'no_previous_revision', status: 409 });
  });

  it('keeps a capped history, newest first', async () => {
    const store = newStore({ historyLimit: 3 });
    for (let min = 1; min <= 5; min++) await store.put({ ...base, version: '1', min, max: 5 });
    const history = await store.history('scorer');
    expect(history.map((d) => [d.revision, d.min])).toEqual([
      [5, 5],
      [4, 4],
      [3, 3],
    ]);
    expect((history[1]?.updatedAt ?? '') < (history[0]?.updatedAt ?? '')).toBe(true);
  });

  it('never reuses a revision number, even after a remove', async () => {
    const store = newStore();
    await store.put({ ...base, version: '1' });
    await store.put({ ...base, version: '2' });
    expect(await store.remove('scorer')).toBe(true);
    expect(await store.remove('scorer')).toBe(false);
    expect(await store.get('scorer')).toBeNull();
    expect(await store.put({ ...base, version: '3' })).toMatchObject({ revision: 3 });
  });

  it('reads a record written before versions and revisions existed, and writes on top of it', async () => {
    const prefix = uniqueId('deployments');
    const store = newStore({ prefix });
    const legacy = { model: 'scorer', version: '4', min: 1, max: 1, standby: 0, updatedAt: '2024-01-01T00:00:00.000Z' };
    await redis.hset(`${prefix}:{deployments}`, 'scorer', JSON.stringify(legacy));
    expect(await store.get('scorer')).toEqual({ ...legacy, versions: [{ version: '4', weight: 100 }], revision: 0 });
    expect(await store.update('scorer', (current) => applyChange('scorer', current, { min: 1, max: 3 }))).toMatchObject({
      version: '4',
      max: 3,
      revision: 1,
    });
  });

  it('refuses a change function that names another model', async () => {
    const store = newStore();
    expect(await rejection(store.update('scorer', () => ({ ...base, model: 'other', version: '1' })))).toMatchObject({
      code: 'invalid_deployment',
    });
    expect(await store.get('scorer')).toBeNull();
  });
});

describe('fallback', () => {
  it.each<[string, unknown, RegExp]>([
    ['not an object', 'lite', /fallback must be an object/],
    ['a bad model name', { model: 'no spaces allowed' }, /invalid fallback model name/],
    ['a bad version', { model: 'lite', version: 'a b' }, /invalid fallback version/],
    ['an unknown field', { model: 'lite', weight: 5 }, /unknown field weight/],
    ['itself', { model: 'scorer' }, /must be another model, or a version of scorer that this deployment does not serve/],
    ['a version it serves', { model: 'scorer', version: '1' }, /must be another model/],
  ])('refuses %s', (_name, fallback, message) => {
    const err = (() => {
      try {
        validateDeployment({ ...base, version: '1', fallback: fallback as DeploymentInput['fallback'] });
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as Error).message).toMatch(message);
  });

  it('is kept by changes that do not name it, cleared by null, and restored by a rollback', async () => {
    const store = newStore();
    const put = (change: Parameters<typeof applyChange>[2]) => store.update('scorer', (current) => applyChange('scorer', current, change));
    expect(await put({ version: '1', fallback: { model: 'scorer', version: '0-lite' } })).toMatchObject({
      fallback: { model: 'scorer', version: '0-lite' },
    });
    expect(await put({ max: 4 })).toMatchObject({ max: 4, fallback: { model: 'scorer', version: '0-lite' } });
    expect(await put({ fallback: null })).not.toHaveProperty('fallback');
    expect(await store.rollback('scorer')).toMatchObject({ fallback: { model: 'scorer', version: '0-lite' } });
    expect(await put({ fallback: { model: 'lite' } })).toMatchObject({ fallback: { model: 'lite' } });
  });
});

describe('a deployment’s shared pool', () => {
  it('is validated by the pool name rule', async () => {
    const err = await rejection(Promise.resolve().then(() => validateDeployment({ ...base, version: '1', pool: 'GPU' })));
    expect(err).toMatchObject({ code: 'invalid_deployment', status: 400 });
    expect(err.message).toMatch(/invalid pool name "GPU"/);
    expect(validateDeployment({ ...base, version: '1', pool: 'gpu-a' }).pool).toBe('gpu-a');
    expect(validateDeployment({ ...base, version: '1' })).not.toHaveProperty('pool');
  });

  it('is kept by a change that does not name it, and cleared by null', () => {
    const current = { ...validateDeployment({ ...base, version: '1', pool: 'gpu-a' }) };
    expect(applyChange('scorer', current, { max: 3 }).pool).toBe('gpu-a');
    expect(applyChange('scorer', current, { pool: 'cpu' }).pool).toBe('cpu');
    expect(applyChange('scorer', current, { pool: null })).not.toHaveProperty('pool');
  });
});
