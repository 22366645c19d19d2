/**
 * /openapi.json and /docs on a real API over real HTTP (issue 33, row 10): the document is built
 * once and serialised once however many requests come, each coding is made once and answered
 * with its length, an ETag and Vary; If-None-Match answers 304 with no body; the gzip and deflate
 * variants decode to the same bytes as the identity one (compressResponses leaves them alone:
 * they already carry Content-Encoding).
 */
import http from 'node:http';
import { gunzipSync, inflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildOpenApiDocument } from '../api/openapi/document.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { testEnv } from './support/services.ts';

const builds = vi.hoisted(() => ({ count: 0 }));
vi.mock('../api/openapi/document.ts', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../api/openapi/document.ts')>();
  return {
    ...actual,
    buildOpenApiDocument: (...args: Parameters<typeof actual.buildOpenApiDocument>) => {
      builds.count++;
      return actual.buildOpenApiDocument(...args);
    },
  };
});

let api: TestApi;

beforeAll(async () => {
  api = await startTestApi(loadConfig(testEnv()));
});

afterAll(async () => {
  await api?.close();
});

interface Raw {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A GET whose body comes back as sent on the wire (fetch would decode it). */
function get(path: string, headers: http.OutgoingHttpHeaders = {}): Promise<Raw> {
  return new Promise((resolve, reject) => {
    http
      .get(`${api.url}${path}`, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

const decoders: Record<string, (bytes: Buffer) => Buffer> = { gzip: gunzipSync, deflate: inflateSync };

/** Each Accept-Encoding, and the coding it is answered in. */
const NEGOTIATIONS: Array<[string | undefined, string | undefined]> = [
  [undefined, undefined],
  ['identity', undefined],
  ['gzip', 'gzip'],
  ['gzip, deflate, br', 'gzip'],
  ['deflate', 'deflate'],
  ['gzip;q=0, deflate', 'deflate'],
];

describe.each([
  ['/openapi.json', 'application/json'],
  ['/docs', 'text/html; charset=UTF-8'],
])('%s', (path, contentType) => {
  it('answers every coding from bytes made once, with its length, ETag and Vary; 304 on If-None-Match', async () => {
    const identity = await get(path);
    expect(identity.status).toBe(200);
    const etags = new Set<string>();
    for (let round = 0; round < 5; round++) {
      for (const [accept, coding] of NEGOTIATIONS) {
        const res = await get(path, accept === undefined ? {} : { 'accept-encoding': accept });
        expect(res.status).toBe(200);
        expect(res.headers['content-type']).toBe(contentType);
        expect(res.headers['content-encoding']).toBe(coding);
        expect(res.headers.vary).toBe('Accept-Encoding');
        expect(Number(res.headers['content-length'])).toBe(res.body.length);
        const decoded = coding === undefined ? res.body : (decoders[coding] as (b: Buffer) => Buffer)(res.body);
        expect(decoded.equals(identity.body)).toBe(true);
        if (coding !== undefined) expect(res.body.length).toBeLessThan(identity.body.length / 3);
        const etag = res.headers.etag ?? '';
        expect(etag).toMatch(/^"[\w-]+"$/);
        etags.add(`${coding}:${etag}`);
        // The client's copy is current: 304, no body; a W/ prefix or a list still matches.
        const again = accept === undefined ? {} : { 'accept-encoding': accept };
        const notModified = await get(path, { ...again, 'if-none-match': `"other", W/${etag}` });
        expect(notModified).toMatchObject({ status: 304, body: Buffer.alloc(0) });
        expect(notModified.headers.etag).toBe(etag);
        expect(notModified.headers.vary).toBe('Accept-Encoding');
      }
    }
    // One ETag per coding, the same on every request.
    expect(etags.size).toBe(3);
    // Another coding's ETag is another representation: answered in full.
    const gzipEtag = [...etags].find((e) => e.startsWith('gzip:'))?.slice('gzip:'.length) ?? '';
    expect((await get(path, { 'if-none-match': gzipEtag })).status).toBe(200);
  });
});

describe('the OpenAPI document, built and serialised once', () => {
  it('is built once for every request to both routes, and never serialised per request', async () => {
    // Built on the first request to either route (at most one by now, whichever tests ran first).
    expect((await get('/docs')).status).toBe(200);
    expect(builds.count).toBe(1);
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      for (let i = 0; i < 20; i++) {
        for (const path of ['/openapi.json', '/docs']) expect((await get(path, { 'accept-encoding': 'gzip' })).status).toBe(200);
      }
      // The document is 100+ KB of JSON: no serialisation that large ran while answering.
      const large = stringify.mock.results.filter((r) => typeof r.value === 'string' && r.value.length > 64 * 1024);
      expect(large).toHaveLength(0);
    } finally {
      stringify.mockRestore();
    }
    expect(builds.count).toBe(1);
    const served = JSON.parse(gunzipSync((await get('/openapi.json', { 'accept-encoding': 'gzip' })).body).toString('utf8')) as unknown;
    expect(served).toEqual(buildOpenApiDocument());
  });
});
