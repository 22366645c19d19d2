/**
 * BODY_LIMIT_BYTES over real HTTP on @hono/node-server (api/http/body-limit.ts): a body judged by
 * its Content-Length alone, a chunked one counted while read, both 413 `body_too_large` with
 * Connection: close; bodies within the limit reach the route either way.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../infra/kernel/config.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { testEnv } from './support/services.ts';

const KEY = 'key-aaaaaaaaaaaaaaaa';
const LIMIT = 64 * 1024;
let api: TestApi;

beforeAll(async () => {
  api = await startTestApi(loadConfig(testEnv({ BODY_LIMIT_BYTES: String(LIMIT) })));
});

afterAll(async () => {
  await api?.close();
});

function post(body: Buffer, chunked: boolean): Promise<{ status: number; code?: string; connection?: string }> {
  const url = new URL(`${api.url}/v1/models/nope/jobs`);
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
    if (!chunked) headers['content-length'] = body.length;
    const req = http.request(url, { method: 'POST', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: string } }).error?.code;
        resolve({ status: res.statusCode ?? 0, code, connection: res.headers.connection });
      });
    });
    req.on('error', reject);
    if (chunked) req.write(body);
    req.end(chunked ? undefined : body);
  });
}

/** A JSON object of exactly `size` bytes: valid, so a body that is read gets past the parser. */
function jsonOf(size: number): Buffer {
  const head = '{"inputs":[],"pad":"';
  return Buffer.from(`${head}${'x'.repeat(size - head.length - 2)}"}`);
}

describe('body limit on node-server', () => {
  it.each([
    ['with Content-Length', false],
    ['chunked', true],
  ])('refuses a body over the limit %s with 413 and Connection: close', async (_label, chunked) => {
    expect(await post(jsonOf(LIMIT + 1), chunked)).toMatchObject({ status: 413, code: 'body_too_large', connection: 'close' });
  });

  it.each([
    ['with Content-Length', false],
    ['chunked', true],
  ])('reads a body at the limit %s (the route answers, here 404 for an unknown model)', async (_label, chunked) => {
    const answer = await post(jsonOf(LIMIT), chunked);
    expect(answer.code).not.toBe('body_too_large');
    expect(answer.status).toBeLessThan(500);
  });
});
