/**
 * The deployment routes through `app.request()`, on a real Redis and a real S3 registry holding
 * versions 1–3 of a real ONNX model: create, split, merge, optimistic concurrency, rollback,
 * history, and a table of bad requests that must each be a 4xx naming the problem.
 */
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthEnv } from '../api/http/auth.ts';
import { errorHandler, notFoundHandler } from '../api/http/errors.ts';
import { deploymentRoutes } from '../api/routes/deployments.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { testEnv } from './support/services.ts';

const config = loadConfig(testEnv());
const redis = createRedis(config.redisUrl);
const store = createS3ObjectStore(config.s3);
const registry = createModelRegistry({ store, prefix: config.s3.prefix });
const deployments = createDeploymentStore(redis, config.queuePrefix);

const app = new Hono<AuthEnv>();
app.onError(errorHandler(undefined));
app.notFound(notFoundHandler);
app.use('*', async (c, next) => {
  c.set('tenant', 'tenant-a'); // what bearerAuth sets; auth itself is tested with the app
  await next();
});
app.route('/', deploymentRoutes({ deployments, catalog: registry }));

beforeAll(async () => {
  const bytes = buildMlpModel({ features: 4, hidden: 4, layers: 1 });
  for (const version of ['1', '2', '3']) await registry.publish({ name: 'scorer', version, bytes });
});

afterAll(async () => {
  for await (const keys of scanKeys(redis, `${config.queuePrefix}:*`)) await deleteMany(redis, keys);
  for (const o of await store.list(`${config.s3.prefix}/`)) await store.delete(o.key);
  await closeRedis(redis);
  store.close();
});

async function put(model: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return app.request(`/v1/deployments/${model}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

async function rollback(model: string, body?: unknown): Promise<Response> {
  return app.request(`/v1/deployments/${model}/rollback`, {
    method: 'POST',
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
}

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

describe('deployment routes', () => {
  // The tests in this block build on each other: one deployment's life, in order.
  it('creates a deployment of the latest version with default bounds', async () => {
    const res = await put('scorer', {});
    expect(res.status).toBe(200);
    expect(await json(res)).toMatchObject({
      model: 'scorer',
      version: '3',
      versions: [{ version: '3', weight: 100 }],
      min: 1,
      max: 1,
      standby: 0,
      revision: 1,
    });
    const got = await app.request('/v1/deployments/scorer');
    expect(got.status).toBe(200);
    expect(await json(got)).toMatchObject({ version: '3', revision: 1 });
  });

  it('splits traffic and merges: fields left out keep their values', async () => {
    await put('scorer', { min: 2, max: 6, backlogMax: 500, policy: { targetUtilisation: 0.7 } });
    const res = await put('scorer', {
      versions: [
        { version: '2', weight: 90 },
        { version: '3', weight: 10 },
      ],
    });
    expect(res.status).toBe(200);
    expect(await json(res)).toMatchObject({
      version: '2',
      versions: [
        { version: '2', weight: 90 },
        { version: '3', weight: 10 },
      ],
      min: 2,
      max: 6,
      backlogMax: 500,
      policy: { targetUtilisation: 0.7 },
      revision: 3,
    });
  });

  it('clears backlogMax and policy with null', async () => {
    const body = await json(await put('scorer', { backlogMax: null, policy: null }));
    expect(body).toMatchObject({ revision: 4, min: 2 });
    expect(body).not.toHaveProperty('backlogMax');
    expect(body).not.toHaveProperty('policy');
  });

  it('answers 422 for a version the registry lacks, and writes nothing', async () => {
    const res = await put('scorer', { version: '9' });
    expect(res.status).toBe(422);
    expect(await json(res)).toEqual({ error: { code: 'version_not_found', message: 'model scorer has no version 9' } });
    const other = await put('unpublished', { version: '1' });
    expect(other.status).toBe(422);
    expect(await json(other)).toMatchObject({ error: { code: 'model_not_found' } });
    expect(await json(await app.request('/v1/deployments/scorer'))).toMatchObject({ revision: 4 });
  });

  it('lets exactly one of concurrent PUTs pinned to a revision through (409 for the rest)', async () => {
    const responses = await Promise.all([1, 2, 3, 4].map((min) => put('scorer', { min, max: 6, ifRevision: 4 })));
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 409, 409, 409]);
    const conflict = responses.find((r) => r.status === 409) as Response;
    expect(await json(conflict)).toMatchObject({ error: { code: 'revision_conflict' } });
    expect(await json(await app.request('/v1/deployments/scorer'))).toMatchObject({ revision: 5 });
  });

  it('rolls back to the previous config, and lists the history newest first', async () => {
    const before = await json(await app.request('/v1/deployments/scorer'));
    const res = await rollback('scorer');
    expect(res.status).toBe(200);
    const restored = await json(res);
    expect(restored).toMatchObject({ revision: 6, restoredFrom: 4, min: 2, versions: before.versions });

    const stale = await rollback('scorer', { ifRevision: 5 });
    expect(stale.status).toBe(409);
    expect(await json(stale)).toMatchObject({ error: { code: 'revision_conflict' } });

    const history = await json(await app.request('/v1/deployments/scorer/history'));
    expect(history.model).toBe('scorer');
    expect((history.revisions as Array<{ revision: number }>).map((r) => r.revision)).toEqual([6, 5, 4, 3, 2, 1]);
  });

  it('lists deployments', async () => {
    await put('other', { version: '1' }).then((r) => expect(r.status).toBe(422)); // not published: not listed
    const list = await json(await app.request('/v1/deployments'));
    expect((list.deployments as Array<{ model: string }>).map((d) => d.model)).toEqual(['scorer']);
  });
});

it('answers 404 for what was never deployed, and 409 for a rollback with nothing before it', async () => {
  for (const path of ['/v1/deployments/ghost', '/v1/deployments/ghost/history']) {
    const res = await app.request(path);
    expect(res.status).toBe(404);
    expect(await json(res)).toMatchObject({ error: { code: 'deployment_not_found' } });
  }
  expect((await rollback('ghost')).status).toBe(404);

  await registry.publish({ name: 'single', version: '1', bytes: buildMlpModel({ features: 2, hidden: 2, layers: 1 }) });
  expect((await put('single', {})).status).toBe(200);
  const res = await rollback('single');
  expect(res.status).toBe(409);
  expect(await json(res)).toMatchObject({ error: { code: 'no_previous_revision' } });
});

it.each<[string, number, string, unknown, RegExp]>([
  ['weights short of 100', 400, 'invalid_deployment', { versions: [{ version: '1', weight: 50 }] }, /sum to 100 \(got 50\)/],
  [
    'a duplicate version',
    400,
    'invalid_deployment',
    {
      versions: [
        { version: '1', weight: 50 },
        { version: '1', weight: 50 },
      ],
    },
    /listed twice/,
  ],
  ['version and versions', 400, 'invalid_deployment', { version: '1', versions: [{ version: '1', weight: 100 }] }, /not both/],
  ['min above max', 400, 'invalid_deployment', { min: 5, max: 2 }, /max \(2\) is below min \(5\)/],
  ['a negative min', 400, 'invalid_body', { min: -1 }, /min:/],
  ['a string max', 400, 'invalid_body', { max: '4' }, /max:/],
  ['a fractional standby', 400, 'invalid_body', { standby: 0.5 }, /standby:/],
  ['backlogMax 0', 400, 'invalid_body', { backlogMax: 0 }, /backlogMax:/],
  ['a policy that is a list', 400, 'invalid_body', { policy: [1, 2] }, /policy:/],
  ['a weight that is a string', 400, 'invalid_body', { versions: [{ version: '1', weight: '100' }] }, /versions\.0\.weight:/],
  ['an unknown field', 400, 'invalid_body', { replicas: 3 }, /replicas/],
  ['a negative ifRevision', 400, 'invalid_body', { ifRevision: -1 }, /ifRevision:/],
  ['a bad version name', 400, 'invalid_deployment', { version: '../etc' }, /invalid version/],
  ['an array body', 400, 'invalid_body', [], /body:/],
  ['malformed JSON', 400, 'malformed_json', '{"min": ', /not valid JSON/],
])('PUT with %s → %i %s', async (_label, status, code, body, message) => {
  const res = await put('scorer', body);
  expect(res.status).toBe(status);
  const error = (await json(res)).error as { code: string; message: string };
  expect(error.code).toBe(code);
  expect(error.message).toMatch(message);
});

it('refuses a PUT that is not JSON (415) and a model name that cannot exist (400)', async () => {
  const res = await put('scorer', 'min=1', { 'content-type': 'text/plain' });
  expect(res.status).toBe(415);
  const bad = await put('bad.name', { version: '1' });
  expect(bad.status).toBe(400);
  expect(await json(bad)).toMatchObject({ error: { code: 'invalid_deployment', message: 'invalid model name "bad.name"' } });
});
