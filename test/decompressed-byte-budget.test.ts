/**
 * A compressed body costs the tenant's byte budget (RATE_LIMIT_BYTES_PER_S/BURST) what it inflates
 * to, not what was sent (issue 33), on a real API over real HTTP and a real Redis: small gzip
 * bodies that each inflate to MiBs are refused 429 once their inflated bytes pass the burst — after
 * a handful, not after the hundreds their compressed length would allow — while another tenant is
 * answered; the budget refills with the API's injected clock; a gzip bomb stops at the body limit
 * with 413, its inflation cut off there (the API, in this process, grows by MiBs, not by what the
 * bombs would inflate to).
 */
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { testEnv } from './support/services.ts';

const MiB = 1024 * 1024;
const KEY_A = 'key-aaaaaaaaaaaaaaaa';
const KEY_B = 'key-bbbbbbbbbbbbbbbb';
const BODY_LIMIT = 4 * MiB;
const BYTES_BURST = 16 * MiB;
// A JSON body of 3.5 MiB that gzips to a few KiB: the attack's shape (issue 33, row 2).
const INFLATED = Buffer.from(JSON.stringify({ inputs: [], pad: 'x'.repeat(3.5 * MiB) }));
const SMALL = gzipSync(INFLATED);

let api: TestApi;
const clock = new ManualClock(1_000_000);
// One socket, kept alive: a request after a refused one shows whether the connection survived.
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

beforeAll(async () => {
  const config = loadConfig(
    testEnv({
      BODY_LIMIT_BYTES: String(BODY_LIMIT),
      RATE_LIMIT_RPS: '1000',
      RATE_LIMIT_BURST: '1000',
      RATE_LIMIT_BYTES_PER_S: String(MiB),
      RATE_LIMIT_BYTES_BURST: String(BYTES_BURST),
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

function request(key: string, method: string, path: string, body?: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { authorization: `Bearer ${key}` };
    if (body) Object.assign(headers, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': body.length });
    const req = http.request(new URL(`${api.url}${path}`), { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: string } }).error?.code;
        const { 'retry-after': retryAfter, connection } = res.headers;
        resolve({ status: res.statusCode ?? 0, code, retryAfter, connection, reusedSocket: req.reusedSocket });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const submit = (key: string, body: Buffer) => request(key, 'POST', '/v1/models/anything/jobs', body);

describe('decompressed bytes against the byte budget', () => {
  it('refuses 429 once the inflated bytes pass the burst, not the compressed ones; another tenant is answered', async () => {
    expect(SMALL.length).toBeLessThan(16 * 1024);
    // By compressed length the 16 MiB burst holds over a thousand of these; inflated, four (14 MiB).
    for (let i = 0; i < 4; i++) {
      const answer = await submit(KEY_A, SMALL);
      // Read, inflated and parsed: the padding is a field the job body does not have.
      expect(answer, `body ${i + 1}`).toMatchObject({ status: 400, code: 'unknown_field' });
    }
    const refused = await submit(KEY_A, SMALL);
    expect(refused).toMatchObject({ status: 429, code: 'rate_limited' });
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    // The body as sent was read whole before inflating: the connection carries the next request.
    expect(refused.connection).not.toBe('close');
    // Another tenant, on that same connection: its reads and its own compressed body are answered.
    const deployments = await request(KEY_B, 'GET', '/v1/deployments');
    expect(deployments).toMatchObject({ status: 200, reusedSocket: true });
    expect(await submit(KEY_B, SMALL)).toMatchObject({ status: 400, code: 'unknown_field' });
    // Tenant A stays refused until its bucket refills (1 MiB/s, the API's clock).
    expect((await submit(KEY_A, SMALL)).status).toBe(429);
    clock.advance(4_000);
    expect(await submit(KEY_A, SMALL)).toMatchObject({ status: 400, code: 'unknown_field' });
  });

  it('stops a gzip bomb at the body limit with 413: the API grows by MiBs, not by what the bombs inflate to', async () => {
    clock.advance(60_000);
    // 256 MiB of zeros in 256 KiB; eight of them would be 2 GiB inflated.
    const bomb = gzipSync(Buffer.alloc(256 * MiB));
    expect(bomb.length).toBeLessThan(BODY_LIMIT / 8);
    const before = process.memoryUsage().rss;
    let peak = before;
    for (let i = 0; i < 8; i++) {
      // The bucket holds four bodies' limit at a time: refill it between bombs.
      clock.advance(10_000);
      expect(await submit(KEY_B, bomb)).toMatchObject({ status: 413, code: 'body_too_large' });
      peak = Math.max(peak, process.memoryUsage().rss);
    }
    // Each bomb inflates to BODY_LIMIT and a chunk, then stops; 64 MiB is room for the GC's lag.
    expect(peak - before).toBeLessThan(64 * MiB);
  });
});
