import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { openLoopInChild } from './open-loop-child.ts';
import { submitTarget, withSeed } from './submit-target.ts';

const manifest: Pick<ModelManifest, 'name' | 'inputs'> = {
  name: 'm',
  inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
};

/** A submit route that answers 202 with an id per request and keeps what it was sent. */
describe('the open-loop generator in its own process', () => {
  const seen: Array<{ path: string; auth: string | undefined; type: string | undefined; body: Buffer }> = [];
  let server: http.Server;
  let url: string;

  beforeAll(async () => {
    let n = 0;
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ path: req.url ?? '', auth: req.headers.authorization, type: req.headers['content-type'], body: Buffer.concat(chunks) });
        // Every fifth refused: the child must count those apart from the accepted.
        const refuse = n % 5 === 4;
        res.writeHead(refuse ? 429 : 202, { 'content-type': 'application/json' });
        res.end(JSON.stringify(refuse ? { error: { code: 'rate_limited', message: 'slow down' } } : { id: `job-${n}` }));
        n++;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it.each(['json', 'binary'] as const)(
    'sends the same %s bodies the target makes here, with its headers, and counts the answers',
    async (form) => {
      seen.length = 0;
      const target = withSeed(submitTarget(url, manifest, { authorization: 'Bearer k' }, form), 1_000);
      const result = await openLoopInChild(target, 400, 20, 4);

      expect(result.accepted).toHaveLength(16);
      expect(result.rejected).toBe(4);
      expect(result.http.count).toBe(20);
      expect(new Set(result.accepted.map((a) => a.id)).size).toBe(16);
      expect(seen).toHaveLength(20);
      // Answers may come back in any order; each body is one the target makes for some i < 20.
      const expected = new Set(Array.from({ length: 20 }, (_, i) => Buffer.from(target.body(i)).toString('base64')));
      for (const s of seen) {
        expect(s.path).toBe('/v1/models/m/jobs');
        expect(s.auth).toBe('Bearer k');
        expect(s.type).toBe(form === 'json' ? 'application/json' : 'application/octet-stream');
        expect(expected.has(s.body.toString('base64'))).toBe(true);
      }
      expect(new Set(seen.map((s) => s.body.toString('base64'))).size).toBe(20);
    },
  );

  it('refuses a target that cannot be made again in another process', async () => {
    const { recipe: _, ...bare } = submitTarget(url, manifest);
    await expect(openLoopInChild(bare, 100, 5, 2)).rejects.toThrow(/no recipe/);
  });

  it('says why when the stack cannot be reached', async () => {
    const closed = submitTarget('http://127.0.0.1:9', manifest);
    const result = await openLoopInChild(closed, 200, 5, 2);
    expect(result).toMatchObject({ accepted: [], rejected: 5 });
  });
});
