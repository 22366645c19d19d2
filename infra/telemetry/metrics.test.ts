import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createApiMetrics, createWorkerMetrics, renderClusterMetrics } from './metrics.ts';

const labels = { model: 'mlp', version: '1' };

/** The value of one sample line, e.g. `warmpool_batch_rows_count{model="mlp",version="1"}`. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

async function workerSnapshot(rows: number[], state: 'active' | 'standby'): Promise<object> {
  const registry = new Registry();
  const m = createWorkerMetrics(registry, labels);
  for (const r of rows) m.batchRows.observe(labels, r);
  m.jobsProcessed.inc({ ...labels, outcome: 'succeeded' }, rows.length);
  m.setState('warming');
  m.setState(state);
  // Through JSON, as it travels via Redis.
  return JSON.parse(JSON.stringify(await registry.getMetricsAsJSON())) as object;
}

describe('metric definitions', () => {
  it('creates the API metrics on the given registry only', async () => {
    const registry = new Registry();
    const m = createApiMetrics(registry);
    m.httpRequests.inc({ route: '/v1/jobs/:id', method: 'GET', status: '200' });
    m.httpDuration.observe({ route: '/v1/jobs/:id', method: 'GET' }, 0.02);
    m.jobsSubmitted.inc({ model: 'mlp', version: '1', kind: 'async' });
    const text = await registry.metrics();
    expect(sample(text, 'warmpool_http_requests_total{route="/v1/jobs/:id",method="GET",status="200"}')).toBe(1);
    expect(sample(text, 'warmpool_http_request_duration_seconds_count{route="/v1/jobs/:id",method="GET"}')).toBe(1);
    expect(sample(text, 'warmpool_jobs_submitted_total{model="mlp",version="1",kind="async"}')).toBe(1);
    // A second registry is independent: defining the same names again does not throw.
    expect(() => createApiMetrics(new Registry())).not.toThrow();
  });

  it('defines the worker metrics with the contract names and batch buckets', async () => {
    const registry = new Registry();
    const m = createWorkerMetrics(registry, labels);
    m.batchRows.observe(labels, 24);
    m.batchInferSeconds.observe(labels, 0.004);
    m.jobQueueSeconds.observe(labels, 0.1);
    const text = await registry.metrics();
    expect(sample(text, 'warmpool_batch_rows_bucket{le="16",model="mlp",version="1"}')).toBe(0);
    expect(sample(text, 'warmpool_batch_rows_bucket{le="32",model="mlp",version="1"}')).toBe(1);
    expect(sample(text, 'warmpool_batch_rows_bucket{le="1024",model="mlp",version="1"}')).toBe(1);
    expect(sample(text, 'warmpool_batch_infer_seconds_count{model="mlp",version="1"}')).toBe(1);
    expect(sample(text, 'warmpool_job_queue_seconds_sum{model="mlp",version="1"}')).toBeCloseTo(0.1);
  });

  it('keeps the worker state gauge one-hot, every state present from the start', async () => {
    const registry = new Registry();
    const m = createWorkerMetrics(registry, labels);
    const state = async (s: string) => sample(await registry.metrics(), `warmpool_worker_state{model="mlp",version="1",state="${s}"}`);
    expect(await state('launching')).toBe(0);
    m.setState('launching');
    m.setState('active');
    expect(await state('launching')).toBe(0);
    expect(await state('active')).toBe(1);
    m.setState('active');
    expect(await state('active')).toBe(1);
  });
});

describe('renderClusterMetrics', () => {
  it('merges the API registry with worker snapshots, summing equal series', async () => {
    const api = new Registry();
    createApiMetrics(api).httpRequests.inc({ route: '/metrics', method: 'GET', status: '200' }, 3);
    const snapshots = [await workerSnapshot([4, 8], 'active'), await workerSnapshot([100], 'standby')];
    const text = await renderClusterMetrics(api, snapshots);

    expect(sample(text, 'warmpool_http_requests_total{route="/metrics",method="GET",status="200"}')).toBe(3);
    expect(sample(text, 'warmpool_jobs_processed_total{model="mlp",version="1",outcome="succeeded"}')).toBe(3);
    expect(sample(text, 'warmpool_batch_rows_count{model="mlp",version="1"}')).toBe(3);
    expect(sample(text, 'warmpool_batch_rows_sum{model="mlp",version="1"}')).toBe(112);
    expect(sample(text, 'warmpool_batch_rows_bucket{le="8",model="mlp",version="1"}')).toBe(2);
    expect(sample(text, 'warmpool_batch_rows_bucket{le="128",model="mlp",version="1"}')).toBe(3);
    // One-hot per worker, so the sum counts workers by state.
    expect(sample(text, 'warmpool_worker_state{model="mlp",version="1",state="active"}')).toBe(1);
    expect(sample(text, 'warmpool_worker_state{model="mlp",version="1",state="standby"}')).toBe(1);
    expect(sample(text, 'warmpool_worker_state{model="mlp",version="1",state="warming"}')).toBe(0);
    expect(text).toContain('# TYPE warmpool_batch_rows histogram');
  });

  it('renders the API registry alone when no worker has published', async () => {
    const api = new Registry();
    createApiMetrics(api).jobsSubmitted.inc({ model: 'm', version: '2', kind: 'sync' });
    const text = await renderClusterMetrics(api, []);
    expect(sample(text, 'warmpool_jobs_submitted_total{model="m",version="2",kind="sync"}')).toBe(1);
  });

  it('skips snapshots that are not prom-client JSON instead of failing the scrape', async () => {
    const api = new Registry();
    createApiMetrics(api);
    const good = await workerSnapshot([2], 'active');
    const text = await renderClusterMetrics(api, [{ not: 'metrics' }, [{ name: 'x' }], good]);
    expect(sample(text, 'warmpool_batch_rows_count{model="mlp",version="1"}')).toBe(1);
  });
});
