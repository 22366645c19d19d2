/**
 * Transport hygiene (issue 20 §5) on a real API server, real Redis and S3: slow clients are
 * dropped, failed keys are rate-limited per source address, `/metrics` and the pool's worker
 * details are not for every tenant, and a webhook attempt's error reaches the tenant only as a
 * category.
 */
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningDispatcher, startDispatcher } from '../api/dispatcher/main.ts';
import { CLIENT_ERROR_LINGER_MS } from '../api/http/client-errors.ts';
import { createDeliveryStore, type DeliveryStore } from '../api/webhooks/delivery-store.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { workerKey } from '../infra/redis/keys.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { testEnv } from './support/services.ts';
import { KEY_A, KEY_B } from './support/stack.ts';

const HEADERS_TIMEOUT_MS = 1_000;
const REQUEST_TIMEOUT_MS = 2_000;

interface SlowClient {
  /** Resolves when the server has closed the connection (the client never does). */
  closed: Promise<{ afterMs: number; reply: string }>;
}

/**
 * A slowloris: keeps its side open (allowHalfOpen) and sends one byte of `trickle` every
 * `everyMs`, starting after `opening` (or, with `silentUntilEnd`, only once the server has said it
 * is done), for as long as the socket lives. Only the server can end it: by destroying the socket.
 */
function slowClient(port: number, options: { opening?: string; trickle: string; everyMs: number; silentUntilEnd?: boolean }): SlowClient {
  const started = performance.now();
  const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
  let reply = '';
  let sent = 0;
  let sending = !options.silentUntilEnd;
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => (reply += chunk));
  socket.on('end', () => (sending = true));
  socket.on('error', () => undefined); // EPIPE/ECONNRESET once the server has destroyed it
  // Written now, so it is queued before any trickled byte however late the connection opens.
  if (options.opening) socket.write(options.opening, 'latin1');
  const timer = setInterval(() => {
    if (!sending || socket.destroyed || options.trickle === '') return;
    socket.write(options.trickle[sent++ % options.trickle.length] ?? 'x', 'latin1');
  }, options.everyMs);
  return {
    closed: new Promise((resolve) => {
      socket.once('close', () => {
        clearInterval(timer);
        resolve({ afterMs: performance.now() - started, reply });
      });
    }),
  };
}

/** Open TCP sockets of this process: the in-process API server's and the test's own clients. */
function tcpSockets(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
}

/** Sends a malformed request, waits for the answer and the server's FIN, and keeps its own side open. */
function halfOpenGarbage(port: number, request = 'NOT A REQUEST LINE\r\n\r\n'): Promise<{ socket: net.Socket; reply: string }> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port, allowHalfOpen: true });
    let reply = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => (reply += chunk));
    socket.on('error', () => undefined);
    socket.once('end', () => resolve({ socket, reply }));
    socket.write(request, 'latin1');
  });
}

async function eventually(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not true within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('slow clients', () => {
  let api: TestApi;
  let port: number;

  beforeAll(async () => {
    const config = loadConfig(testEnv({ HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS), REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) }));
    api = await startTestApi(config);
    port = Number(new URL(api.url).port);
  });

  afterAll(async () => {
    await api?.close();
  });

  it('destroys connections that trickle header bytes, send nothing, or trickle a body, within the timeouts', async () => {
    const headerBytes = `GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(10_000)}`;
    const body = JSON.stringify({ inputs: [{ name: 'features', shape: [1, 1], datatype: 'FP32', data: [1] }] });
    const clients = {
      headers: slowClient(port, { trickle: headerBytes, everyMs: 100 }),
      silent: slowClient(port, { trickle: 'x', everyMs: 100, silentUntilEnd: true }),
      body: slowClient(port, {
        opening:
          'POST /v1/models/any/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
          `Authorization: Bearer ${KEY_A}\r\nContent-Length: ${body.length * 100}\r\n\r\n`,
        trickle: body,
        everyMs: 100,
      }),
    };
    // Meanwhile the server answers everyone else.
    expect((await api.call('/v2/health/live')).status).toBe(200);
    const [headers, silent, slowBody] = await Promise.all([clients.headers.closed, clients.silent.closed, clients.body.closed]);
    for (const c of [headers, silent, slowBody]) {
      expect(c.reply).toMatch(/^HTTP\/1\.1 408 /);
      expect(c.reply).toContain('"code":"request_timeout"');
      // Order of magnitude: seconds (the timeouts plus Node's check period), where a socket was held 400 s.
      expect(c.afterMs).toBeLessThan(10 * REQUEST_TIMEOUT_MS);
    }
    expect((await api.call('/v2/health/live')).status).toBe(200);
  }, 30_000);
});

describe('malformed requests', () => {
  let api: TestApi;
  let port: number;

  beforeAll(async () => {
    // Timeouts far away, so only the client-error handler can close these sockets in time.
    api = await startTestApi(loadConfig(testEnv({ HEADERS_TIMEOUT_MS: '60000', REQUEST_TIMEOUT_MS: '60000' })));
    port = Number(new URL(api.url).port);
  });

  afterAll(async () => {
    await api?.close();
  });

  it('answers malformed requests with JSON, then closes the sockets their clients keep half-open', async () => {
    // Each sends garbage, reads the answer and the server's FIN, then sends nothing and never
    // closes its side: with end() alone the server kept every one of those sockets open for good.
    const clients = 20;
    const before = tcpSockets();
    const oversized = `GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`;
    const sockets = await Promise.all([
      ...Array.from({ length: clients - 1 }, () => halfOpenGarbage(port)),
      halfOpenGarbage(port, oversized),
    ]);
    try {
      for (const { reply } of sockets.slice(0, -1)) {
        expect(reply).toMatch(/^HTTP\/1\.1 400 /);
        expect(reply).toContain('"code":"malformed_request"');
      }
      expect(sockets.at(-1)?.reply).toMatch(/^HTTP\/1\.1 431 /);
      expect(sockets.at(-1)?.reply).toContain('"code":"headers_too_large"');
      // Our clients' own sockets stay; the server's side of each must go (within the linger).
      await eventually(() => tcpSockets() <= before + clients, 10 * CLIENT_ERROR_LINGER_MS);
    } finally {
      for (const { socket } of sockets) socket.destroy();
    }
  }, 30_000);
});

describe('failed authentication, per source address', () => {
  const LIMIT = 5;
  const wrong = (n: number) => `wrong-key-${String(n).padStart(10, '0')}`;
  let direct: TestApi;
  let proxied: TestApi;

  beforeAll(async () => {
    direct = await startTestApi(loadConfig(testEnv({ AUTH_FAILURE_LIMIT_PER_MIN: String(LIMIT) })));
    // As behind one load balancer: the client's address is the last X-Forwarded-For entry.
    proxied = await startTestApi(loadConfig(testEnv({ AUTH_FAILURE_LIMIT_PER_MIN: String(LIMIT), TRUST_PROXY_HOPS: '1' })));
  });

  afterAll(async () => {
    await direct?.close();
    await proxied?.close();
  });

  async function errorOf(res: Response): Promise<{ status: number; code: string; retryAfter: string | null }> {
    const body = (await res.json()) as { error: { code: string } };
    return { status: res.status, code: body.error.code, retryAfter: res.headers.get('retry-after') };
  }

  it('answers 429 after N wrong keys from one address, while valid keys from it keep working', async () => {
    for (let i = 0; i < LIMIT; i++) {
      expect(await errorOf(await direct.call('/v1/models', { key: wrong(i) }))).toMatchObject({ status: 401, code: 'unauthorized' });
    }
    const refused = await errorOf(await direct.call('/v1/models', { key: wrong(LIMIT) }));
    expect(refused).toMatchObject({ status: 429, code: 'rate_limited' });
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    // Forging X-Forwarded-For does not move a client to a fresh bucket when no proxy is trusted.
    const forged = await direct.call('/v1/models', { key: wrong(LIMIT + 1), headers: { 'x-forwarded-for': '198.51.100.77' } });
    expect(forged.status).toBe(429);
    // Valid keys are never refused for their address's failures: the shared address of a load
    // balancer must not let one client lock every tenant out.
    expect((await direct.call('/v1/models', { key: KEY_A })).status).toBe(200);
    expect((await direct.call('/v1/models', { key: KEY_B })).status).toBe(200);
    // A request with no key guesses nothing: 401, and it draws nothing.
    expect(await errorOf(await direct.call('/v1/models'))).toMatchObject({ status: 401, code: 'unauthorized' });
  });

  it('counts each client behind trusted proxies on its own, and a forged X-Forwarded-For prefix changes nothing', async () => {
    const from = (address: string, forgedPrefix = '') => ({ 'x-forwarded-for': `${forgedPrefix}${address}` });
    for (let i = 0; i <= LIMIT; i++) await proxied.call('/v1/models', { key: wrong(i), headers: from('198.51.100.1') });
    expect((await proxied.call('/v1/models', { key: wrong(99), headers: from('198.51.100.1') })).status).toBe(429);
    expect((await proxied.call('/v1/models', { key: wrong(99), headers: from('198.51.100.1', '203.0.113.50, ') })).status).toBe(429);
    expect((await proxied.call('/v1/models', { key: wrong(99), headers: from('198.51.100.2') })).status).toBe(401);
    expect((await proxied.call('/v1/models', { key: KEY_A, headers: from('198.51.100.1') })).status).toBe(200);
  });
});

describe('/metrics and the pool are not for every tenant', () => {
  const METRICS_TOKEN = 'metrics-token-0123456789';
  const env = testEnv({ METRICS_PORT: '0', METRICS_TOKEN });
  const config = loadConfig(env);
  let redis: RedisClient;
  let api: TestApi;
  let metricsUrl: string;

  beforeAll(async () => {
    redis = createRedis(config.redisUrl);
    api = await startTestApi(config);
    metricsUrl = api.metricsUrl ?? '';
  });

  afterAll(async () => {
    await api?.close();
    if (redis) await closeRedis(redis);
  });

  it('answers /metrics to admin keys and METRICS_TOKEN only; METRICS_PORT serves it without auth, and nothing else', async () => {
    const status = async (key: string | null) => (await api.call('/metrics', { key })).status;
    expect(await status(null)).toBe(401);
    expect(await status('metrics-token-wrong-0000')).toBe(401);
    const ordinary = await api.call('/metrics', { key: KEY_B }); // tenant-b: not in ADMIN_TENANTS
    expect(ordinary.status).toBe(403);
    expect(((await ordinary.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    expect(await status(KEY_A)).toBe(200); // tenant-a: an admin (testEnv)
    const scraped = await api.call('/metrics', { key: METRICS_TOKEN });
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain('warmpool_http_requests_total');

    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    expect(new URL(metricsUrl).port).not.toBe(new URL(api.url).port);
    const open = await fetch(metricsUrl);
    expect(open.status).toBe(200);
    expect(open.headers.get('content-type')).toContain('text/plain');
    expect(await open.text()).toContain('warmpool_http_requests_total');
    for (const path of ['/v1/models', '/v2/health/live', '/']) {
      expect((await fetch(new URL(path, metricsUrl))).status).toBe(404);
    }
  });

  it("shows a worker's pid and host to admin tenants only; other tenants see the same pool with aliases", async () => {
    await createDeploymentStore(redis, config.queuePrefix).put({ model: 'pooled', version: '1', min: 1, max: 2, standby: 0 });
    const beat: HeartbeatPayload = {
      id: 'gpu-box-17.internal-31337-abcdef',
      model: 'pooled',
      version: '1',
      state: 'active',
      pid: 31337,
      host: 'gpu-box-17.internal',
      startedAt: Date.now() - 60_000,
      updatedAt: Date.now(),
      rowsPerS: 42,
      jobsInFlight: 0,
      memory: { rssBytes: 1, heapUsedBytes: 1 },
    };
    await redis.set(workerKey(config.queuePrefix, beat.id), JSON.stringify(beat), 'PX', 60_000);
    type Pool = { deployments: Array<{ model: string; workers: Array<Record<string, unknown>> }> };
    const workers = async (key: string) => {
      const res = await api.call('/v1/pool', { key });
      expect(res.status).toBe(200);
      return ((await res.json()) as Pool).deployments.find((d) => d.model === 'pooled')?.workers;
    };
    expect(await workers(KEY_A)).toEqual([expect.objectContaining({ id: beat.id, pid: 31337, host: 'gpu-box-17.internal' })]);
    const seen = await workers(KEY_B);
    expect(seen).toEqual([
      { id: expect.stringMatching(/^w-[0-9a-f]{12}$/), version: '1', state: 'active', rowsPerSec: 42, since: beat.startedAt },
    ]);
    expect(JSON.stringify(seen)).not.toMatch(/31337|gpu-box/);
  });
});

describe('webhook secrets and delivery errors, through a real dispatcher', () => {
  const config = loadConfig(testEnv({ WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1', WEBHOOK_RETRY_SCHEDULE_MS: '50' }));
  let redis: RedisClient;
  let store: DeliveryStore;
  const received: Array<{ path: string; headers: Record<string, string>; body: string }> = [];
  const receiver = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers as Record<string, string>, body });
      res.writeHead(204).end();
    });
  });
  /** What the dispatcher logged: the only place an attempt's error itself may appear. */
  const logged: string[] = [];
  const log = pino({ level: 'debug' }, new Writable({ write: (chunk, _enc, done) => done(void logged.push(String(chunk))) }));
  let api: TestApi;
  let dispatcher: RunningDispatcher;
  let n = 0;

  beforeAll(async () => {
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
    redis = createRedis(config.redisUrl);
    store = createDeliveryStore(redis, config.queuePrefix);
    api = await startTestApi(config);
    dispatcher = startDispatcher(config, log);
  });

  afterAll(async () => {
    await dispatcher?.close();
    await api?.close();
    if (redis) await closeRedis(redis);
    receiver.closeAllConnections();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  });

  /** A delivery for tenant-a, stored as the event source or the bulk notifier stores one. */
  async function deliver(url: string): Promise<string> {
    const id = `msg_hygiene_${n++}`;
    const payload = JSON.stringify({ type: 'job.succeeded', timestamp: new Date().toISOString(), data: { id } });
    await store.enqueue({ id, tenant: 'tenant-a', jobId: id, event: 'job.succeeded', url, payload }, Date.now());
    return id;
  }

  async function until<T>(read: () => Promise<T | undefined> | T | undefined): Promise<T> {
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
      const value = await read();
      if (value !== undefined) return value;
    }
    throw new Error('timed out');
  }

  const receiverUrl = (path: string) => `http://127.0.0.1:${(receiver.address() as AddressInfo).port}${path}`;
  const signatures = (path: string) => until(() => received.find((r) => r.path === path));

  it('signs with both secrets after a rotation, and with the new one only once the previous is revoked', async () => {
    type Secret = { secret: string; previous?: { secret: string } };
    const secretCall = async (path: string, method: string) => (await (await api.call(path, { method, key: KEY_A })).json()) as Secret;
    const first = await secretCall('/v1/webhooks/secret', 'GET');
    const rotated = await secretCall('/v1/webhooks/secret/rotate', 'POST');
    expect(rotated.previous?.secret).toBe(first.secret);
    await deliver(receiverUrl('/overlap'));
    const overlap = await signatures('/overlap');
    expect(overlap.headers['webhook-signature']?.split(' ')).toHaveLength(2);
    expect(() => new Webhook(first.secret).verify(overlap.body, overlap.headers)).not.toThrow();

    const revoked = await api.call('/v1/webhooks/secret/previous', { method: 'DELETE', key: KEY_A });
    expect(revoked.status).toBe(200);
    expect(await revoked.json()).toEqual({ secret: rotated.secret });
    expect(await secretCall('/v1/webhooks/secret', 'GET')).toEqual({ secret: rotated.secret });
    await deliver(receiverUrl('/revoked'));
    const after = await signatures('/revoked');
    expect(after.headers['webhook-signature']?.split(' ')).toHaveLength(1);
    expect(() => new Webhook(rotated.secret).verify(after.body, after.headers)).not.toThrow();
    expect(() => new Webhook(first.secret).verify(after.body, after.headers)).toThrow();
    // Another tenant's secret is its own business.
    expect((await api.call('/v1/webhooks/secret/previous', { method: 'DELETE', key: KEY_B })).status).toBe(200);
    expect(await secretCall('/v1/webhooks/secret', 'GET')).toEqual({ secret: rotated.secret });
  });

  it('refuses at submit a webhook to an IPv6 address that carries IPv4 (mapped, translated, 6to4, local NAT64, Teredo)', async () => {
    const hosts = [
      '[::ffff:8.8.8.8]',
      '[::ffff:0:8.8.8.8]',
      '[2002:a00:1::]',
      '[2002:808:808::1]',
      '[64:ff9b:1::a00:1]',
      '[2001:0:4136:e378::1]',
    ];
    for (const host of hosts) {
      const res = await api.call('/v1/models/any-model/jobs', {
        method: 'POST',
        key: KEY_A,
        body: JSON.stringify({
          inputs: [{ name: 'x', shape: [1, 1], datatype: 'FP32', data: [1] }],
          webhook: { url: `http://${host}/hook` },
        }),
      });
      expect(res.status, host).toBe(422);
      expect(((await res.json()) as { error: { code: string } }).error.code, host).toBe('webhook_url_blocked');
    }
    // The well-known NAT64 prefix maps only public IPv4: judged by the address it carries.
    const nat64 = await api.call('/v1/models/any-model/jobs', {
      method: 'POST',
      key: KEY_A,
      body: JSON.stringify({
        inputs: [{ name: 'x', shape: [1, 1], datatype: 'FP32', data: [1] }],
        webhook: { url: 'http://[64:ff9b::a00:1]/' },
      }),
    });
    expect(((await nat64.json()) as { error: { code: string } }).error.code).toBe('webhook_url_blocked');
  });

  it("shows a failed attempt to the tenant as a category; the error itself only in the dispatcher's log", async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const refused = await deliver(`http://127.0.0.1:${port}/hook`);
    const blocked = await deliver('http://localhost:9/hook');
    type Listed = { deliveries: Array<{ id: string; status: string; attempts: Array<{ error?: string }> }> };
    const dead = await until(async () => {
      const list = (await (await api.call('/v1/webhooks/deliveries?status=dead', { key: KEY_A })).json()) as Listed;
      const both = [refused, blocked].map((id) => list.deliveries.find((d) => d.id === id));
      return both.every((d) => d !== undefined) ? { text: JSON.stringify(list), both } : undefined;
    });
    expect(dead.both[0]?.attempts.map((a) => a.error)).toEqual(['connection_refused', 'connection_refused']);
    expect(dead.both[1]?.attempts.map((a) => a.error)).toEqual(['blocked_address', 'blocked_address']);
    expect(dead.text).not.toMatch(/ECONNREFUSED|blocked:|resolves to/);
    await until(() => (logged.some((l) => l.includes(`ECONNREFUSED 127.0.0.1:${port}`)) ? true : undefined));
  });
});
