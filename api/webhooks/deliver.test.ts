// One delivery attempt against real HTTP receivers on 127.0.0.1.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AttemptRequest, checkedAddress, deliverOnce, RESPONSE_BODY_LIMIT_BYTES, type ResolveAll } from './deliver.ts';
import { newSecret, webhookHeaders } from './signing.ts';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A receiver whose answer each test sets; it records every request. */
function receiver() {
  const received: Received[] = [];
  let answer: (res: http.ServerResponse) => void = (res) => res.writeHead(204).end();
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      answer(res);
    });
  });
  return {
    received,
    answer: (fn: (res: http.ServerResponse) => void) => (answer = fn),
    start: () => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve())),
    port: () => (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('deliverOnce', () => {
  const r = receiver();
  const secret = newSecret();
  const body = JSON.stringify({ type: 'job.succeeded', data: { id: 'job_1' } });

  const request = (overrides: Partial<AttemptRequest> = {}): AttemptRequest => ({
    url: `http://127.0.0.1:${r.port()}/hook?x=1`,
    headers: webhookHeaders([secret], 'msg_job_1_succeeded', Math.floor(Date.now() / 1000), body),
    body,
    timeoutMs: 5_000,
    allowedPrivateHosts: ['127.0.0.1'],
    ...overrides,
  });

  beforeAll(() => r.start());
  afterAll(() => r.close());

  it('POSTs the signed JSON body with the Standard Webhooks headers', async () => {
    r.answer((res) => res.writeHead(200).end('ok'));
    const result = await deliverOnce(request());
    expect(result).toMatchObject({ outcome: 'succeeded', status: 200 });
    const got = r.received.at(-1);
    expect(got?.method).toBe('POST');
    expect(got?.url).toBe('/hook?x=1');
    expect(got?.headers['content-type']).toBe('application/json');
    expect(got?.headers['user-agent']).toMatch(/warmpool/);
    expect(got?.headers['webhook-id']).toBe('msg_job_1_succeeded');
    expect(new Webhook(secret).verify(got?.body ?? '', got?.headers as Record<string, string>)).toEqual(JSON.parse(body));
  });

  it('stops on 410 Gone', async () => {
    r.answer((res) => res.writeHead(410).end());
    expect(await deliverOnce(request())).toMatchObject({ outcome: 'gone', status: 410 });
  });

  it('retries on 5xx, 429 and other 4xx, passing Retry-After on', async () => {
    r.answer((res) => res.writeHead(503, { 'retry-after': '7' }).end());
    expect(await deliverOnce(request())).toMatchObject({ outcome: 'retry', status: 503, retryAfter: '7' });
    r.answer((res) => res.writeHead(429).end());
    expect(await deliverOnce(request())).toMatchObject({ outcome: 'retry', status: 429 });
    r.answer((res) => res.writeHead(400).end());
    expect(await deliverOnce(request())).toMatchObject({ outcome: 'retry', status: 400 });
  });

  it('does not follow redirects', async () => {
    const before = r.received.length;
    r.answer((res) => res.writeHead(307, { location: '/elsewhere' }).end());
    expect(await deliverOnce(request())).toMatchObject({ outcome: 'retry', status: 307, error: 'http_307' });
    expect(r.received.length - before).toBe(1);
  });

  it('retries after a timeout', async () => {
    r.answer(() => undefined); // never answers
    expect(await deliverOnce(request({ timeoutMs: 200 }))).toMatchObject({ outcome: 'retry', error: 'timeout' });
  });

  /** Answers `status`, then writes body chunks until the connection closes; resolves with the bytes written then. */
  function endlessBody(status: number, chunk: Buffer, everyMs = 0): Promise<number> {
    return new Promise((resolveWritten) => {
      r.answer((res) => {
        let written = 0;
        res.writeHead(status, { 'content-type': 'text/plain' });
        res.on('close', () => resolveWritten(written));
        const more = () => {
          while (!res.destroyed) {
            written += chunk.length;
            if (!res.write(chunk)) return void res.once('drain', more);
            if (everyMs > 0) return void setTimeout(more, everyMs);
          }
        };
        more();
      });
    });
  }

  it("reads an endless body only up to the cap, then ends the attempt with the answer's status", async () => {
    const written = endlessBody(200, Buffer.alloc(16 * 1024, 'x'));
    // A timeout far off: only the cap can end this attempt in time.
    expect(await deliverOnce(request({ timeoutMs: 30_000 }))).toMatchObject({ outcome: 'succeeded', status: 200 });
    // The connection was closed: the receiver could write no more than the cap and the sockets' buffers.
    expect(await written).toBeLessThan(RESPONSE_BODY_LIMIT_BYTES + 32 * 1024 * 1024);
    const failing = endlessBody(503, Buffer.alloc(16 * 1024, 'x'));
    expect(await deliverOnce(request({ timeoutMs: 30_000 }))).toMatchObject({ outcome: 'retry', status: 503, error: 'http_503' });
    await failing;
  });

  it('ends a trickling body at the timeout with the status it had', async () => {
    const written = endlessBody(202, Buffer.from('.'), 20);
    expect(await deliverOnce(request({ timeoutMs: 300 }))).toMatchObject({ outcome: 'succeeded', status: 202 });
    expect(await written).toBeGreaterThan(0);
  });

  it('retries after a refused connection', async () => {
    const gone = receiver();
    await gone.start();
    const port = gone.port();
    await gone.close();
    const result = await deliverOnce(request({ url: `http://127.0.0.1:${port}/` }));
    // The category is what a tenant sees; the error itself is for the dispatcher's log.
    expect(result).toMatchObject({ outcome: 'retry', error: 'connection_refused' });
    expect(result.outcome === 'retry' && result.detail).toMatch(/ECONNREFUSED/);
  });

  it('refuses, without connecting, a name resolving to a blocked address (DNS rebinding)', async () => {
    const before = r.received.length;
    const resolve: ResolveAll = async () => [{ address: '127.0.0.1', family: 4 }];
    const result = await deliverOnce(request({ url: `http://rebind.example.com:${r.port()}/`, allowedPrivateHosts: [], resolve }));
    expect(result).toMatchObject({ outcome: 'retry', error: 'blocked_address' });
    expect(result.outcome === 'retry' && result.detail).toMatch(/^blocked: .*127\.0\.0\.1/);
    expect(r.received.length).toBe(before);
  });

  it('refuses localhost and literal blocked addresses unless allowed', async () => {
    const before = r.received.length;
    for (const url of [`http://localhost:${r.port()}/`, `http://127.0.0.1:${r.port()}/`, `http://[::ffff:127.0.0.1]:${r.port()}/`]) {
      const result = await deliverOnce(request({ url, allowedPrivateHosts: [] }));
      expect(result).toMatchObject({ outcome: 'retry', error: 'blocked_address' });
      expect(result.outcome === 'retry' && result.detail).toMatch(/^blocked/);
    }
    expect(r.received.length).toBe(before);
  });

  it('connects to the address it checked, for a name the operator allowed', async () => {
    r.answer((res) => res.writeHead(204).end());
    const resolve: ResolveAll = async () => [{ address: '127.0.0.1', family: 4 }];
    const result = await deliverOnce(
      request({ url: `http://hooks.internal:${r.port()}/`, allowedPrivateHosts: ['hooks.internal'], resolve }),
    );
    expect(result).toMatchObject({ outcome: 'succeeded', status: 204 });
    expect(r.received.at(-1)?.headers.host).toBe(`hooks.internal:${r.port()}`);
  });
});

describe('checkedAddress', () => {
  it('refuses a name when any of its addresses is blocked', async () => {
    const resolve: ResolveAll = async () => [
      { address: '93.184.216.34', family: 4 },
      { address: '10.0.0.1', family: 4 },
    ];
    await expect(checkedAddress('split.example.com', [], resolve)).rejects.toThrow(/10\.0\.0\.1/);
  });

  it('returns the first address of a public name', async () => {
    const resolve: ResolveAll = async () => [
      { address: '2606:4700::1111', family: 6 },
      { address: '1.1.1.1', family: 4 },
    ];
    expect(await checkedAddress('one.example.com', [], resolve)).toEqual({ address: '2606:4700::1111', family: 6 });
  });
});
