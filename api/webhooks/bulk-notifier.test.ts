// The bulk notifier against the real delivery store on a real Redis: which events become
// deliveries, stable ids, and the payload a receiver gets.
import { beforeEach, describe, expect, it } from 'vitest';
import type { BulkRunView, BulkWebhookEvent } from '../../infra/contracts/bulk.ts';
import { ManualClock } from '../../infra/kernel/clock.ts';
import { useTestRedis } from '../../test/support/services.ts';
import { type BulkNotify, type BulkWebhookPayload, bulkDeliveryId, createBulkNotifier } from './bulk-notifier.ts';
import { createDeliveryStore, type DeliveryStore } from './delivery-store.ts';

const ALL: BulkWebhookEvent[] = ['bulk.progress', 'bulk.succeeded', 'bulk.failed', 'bulk.canceled'];

function run(rowsDone: number, extra: Partial<BulkRunView> = {}): BulkRunView {
  return {
    id: 'run-1',
    tenant: 'tenant-a',
    model: 'm',
    version: '1',
    status: 'running',
    input: 's3://b/in/',
    output: 's3://b/out/',
    chunkRows: 10,
    priority: 'bulk',
    progress: { rowsDone, rowsTotal: 100, rowsTotalExact: true, chunksDone: rowsDone / 10, badRows: 0, rowsPerSecond: 5, etaAt: 90_000 },
    badRowSamples: [],
    createdAt: 1_000,
    webhook: { url: 'https://hooks.example.com/bulk', events: ALL },
    ...extra,
  };
}

describe('createBulkNotifier', () => {
  const { redis, prefixes } = useTestRedis();
  let store: DeliveryStore;
  let clock: ManualClock;
  let notify: BulkNotify;
  let wakes: number;

  beforeEach(() => {
    const prefix = prefixes.take('bn');
    store = createDeliveryStore(redis, prefix);
    clock = new ManualClock(50_000);
    wakes = 0;
    notify = createBulkNotifier({ store, clock, onEnqueued: () => wakes++ });
  });

  const stored = async () => (await store.list('tenant-a', 'pending', 100, clock.now())).map((d) => d.id).sort();

  it('stores every event the webhook asks for, one delivery per progress point and per end', async () => {
    await notify('bulk.progress', run(10));
    await notify('bulk.progress', run(30));
    await notify('bulk.succeeded', run(100, { status: 'succeeded' }));
    expect(await stored()).toEqual(
      ['msg_bulk_tenant-a.run-1_progress_10', 'msg_bulk_tenant-a.run-1_progress_30', 'msg_bulk_tenant-a.run-1_succeeded'].sort(),
    );
    expect(wakes).toBe(3);
  });

  it('stores a repeated report once (a driver that took over reports the same rows again)', async () => {
    await notify('bulk.failed', run(40, { status: 'failed', error: { code: 'chunk_failed', message: 'x' } }));
    await notify('bulk.failed', run(40, { status: 'failed', error: { code: 'chunk_failed', message: 'x' } }));
    expect(await stored()).toEqual(['msg_bulk_tenant-a.run-1_failed']);
    expect(wakes).toBe(1);
  });

  it('sends only the events the webhook asked for, and nothing without a webhook', async () => {
    const onlyEnd = { url: 'https://hooks.example.com/end', events: ['bulk.succeeded', 'bulk.failed'] as BulkWebhookEvent[] };
    await notify('bulk.progress', run(10, { webhook: onlyEnd }));
    await notify('bulk.canceled', run(10, { webhook: onlyEnd, status: 'canceled' }));
    await notify('bulk.succeeded', run(100, { id: 'run-2', webhook: undefined, status: 'succeeded' }));
    expect(await stored()).toEqual([]);
    await notify('bulk.succeeded', run(100, { webhook: onlyEnd, status: 'succeeded' }));
    expect(await stored()).toEqual(['msg_bulk_tenant-a.run-1_succeeded']);
  });

  it('two tenants’ runs with the same id are two deliveries, each for its own tenant', async () => {
    await notify('bulk.succeeded', run(100, { status: 'succeeded' }));
    await notify('bulk.succeeded', run(100, { status: 'succeeded', tenant: 'tenant-b' }));
    expect(await stored()).toEqual(['msg_bulk_tenant-a.run-1_succeeded']);
    const theirs = await store.list('tenant-b', 'pending', 100, clock.now());
    expect(theirs.map((d) => [d.id, d.tenant])).toEqual([['msg_bulk_tenant-b.run-1_succeeded', 'tenant-b']]);
    expect(wakes).toBe(2);
  });

  it('the delivery carries the run as the API shows it, to the run’s URL, for its tenant', async () => {
    await notify('bulk.progress', run(10, { deadline: 120_000 }));
    const delivery = await store.get(bulkDeliveryId(run(10), 'bulk.progress'));
    expect(delivery).toMatchObject({ tenant: 'tenant-a', jobId: 'run-1', event: 'bulk.progress', url: 'https://hooks.example.com/bulk' });
    const payload = JSON.parse(delivery?.payload ?? '{}') as BulkWebhookPayload;
    expect(payload.type).toBe('bulk.progress');
    expect(payload.timestamp).toBe(new Date(50_000).toISOString());
    expect(payload.data).toMatchObject({
      id: 'run-1',
      status: 'running',
      createdAt: new Date(1_000).toISOString(),
      deadline: new Date(120_000).toISOString(),
      progress: { rowsDone: 10, rowsTotal: 100, etaAt: new Date(90_000).toISOString() },
      links: { self: '/v1/bulk-runs/run-1' },
    });
    expect(payload.data).not.toHaveProperty('tenant');
  });
});
