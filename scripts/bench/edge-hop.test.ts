import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type HopFigures, type HopPath, type HopPlan, hopRows, measureHop, roundOrder, sideFigures } from './edge-hop.ts';
import { timedClosedLoop } from './timed-loop.ts';

const plan: HopPlan = { concurrencies: [1, 4], rounds: 2, requests: 10, warmUp: 3 };

describe('roundOrder', () => {
  it('alternates ABBA, so each side runs first as often as last', () => {
    expect([0, 1, 2, 3].map(roundOrder)).toEqual([
      ['direct', 'edge'],
      ['edge', 'direct'],
      ['direct', 'edge'],
      ['edge', 'direct'],
    ]);
  });
});

describe('sideFigures', () => {
  it('pools samples over rounds and takes requests/s over their summed time', () => {
    const a = { latenciesMs: [1, 1, 1], completed: 3, failed: 0, elapsedMs: 100 };
    const b = { latenciesMs: [3], completed: 1, failed: 2, elapsedMs: 100 };
    const f = sideFigures([a, b]);
    expect(f).toMatchObject({ completed: 4, failed: 2, requestsPerS: 20 });
    expect(f.p50).toBeCloseTo(1, 2);
    expect(f.p99).toBeCloseTo(3, 2);
  });
});

describe('hopRows', () => {
  const side = (p50: number, p99: number, requestsPerS: number) => ({ p50, p99, requestsPerS, completed: 100, failed: 0 });
  const figures: HopFigures[] = [
    { concurrency: 1, direct: side(1, 2, 500), edge: side(1.5, 3, 400), edgeCpuMsPerRequest: 0.2 },
    { concurrency: 4, direct: side(2, 4, 1000), edge: side(3, 3.5, 500), edgeCpuMsPerRequest: 0.3 },
  ];

  it('takes added latency at the fewest in flight and the rate ratio at the most', () => {
    const rows = hopRows('m', { name: 'infer', describe: 'sync infer' }, figures, plan);
    expect(rows.map((r) => [r.name, r.value])).toEqual([
      ['m.edge_added_p50_ms', 0.5],
      ['m.edge_added_p99_ms', 1],
      ['m.edge_vs_direct_rps', 0.5],
    ]);
    expect(rows[0]?.detail).toContain('(×1.50)');
    expect(rows[1]?.detail).toContain('at 4 in flight p50 +1.00 p99 −0.50 ms');
    expect(rows[2]?.detail).toContain('1: 400 vs 500, 4: 500 vs 1,000');
  });

  it('names the job read rows apart, and is n/a with nothing measured', () => {
    const rows = hopRows('m', { name: 'job_read', describe: 'GET' }, [], plan);
    expect(rows.map((r) => r.name)).toEqual([
      'm.edge_job_read_added_p50_ms',
      'm.edge_job_read_added_p99_ms',
      'm.edge_job_read_vs_direct_rps',
    ]);
    expect(rows.every((r) => Number.isNaN(r.value))).toBe(true);
  });
});

/** Two local servers stand in for the API and the edge: the loop's plumbing, not workerd's speed. */
describe('measureHop and timedClosedLoop', () => {
  const servers: http.Server[] = [];
  const seen: Record<string, string[]> = { direct: [], edge: [] };
  const bases: Record<'direct' | 'edge', string> = { direct: '', edge: '' };

  beforeAll(async () => {
    for (const side of ['direct', 'edge'] as const) {
      const server = http.createServer((req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => {
          body += c.toString();
        });
        req.on('end', () => {
          seen[side]?.push(body);
          res.writeHead(body === 'refuse' ? 400 : 200).end('{}');
        });
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      servers.push(server);
      bases[side] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    }
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });

  it('counts answers other than 200 as failed and times only the rest', async () => {
    const r = await timedClosedLoop(
      { url: bases.direct, method: 'POST', path: '/x', headers: {}, body: (i) => (i % 5 === 0 ? 'refuse' : `b${i}`) },
      20,
      3,
    );
    expect([r.completed, r.failed, r.latenciesMs.length]).toEqual([16, 4, 16]);
  });

  it('sends every run distinct bodies, the same count to each side', async () => {
    seen.direct = [];
    seen.edge = [];
    const hop: HopPath = {
      name: 'infer',
      describe: 'test',
      request: (url, offset) => ({ url, method: 'POST', path: '/infer', headers: {}, body: (i) => `row-${offset + i}` }),
    };
    const figures = await measureHop(bases, hop, plan, process.pid);
    expect(figures.map((f) => [f.concurrency, f.direct.completed, f.edge.completed])).toEqual([
      [1, 20, 20],
      [4, 20, 20],
    ]);
    const all = [...(seen.direct ?? []), ...(seen.edge ?? [])];
    expect(all).toHaveLength(2 * (plan.warmUp + 2 * plan.rounds * plan.requests));
    expect(new Set(all).size).toBe(all.length);
  });
});
