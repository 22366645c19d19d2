/**
 * Compressed request and response bodies (api/http/content-encoding.ts) on a real hono app with
 * the API's error mapping, and once over real HTTP on @hono/node-server.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { describe, expect, it } from 'vitest';
import { compressResponses, readBody, responseCoding } from './content-encoding.ts';
import { errorHandler } from './errors.ts';

const LIMIT = 1024 * 1024;

/** Echoes the decoded request body, as bytes. */
function echoApp(): Hono {
  const app = new Hono();
  app.onError(errorHandler(undefined));
  app.post('/echo', async (c) => {
    const body = await readBody(c, LIMIT);
    return c.body(new Uint8Array(body), 200, { 'content-type': 'application/octet-stream' });
  });
  return app;
}

/** A JSON document of about `bytes` bytes. */
function document(bytes: number): { rows: string[] } {
  return { rows: Array.from({ length: Math.ceil(bytes / 20) }, (_, i) => `row-${i}-of-the-table`) };
}

const BIG = document(8 * 1024);
const SMALL = { ok: true };
const BINARY = Buffer.from(Float32Array.from({ length: 1024 }, (_, i) => i % 7).buffer);

/** Routes behind compressResponses, one per kind of response. */
function responseApp(): Hono {
  const app = new Hono();
  app.use(compressResponses());
  app.get('/big', (c) => c.json(BIG));
  app.get('/small', (c) => c.json(SMALL));
  app.get('/vary', (c) => {
    c.header('Vary', 'Origin');
    return c.json(BIG);
  });
  app.get('/binary', (c) => c.body(new Uint8Array(BINARY), 200, { 'content-type': 'application/octet-stream' }));
  app.get('/etag', (c) => c.json(BIG, 200, { etag: '"v1"' }));
  app.get('/no-transform', (c) => c.json(BIG, 200, { 'cache-control': 'no-transform' }));
  app.get('/encoded', (c) => c.body(new Uint8Array(BINARY), 200, { 'content-encoding': 'br' }));
  app.get('/empty', (c) => c.body(null, 204));
  app.get('/events', (c) =>
    streamSSE(c, async (stream) => {
      for (let i = 0; i < 3; i++) await stream.writeSSE({ event: 'tick', data: 'x'.repeat(2000) });
    }),
  );
  return app;
}

async function post(body: Uint8Array<ArrayBuffer> | string, encoding?: string): Promise<Response> {
  const headers: Record<string, string> = encoding === undefined ? {} : { 'content-encoding': encoding };
  return echoApp().request('/echo', { method: 'POST', body, headers });
}

async function errorOf(res: Response): Promise<{ status: number; code: string; message: string }> {
  const { error } = (await res.json()) as { error: { code: string; message: string } };
  return { status: res.status, code: error.code, message: error.message };
}

describe('readBody', () => {
  const text = 'the quick brown fox '.repeat(200);

  it('passes an identity body through as sent', async () => {
    for (const encoding of [undefined, 'identity', ' Identity ']) {
      const res = await post(new Uint8Array(BINARY), encoding);
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer()).equals(BINARY)).toBe(true);
    }
  });

  it.each([
    ['gzip', zlib.gzipSync(text)],
    ['x-gzip', zlib.gzipSync(text)],
    [' GZIP ', zlib.gzipSync(text)],
    ['deflate', zlib.deflateSync(text)],
    ['deflate', zlib.deflateRawSync(text)],
  ])('decodes a %s body', async (encoding, sent) => {
    const res = await post(new Uint8Array(sent), encoding);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(text);
  });

  it('takes a body that decompresses to exactly the limit', async () => {
    const res = await post(new Uint8Array(zlib.gzipSync(Buffer.alloc(LIMIT, 1))), 'gzip');
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(LIMIT);
  });

  it.each([
    ['gzip', zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024))],
    ['deflate', zlib.deflateSync(Buffer.alloc(64 * 1024 * 1024))],
    ['deflate', zlib.deflateRawSync(Buffer.alloc(64 * 1024 * 1024))],
  ])('stops a %s bomb at the limit with 413 body_too_large', async (encoding, bomb) => {
    expect(bomb.length).toBeLessThan(LIMIT / 8);
    expect(await errorOf(await post(new Uint8Array(bomb), encoding))).toEqual({
      status: 413,
      code: 'body_too_large',
      message: `request body is larger than ${LIMIT} bytes once decompressed (Content-Encoding: ${encoding})`,
    });
  });

  it('answers 400 malformed_body for bytes that do not decompress', async () => {
    const truncated = zlib.gzipSync(text).subarray(0, 30);
    for (const [encoding, sent] of [
      ['gzip', Buffer.from('this is not gzip')],
      ['gzip', truncated],
      ['deflate', Buffer.from('neither zlib nor raw deflate')],
    ] as const) {
      const error = await errorOf(await post(new Uint8Array(sent), encoding));
      expect(error).toMatchObject({ status: 400, code: 'malformed_body' });
      expect(error.message).toMatch(new RegExp(`^request body could not be decompressed as ${encoding}: \\S`));
    }
  });

  it('refuses an unknown coding, or more than one, with 415', async () => {
    expect(await errorOf(await post('x', 'br'))).toEqual({
      status: 415,
      code: 'unsupported_content_encoding',
      message: 'Content-Encoding "br" is not supported; send the body as gzip, deflate or identity',
    });
    expect(await errorOf(await post('x', 'zstd'))).toMatchObject({ status: 415, code: 'unsupported_content_encoding' });
    const listed = await errorOf(await post(new Uint8Array(zlib.deflateSync(zlib.gzipSync(text))), 'gzip, deflate'));
    expect(listed).toMatchObject({ status: 415, code: 'unsupported_content_encoding' });
    expect(listed.message).toContain('only one is supported');
  });
});

describe('readBody against the byte budget', () => {
  /** An echo app whose requests carry a budget that records its takes and refuses past `allow` bytes. */
  function budgetApp(paid: number, allow: number): { app: Hono; takes: number[] } {
    const takes: number[] = [];
    const app = new Hono();
    app.onError(errorHandler(undefined));
    app.use(async (c, next) => {
      let left = allow;
      const take = async (bytes: number) => {
        takes.push(bytes);
        if (bytes > left) return { retryAfterMs: 1500, limit: '1024 body bytes (counted decompressed) per second with bursts of 2048' };
        left -= bytes;
        return undefined;
      };
      c.set('bodyByteBudget', { paid, take });
      await next();
    });
    app.post('/echo', async (c) => c.body(new Uint8Array(await readBody(c, LIMIT)), 200));
    return { app, takes };
  }

  it('charges what the inflated body adds beyond the bytes already paid, in chunks as they come out', async () => {
    const sent = zlib.gzipSync(Buffer.alloc(LIMIT, 1));
    const { app, takes } = budgetApp(sent.length, LIMIT);
    const res = await app.request('/echo', { method: 'POST', body: new Uint8Array(sent), headers: { 'content-encoding': 'gzip' } });
    expect(res.status).toBe(200);
    expect((await res.arrayBuffer()).byteLength).toBe(LIMIT);
    expect(takes.reduce((a, b) => a + b, 0)).toBe(LIMIT - sent.length);
    // Many small takes (zlib's 16 KiB chunks), not one for the whole body after the fact.
    expect(takes.length).toBeGreaterThan(16);
    expect(Math.max(...takes)).toBeLessThanOrEqual(64 * 1024);
  });

  it('charges nothing while the inflated size stays within what was paid', async () => {
    const sent = zlib.gzipSync('the quick brown fox '.repeat(200));
    const { app, takes } = budgetApp(LIMIT, 0);
    const res = await app.request('/echo', { method: 'POST', body: new Uint8Array(sent), headers: { 'content-encoding': 'gzip' } });
    expect(res.status).toBe(200);
    expect(takes).toEqual([]);
  });

  it('stops inflating at the first refused chunk: 429 rate_limited with Retry-After', async () => {
    const sent = zlib.gzipSync(Buffer.alloc(LIMIT));
    const { app, takes } = budgetApp(sent.length, 64 * 1024);
    const res = await app.request('/echo', { method: 'POST', body: new Uint8Array(sent), headers: { 'content-encoding': 'gzip' } });
    expect(res.headers.get('retry-after')).toBe('2');
    expect(await errorOf(res)).toEqual({
      status: 429,
      code: 'rate_limited',
      message: 'too many requests: the limit is 1024 body bytes (counted decompressed) per second with bursts of 2048; retry in 2 s',
    });
    // The refused chunk is the last one inflated: about 64 KiB of the 1 MiB came out, not all of it.
    expect(takes.reduce((a, b) => a + b, 0)).toBeLessThan(160 * 1024);
  });

  it('decodes raw deflate whose first bytes happen to read as a zlib header', async () => {
    // Raw deflate of two stored blocks: the first (not final) is 0x78 then LEN 1 (0x01 0x00),
    // NLEN, one byte; the second (final) holds the payload.
    const payload = Buffer.from('stored bytes, not compressed');
    const len = Buffer.alloc(4);
    len.writeUInt16LE(payload.length, 0);
    len.writeUInt16LE(~payload.length & 0xffff, 2);
    const raw = Buffer.concat([Buffer.from([0x78, 0x01, 0x00, 0xfe, 0xff, 0x21, 0x01]), len, payload]);
    // 0x78 0x01 is a valid zlib header (0x7801 % 31 === 0), so zlib format is tried first and fails.
    expect(((0x78 << 8) | 0x01) % 31).toBe(0);
    expect(() => zlib.inflateSync(raw)).toThrow();
    const res = await post(new Uint8Array(raw), 'deflate');
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(`!${payload}`);
  });
});

describe('responseCoding', () => {
  it.each([
    ['gzip', 'gzip'],
    ['deflate', 'deflate'],
    ['gzip, deflate, br', 'gzip'],
    ['deflate, gzip', 'gzip'],
    ['gzip;q=0, deflate', 'deflate'],
    ['deflate;q=0.5, gzip;q=0.4', 'deflate'],
    ['GZIP ; Q=0.2', 'gzip'],
    ['x-gzip', 'gzip'],
    ['*', 'gzip'],
    ['*;q=0.1, gzip;q=0', 'deflate'],
    ['br', undefined],
    ['identity', undefined],
    ['', undefined],
    ['*;q=0', undefined],
    ['gzip;q=0, deflate;q=0', undefined],
    ['gzip;q=nope', undefined],
  ])('Accept-Encoding %j → %s', (header, expected) => {
    expect(responseCoding(header)).toBe(expected);
  });
});

describe('compressResponses', () => {
  const app = responseApp();
  const get = (path: string, acceptEncoding?: string, method = 'GET') =>
    app.request(path, { method, headers: acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding } });

  it('compresses a JSON response over the threshold as gzip, with Vary and its length', async () => {
    const res = await get('/big', 'gzip, deflate');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('vary')).toBe('Accept-Encoding');
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const sent = Buffer.from(await res.arrayBuffer());
    expect(Number(res.headers.get('content-length'))).toBe(sent.length);
    expect(sent.length).toBeLessThan(JSON.stringify(BIG).length);
    expect(JSON.parse(zlib.gunzipSync(sent).toString('utf8'))).toEqual(BIG);
  });

  it('answers deflate (zlib format) when gzip is refused', async () => {
    const res = await get('/big', 'gzip;q=0, deflate');
    expect(res.headers.get('content-encoding')).toBe('deflate');
    expect(JSON.parse(zlib.inflateSync(Buffer.from(await res.arrayBuffer())).toString('utf8'))).toEqual(BIG);
  });

  it('compresses binary bodies too', async () => {
    const res = await get('/binary', 'gzip');
    expect(res.headers.get('content-encoding')).toBe('gzip');
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(zlib.gunzipSync(Buffer.from(await res.arrayBuffer())).equals(BINARY)).toBe(true);
  });

  it('appends Accept-Encoding to an existing Vary and weakens a strong ETag', async () => {
    expect((await get('/vary', 'gzip')).headers.get('vary')).toBe('Origin, Accept-Encoding');
    expect((await get('/etag', 'gzip')).headers.get('etag')).toBe('W/"v1"');
  });

  it('leaves the response alone without Accept-Encoding, or with nothing acceptable in it', async () => {
    for (const accept of [undefined, 'br', 'identity', 'gzip;q=0, deflate;q=0']) {
      const res = await get('/big', accept);
      expect(res.headers.get('content-encoding')).toBeNull();
      expect(res.headers.get('vary')).toBeNull();
      expect(await res.json()).toEqual(BIG);
    }
  });

  it('leaves a body under the threshold as it was', async () => {
    const res = await get('/small', 'gzip');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-encoding')).toBeNull();
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual(SMALL);
  });

  it('leaves an event stream streaming, uncompressed', async () => {
    const res = await get('/events', 'gzip');
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('content-encoding')).toBeNull();
    expect((await res.text()).match(/^event: tick$/gm)).toHaveLength(3);
  });

  it('skips HEAD, 204, an encoded body and Cache-Control: no-transform', async () => {
    const head = await get('/big', 'gzip', 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers.get('content-encoding')).toBeNull();
    expect((await get('/empty', 'gzip')).status).toBe(204);
    const encoded = await get('/encoded', 'gzip');
    expect(encoded.headers.get('content-encoding')).toBe('br');
    expect(Buffer.from(await encoded.arrayBuffer()).equals(BINARY)).toBe(true);
    const pinned = await get('/no-transform', 'gzip');
    expect(pinned.headers.get('content-encoding')).toBeNull();
    expect(await pinned.json()).toEqual(BIG);
  });
});

describe('over real HTTP on node-server', () => {
  function getRaw(port: number, path: string): Promise<{ headers: http.IncomingHttpHeaders; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const req = http.request({ port, path, headers: { 'accept-encoding': 'gzip' }, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('decodes a gzip request and gzips the response', async () => {
    const app = responseApp();
    app.route('/', echoApp());
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    try {
      await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
      const { port } = server.address() as AddressInfo;

      const big = await getRaw(port, '/big');
      expect(big.headers['content-encoding']).toBe('gzip');
      expect(big.headers.vary).toBe('Accept-Encoding');
      expect(Number(big.headers['content-length'])).toBe(big.body.length);
      expect(JSON.parse(zlib.gunzipSync(big.body).toString('utf8'))).toEqual(BIG);

      const small = await getRaw(port, '/small');
      expect(small.headers['content-encoding']).toBeUndefined();
      expect(JSON.parse(small.body.toString('utf8'))).toEqual(SMALL);

      const text = 'tensor bytes '.repeat(500);
      const echoed = await fetch(`http://127.0.0.1:${port}/echo`, {
        method: 'POST',
        headers: { 'content-encoding': 'gzip', 'accept-encoding': 'gzip' },
        body: new Uint8Array(zlib.gzipSync(text)),
      });
      expect(echoed.status).toBe(200);
      expect(echoed.headers.get('content-encoding')).toBe('gzip');
      expect(await echoed.text()).toBe(text);
    } finally {
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    }
  });
});
