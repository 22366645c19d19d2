/**
 * The per-tenant budget of request-body bytes (RATE_LIMIT_BYTES_PER_S/BURST, issue 20) on a real
 * API over real HTTP and a real Redis: a tenant past its budget gets 429 `rate_limited` before
 * its body is read — an invalid JSON body is refused 429, never parsed into a 400 — on a
 * connection that still carries its next request; another tenant is unaffected; requests without
 * a body spend nothing; a chunked body costs the whole body limit; the budget refills with time
 * (the API's injected clock).
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { testEnv } from './support/services.ts';

const MiB = 1024 * 1024;
const KEY_A = 'key-aaaaaaaaaaaaaaaa';
const KEY_B = 'key-bbbbbbbbbbbbbbbb';
// 3 MiB of bytes that are not JSON: a 400 malformed_json when read, a 429 when not.
const NOT_JSON = Buffer.alloc(3 * MiB, 'x');

let api: TestApi;
const clock = new ManualClock(1_000_000);
// One socket, kept alive: a request after a refused one shows whether the connection survived.
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

beforeAll(async () => {
  const config = loadConfig(
    testEnv({
      BODY_LIMIT_BYTES: String(4 * MiB),
      RATE_LIMIT_RPS: '1000',
      RATE_LIMIT_BURST: '1000',
      RATE_LIMIT_BYTES_PER_S: String(MiB),
      RATE_LIMIT_BYTES_BURST: String(8 * MiB),
    }),
  );
  api = await startTestApi(config, { clock });
});

afterAll(async () => {
  agent.destroy();
  await api?.close();
});

interface Answer {
  status: number;
  code?: string;
  retryAfter?: string;
  connection?: string;
  reusedSocket: boolean;
}

/** POST a body to a job route, with Content-Length, or chunked when `chunked`. */
function post(key: string, body: Buffer, chunked = false): Promise<Answer> {
  const url = new URL(`${api.url}/v1/models/anything/jobs`);
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    if (!chunked) headers['content-length'] = body.length;
    const req = http.request(url, { method: 'POST', agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
        const { 'retry-after': retryAfter, connection } = res.headers;
        resolve({ status: res.statusCode ?? 0, code, retryAfter, connection, reusedSocket: req.reusedSocket });
      });
    });
    req.on('error', reject);
    // Written before end(): Node sends it chunked (end(body) alone would compute a Content-Length).
    if (chunked) req.write(body);
    req.end(chunked ? undefined : body);
  });
}

function get(key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(`${api.url}/v1/jobs/job_nope`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      })
      .on('error', reject);
  });
}

describe('request-body byte budget per tenant', () => {
  it('refuses 429 without reading the body once a tenant spends its bytes, and refills with time', async () => {
    // 8 MiB of burst: two 3 MiB bodies are read (and found not to be JSON), the third is not.
    for (let i = 0; i < 2; i++) expect(await post(KEY_A, NOT_JSON)).toMatchObject({ status: 400, code: 'malformed_json' });
    const refused = await post(KEY_A, NOT_JSON);
    // 2 MiB left, 3 needed at 1 MiB/s: one second. The 3 MiB are left unread, and the answer
    // says so: this connection ends, the client's next request takes a new one.
    expect(refused).toMatchObject({ status: 429, code: 'rate_limited', retryAfter: '1', connection: 'close' });
    const next = await post(KEY_B, NOT_JSON);
    expect(next).toMatchObject({ status: 400, code: 'malformed_json', reusedSocket: false });
    // Requests without a body spend no bytes.
    expect(await get(KEY_A)).toBe(404);
    // 999 ms: 2.999 MiB back, not yet 3; 1 ms more and the body is read again.
    clock.advance(999);
    expect(await post(KEY_A, NOT_JSON)).toMatchObject({ status: 429, code: 'rate_limited' });
    clock.advance(1);
    expect(await post(KEY_A, NOT_JSON)).toMatchObject({ status: 400, code: 'malformed_json' });
  });

  it('charges a body sent without Content-Length (chunked) the whole body limit, up front', async () => {
    // Tenant B spent 6 MiB above; let its 8 MiB burst refill (a second is 1 MiB).
    clock.advance(10_000);
    const tiny = Buffer.from('{');
    // 4 MiB each (BODY_LIMIT_BYTES) whatever its size: two pass, the third is refused.
    for (let i = 0; i < 2; i++) expect(await post(KEY_B, tiny, true)).toMatchObject({ status: 400, code: 'malformed_json' });
    expect(await post(KEY_B, tiny, true)).toMatchObject({ status: 429, code: 'rate_limited', retryAfter: '4' });
    // With a length the same byte costs one byte, and none is left: 429 until 1 ms has refilled it.
    expect(await post(KEY_B, tiny)).toMatchObject({ status: 429, code: 'rate_limited' });
    clock.advance(1);
    expect((await post(KEY_B, tiny)).status).toBe(400);
  });
});

describe('RATE_LIMIT_BYTES_PER_S / RATE_LIMIT_BYTES_BURST', () => {
  it('default to 32 MiB/s with a 64 MiB burst; 0 turns the budget off; a burst below the body limit is refused at start', () => {
    expect(loadConfig({}).rateLimit).toMatchObject({ bytesPerS: 32 * MiB, bytesBurst: 64 * MiB });
    expect(loadConfig({ RATE_LIMIT_BYTES_PER_S: '0', RATE_LIMIT_BYTES_BURST: '0' }).rateLimit.bytesPerS).toBe(0);
    expect(() => loadConfig({ RATE_LIMIT_BYTES_BURST: String(MiB) })).toThrow(/^RATE_LIMIT_BYTES_BURST: must be at least BODY_LIMIT_BYTES/);
    expect(() => loadConfig({ RATE_LIMIT_BYTES_PER_S: '-1' })).toThrow(/^RATE_LIMIT_BYTES_PER_S: /);
  });
});
