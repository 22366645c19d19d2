/**
 * Bulk runs end to end on the real services (issue 6): objects in the S3 server → the driver
 * (in-process, as the CLI runs it) → chunk jobs on the model's queue → real worker processes →
 * parts in S3 → `_manifest.json`. Scores are checked against ONNX Runtime run in-process on the
 * same model bytes. Every wait is "until it happened", never a timing assertion.
 */
import type { ChildProcess } from 'node:child_process';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BulkDeps, createBulkRuns } from '../infra/bulk/bulk-runs.ts';
import { type DriveOptions, driveBulkRun } from '../infra/bulk/driver.ts';
import type { RunManifest } from '../infra/bulk/run-manifest.ts';
import { createRunStore, runRef } from '../infra/bulk/run-store.ts';
import { startBulkSupervisor } from '../infra/bulk/supervisor.ts';
import type { BulkRuns, BulkRunView } from '../infra/contracts/bulk.ts';
import { BULK_PRIORITIES, queueName } from '../infra/contracts/job.ts';
import { readCapacityRequest } from '../infra/deployments/capacity-request.ts';
import { closeRedis, type RedisClient } from '../infra/redis/client.ts';
import { bulkActiveRunsKey } from '../infra/redis/keys.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { StoreFactory } from '../infra/registry/store-factory.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { bulkDeps, bulkLocations } from './support/bulk-deps.ts';
import { locateMember } from './support/entries.ts';
import { TEST_BUCKET, uniqueId } from './support/services.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const F = 8;
const scorerBytes = buildMlpModel({ features: F, hidden: 256, layers: 3, seed: 3 });
const slowBytes = buildMlpModel({ features: F, hidden: 1024, layers: 4, seed: 5 });
let stack: TestStack;
let redis: RedisClient;
let stores: StoreFactory;
let s3: ObjectStore;
let deps: BulkDeps;
let runs: BulkRuns;
let reference: ort.InferenceSession;
let scorerWorker: ChildProcess;

const row = (i: number) => Array.from({ length: F }, (_, k) => Math.round(Math.sin(i * 7 + k) * 1000) / 1000);
const jsonl = (id: string | number, i: number) => JSON.stringify({ id, features: row(i) });
const csv = (id: string, i: number) => [id, ...row(i)].join(',');

const locations = (label: string) => bulkLocations(stack, label);

/** Every line of every part, and the manifest. */
async function readOutput(outPrefix: string): Promise<{ lines: Array<{ id: string | number; score: number[] }>; manifest: RunManifest }> {
  const objects = await s3.list(outPrefix);
  const lines: Array<{ id: string | number; score: number[] }> = [];
  for (const o of objects.filter((x) => /part-\d+\.jsonl$/.test(x.key))) {
    const text = new TextDecoder().decode((await s3.getBytes(o.key)) ?? new Uint8Array());
    for (const l of text.split('\n').filter(Boolean)) lines.push(JSON.parse(l) as { id: string | number; score: number[] });
  }
  const manifest = JSON.parse(
    new TextDecoder().decode((await s3.getBytes(`${outPrefix}_manifest.json`)) ?? new Uint8Array()),
  ) as RunManifest;
  return { lines, manifest };
}

async function scores(rows: number[][]): Promise<number[]> {
  const out = await reference.run({ features: new ort.Tensor('float32', Float32Array.from(rows.flat()), [rows.length, F]) });
  return Array.from(out.score!.data as Float32Array);
}

/** Each expected id exactly once, with ONNX Runtime's score for its row. */
async function expectExactlyOnce(lines: Array<{ id: string | number; score: number[] }>, expected: Map<string | number, number>) {
  const seen = new Map<string | number, number>();
  for (const l of lines) seen.set(l.id, (seen.get(l.id) ?? 0) + 1);
  expect([...seen.values()].every((n) => n === 1)).toBe(true);
  expect(new Set(seen.keys())).toEqual(new Set(expected.keys()));
  const ids = [...expected.keys()];
  const want = await scores(ids.map((id) => row(expected.get(id) as number)));
  const byId = new Map(lines.map((l) => [l.id, l.score]));
  ids.forEach((id, k) => {
    expect(byId.get(id)?.[0]).toBeCloseTo(want[k]!, 5);
  });
}

const drive = (runId: string, options: Partial<DriveOptions> = {}) =>
  driveBulkRun(deps, { tenant: 'tenant-a', id: runId }, { owner: 'test-driver', pollMs: 250, progressIntervalMs: 100, ...options });

beforeAll(async () => {
  stack = await startStack({
    HEARTBEAT_INTERVAL_MS: '300',
    HEARTBEAT_TTL_MS: '2000',
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '1000',
    WARMUP_ITERATIONS: '1',
    INTRA_OP_THREADS: '1',
  });
  ({ deps, redis, stores } = bulkDeps(stack));
  s3 = stores.storeFor(TEST_BUCKET);
  runs = createBulkRuns(deps);
  reference = await ort.InferenceSession.create(scorerBytes);
  for (const [name, bytes] of [
    ['scorer', scorerBytes],
    ['slow', slowBytes],
    ['idle', scorerBytes],
  ] as const) {
    await stack.registry.publish({ name, version: '1', bytes, maxBatch: 32, warmupBatches: [1, 32] });
    await stack.deployments.put({ model: name, version: '1', min: 0, max: 2, standby: 0 });
  }
  scorerWorker = await stack.startWorker('scorer', '1');
  await stack.startWorker('slow', '1', { WORKER_CONCURRENCY: '1' });
  await stack.waitForWorkers('scorer', 'active');
  await stack.waitForWorkers('slow', 'active');
}, 180_000);

afterAll(async () => {
  await reference?.release();
  stores?.close();
  if (redis) await closeRedis(redis);
  await stack?.close();
});

describe('bulk runs', () => {
  let firstRun: { id: string; outPrefix: string; manifestBytes: Uint8Array };

  it('scores JSONL and CSV objects: every good id exactly once, equal to ONNX Runtime; bad lines counted with object and line', async () => {
    const loc = locations('mixed');
    const expected = new Map<string | number, number>();
    const a: string[] = [];
    for (let i = 0; i < 1500; i++) {
      a.push(jsonl(`a-${i}`, i));
      expected.set(`a-${i}`, i);
    }
    a.splice(10, 0, '{"id":"broken",');
    a.splice(400, 0, JSON.stringify({ id: 'short', features: [1, 2] }));
    a.splice(900, 0, JSON.stringify({ features: row(1) }));
    const b = ['id,f0,f1,f2,f3,f4,f5,f6,f7'];
    for (let i = 0; i < 1000; i++) {
      b.push(csv(`b-${i}`, 5000 + i));
      expected.set(`b-${i}`, 5000 + i);
    }
    b.splice(51, 0, 'b-x,1,2,3');
    b.splice(700, 0, 'b-y,1,2,3,4,5,six,7,8');
    const c: string[] = [];
    for (let i = 0; i < 700; i++) {
      c.push(jsonl(100_000 + i, 9000 + i));
      expected.set(100_000 + i, 9000 + i);
    }
    await s3.put(`${loc.inPrefix}a.jsonl`, `${a.join('\n')}\n`);
    await s3.put(`${loc.inPrefix}b.csv`, `${b.join('\r\n')}\r\n`);
    await s3.put(`${loc.inPrefix}c.jsonl`, c.join('\n'));

    const started = await runs.start('tenant-a', { model: 'scorer', input: loc.input, output: loc.output, chunkRows: 128 });
    expect(started).toMatchObject({ status: 'running', version: '1', chunkRows: 128 });
    const views: BulkRunView[] = [];
    const { run } = await drive(started.id, { onProgress: (v) => views.push(v) });
    expect(run.status).toBe('succeeded');
    expect(run.progress).toMatchObject({
      rowsDone: 3200,
      rowsTotal: 3200,
      rowsTotalExact: true,
      badRows: 5,
      chunksTotal: run.progress.chunksDone,
    });
    expect(views.some((v) => v.status === 'running' && v.progress.rowsDone > 0 && v.progress.rowsDone < 3200)).toBe(true);
    const where = run.badRowSamples.map((s) => `${s.object.split('/').pop()}:${s.line}`);
    expect(where).toEqual(['a.jsonl:11', 'a.jsonl:401', 'a.jsonl:901', 'b.csv:52', 'b.csv:701']);
    expect(run.badRowSamples[1]?.message).toMatch(/axis 1 must be 8/);
    expect(run.badRowSamples[4]?.message).toMatch(/column 7: "six"/);

    const { lines, manifest } = await readOutput(loc.outPrefix);
    await expectExactlyOnce(lines, expected);
    expect(manifest).toMatchObject({ runId: started.id, model: 'scorer', version: '1', rows: 3200, badRows: 5 });
    expect(manifest.modelSha256).toBe((await stack.registry.getManifest('scorer', '1')).sha256);
    expect(manifest.inputs.map((o) => o.key.split('/').pop())).toEqual(['a.jsonl', 'b.csv', 'c.jsonl']);
    expect(manifest.parts.length).toBe(run.progress.chunksTotal);
    expect(manifest.parts.reduce((n, p) => n + p.rows, 0)).toBe(3200);
    expect(run.manifest).toBe(`s3://${TEST_BUCKET}/${loc.outPrefix}_manifest.json`);
    // Counted chunk jobs are gone from Redis: the run left nothing behind in the queue.
    const counts = await stack.withQueue('scorer', '1', (q) => q.getJobCounts('waiting', 'prioritized', 'active', 'completed'));
    expect(counts).toEqual({ waiting: 0, prioritized: 0, active: 0, completed: 0 });
    firstRun = { id: started.id, outPrefix: loc.outPrefix, manifestBytes: (await s3.getBytes(`${loc.outPrefix}_manifest.json`))! };
  });

  it('resuming a run that succeeded does nothing; the same id with a different spec is a conflict', async () => {
    const again = await drive(firstRun.id);
    expect(again.run.status).toBe('succeeded');
    expect(await s3.getBytes(`${firstRun.outPrefix}_manifest.json`)).toEqual(firstRun.manifestBytes);
    const counts = await stack.withQueue('scorer', '1', (q) => q.getJobCounts('waiting', 'prioritized', 'active', 'completed'));
    expect(counts).toEqual({ waiting: 0, prioritized: 0, active: 0, completed: 0 });
    const view = await runs.get('tenant-a', firstRun.id);
    const restarted = await runs.start('tenant-a', { model: 'scorer', input: view!.input, output: view!.output, runId: firstRun.id });
    expect(restarted).toMatchObject({ id: firstRun.id, status: 'succeeded', createdAt: view!.createdAt });
    await expect(
      runs.start('tenant-a', { model: 'scorer', input: view!.input, output: view!.output, runId: firstRun.id, chunkRows: 64 }),
    ).rejects.toMatchObject({ code: 'run_conflict', status: 409 });
    expect(await runs.get('tenant-b', firstRun.id)).toBeNull();
  });

  it('a worker SIGKILLed and a driver interrupted mid-run, then resumed: each id exactly once, manifest counts right', async () => {
    const loc = locations('resume');
    const expected = new Map<string | number, number>();
    for (let o = 0; o < 3; o++) {
      const lines: string[] = [];
      for (let i = 0; i < 2000; i++) {
        const n = o * 2000 + i;
        lines.push(jsonl(`r-${n}`, n));
        expected.set(`r-${n}`, n);
      }
      await s3.put(`${loc.inPrefix}part-${o}.jsonl`, lines.join('\n'));
    }
    const { id } = await runs.start('tenant-a', {
      model: 'scorer',
      input: loc.input,
      output: loc.output,
      chunkRows: 50,
      runId: uniqueId('resume'),
    });
    const interrupt = new AbortController();
    const killed = new Promise<void>((resolve) => scorerWorker.once('exit', () => resolve()));
    const first = await drive(id, {
      owner: 'cli-1',
      windowChunks: 8,
      signal: interrupt.signal,
      onProgress: (v) => {
        if (v.progress.rowsDone >= 600 && !interrupt.signal.aborted) {
          scorerWorker.kill('SIGKILL');
          interrupt.abort(new Error('Ctrl-C'));
        }
      },
    });
    await killed;
    expect(scorerWorker.signalCode).toBe('SIGKILL');
    expect(first.run.status).toBe('running');
    expect(first.run.progress.rowsDone).toBeLessThan(6000);

    // A fresh worker, and the same run id driven again (as `warmpool bulk run --run-id` would).
    scorerWorker = await stack.startWorker('scorer', '1');
    const second = await drive(id, { owner: 'cli-2', windowChunks: 8 });
    expect(second.run.status).toBe('succeeded');
    expect(second.run.progress).toMatchObject({ rowsDone: 6000, rowsTotal: 6000, badRows: 0, chunksTotal: 120, chunksDone: 120 });
    const { lines, manifest } = await readOutput(loc.outPrefix);
    expect(lines.length).toBe(6000);
    await expectExactlyOnce(lines, expected);
    expect(manifest.rows).toBe(6000);
    expect(manifest.parts.map((p) => p.chunk)).toEqual(Array.from({ length: 120 }, (_, i) => i));
    // A resumed run's rows/s is its manifest's (rows ÷ its whole duration), in the drive's answer and
    // the API's view alike: not the last drive's window, which counted at once what workers did meanwhile.
    expect(second.run.progress.rowsPerSecond).toBe(manifest.timings.rowsPerSecond);
    expect((await runs.get('tenant-a', id))?.progress.rowsPerSecond).toBe(manifest.timings.rowsPerSecond);
    const parts = (await s3.list(loc.outPrefix)).filter((o) => o.key.includes('part-'));
    expect(parts.length).toBe(120);
  });

  it('a changed input listing on resume fails the run clearly and takes its queued chunks back', async () => {
    const loc = locations('changed');
    await s3.put(`${loc.inPrefix}one.jsonl`, Array.from({ length: 1000 }, (_, i) => jsonl(i, i)).join('\n'));
    const { id } = await runs.start('tenant-a', { model: 'idle', input: loc.input, output: loc.output, chunkRows: 100 });
    // No worker serves `idle`: the drive fills its window and waits; interrupt it there.
    const interrupt = new AbortController();
    const first = await drive(id, { windowChunks: 4, signal: interrupt.signal, onProgress: () => interrupt.abort() });
    expect(first.run.status).toBe('running');
    const queued = () => stack.withQueue('idle', '1', (q) => q.getJobCounts('prioritized', 'waiting'));
    expect(await queued()).toEqual({ prioritized: 4, waiting: 0 });

    await s3.put(`${loc.inPrefix}two.jsonl`, jsonl('late', 1));
    const second = await drive(id);
    expect(second.run.status).toBe('failed');
    expect(second.run.error?.code).toBe('input_changed');
    expect(second.run.error?.message).toContain(`s3://${TEST_BUCKET}/${loc.inPrefix}two.jsonl was added`);
    expect(await queued()).toEqual({ prioritized: 0, waiting: 0 });
  });

  it('a failed run is final: another maxBadRows under its id is a 409; its own spec gets it back failed, and no drive changes it', async () => {
    const loc = locations('final');
    const lines = Array.from({ length: 300 }, (_, i) => (i % 10 === 3 ? 'not json' : jsonl(`f-${i}`, i)));
    await s3.put(`${loc.inPrefix}rows.jsonl`, lines.join('\n'));
    const spec = { model: 'scorer', input: loc.input, output: loc.output, chunkRows: 100, maxBadRows: 10, runId: uniqueId('final') };
    const { id } = await runs.start('tenant-a', spec);
    const { run: failed } = await drive(id);
    expect(failed.status).toBe('failed');
    expect(failed.error?.code).toBe('too_many_bad_rows');
    const ended = await runs.get('tenant-a', id);

    await expect(runs.start('tenant-a', { ...spec, maxBadRows: 200 })).rejects.toMatchObject({
      code: 'run_conflict',
      status: 409,
      message: expect.stringContaining(`"maxBadRows" 200 (the run's: 10)`),
    });
    const again = await runs.start('tenant-a', { ...spec, webhook: { url: 'https://example.com/hook' } });
    expect(again).toEqual(ended);
    expect((await drive(id)).run).toEqual(ended);
    expect(await runs.get('tenant-a', id)).toEqual(ended);
    // Not running, not counted against the caps, no chunk queued for it (one a worker held at the end may still finish).
    const ref = runRef('tenant-a', id);
    expect(await createRunStore(redis, stack.config.queuePrefix).runningIds()).not.toContain(ref);
    expect(await redis.zscore(bulkActiveRunsKey(stack.config.queuePrefix, 'tenant-a'), ref)).toBeNull();
    const queued = await stack.withQueue('scorer', '1', (q) => q.getJobs(['prioritized', 'waiting']));
    expect(queued.filter((j) => j.id?.startsWith(`bulk:${ref}:`))).toEqual([]);
  });

  it('online jobs submitted during a run with a big backlog are served before the bulk backlog', async () => {
    const loc = locations('priority');
    await s3.put(`${loc.inPrefix}big.jsonl`, Array.from({ length: 4000 }, (_, i) => jsonl(i, i)).join('\n'));
    const { id } = await runs.start('tenant-a', { model: 'slow', input: loc.input, output: loc.output, chunkRows: 100 });
    const driving = drive(id, { windowChunks: 30 });
    // The one `slow` worker takes one job at a time: wait until a backlog of bulk chunks queues behind it.
    for (;;) {
      const { prioritized } = await stack.withQueue('slow', '1', (q) => q.getJobCounts('prioritized'));
      if ((prioritized ?? 0) >= 20) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    const online = await stack.submitMany('slow', 5, { features: F });
    // The queue's events name the entries that carry the online jobs (infra/contracts/entry.ts).
    const entries = await Promise.all(
      online.map(async (job) => (await locateMember(redis, stack.config.queuePrefix, job))?.entryId as string),
    );
    const finished = await Promise.all(online.map((job) => waitForJob(stack, job, 120_000)));
    expect(finished.every((j) => j.status === 'succeeded')).toBe(true);
    const { run } = await driving;
    expect(run.status).toBe('succeeded');

    // Order from the queue's own event stream: when each job was queued and when a worker took it.
    const events = await redis.xrange(`${stack.config.queuePrefix}:${queueName('slow', '1')}:events`, '-', '+');
    const queuedAt = new Map<string, number>();
    const takenAt = new Map<string, number>();
    events.forEach(([, fields], i) => {
      const f = Object.fromEntries(fields.flatMap((v, k) => (k % 2 === 0 ? [[v, fields[k + 1]]] : []))) as Record<string, string>;
      if (f.event === 'waiting' && !queuedAt.has(f.jobId!)) queuedAt.set(f.jobId!, i);
      if (f.event === 'active' && !takenAt.has(f.jobId!)) takenAt.set(f.jobId!, i);
    });
    const chunks = [...takenAt.keys()].filter((j) => j.startsWith(`bulk:${runRef('tenant-a', id)}:`));
    expect(chunks.length).toBe(run.progress.chunksTotal);
    for (const job of entries) {
      // The bulk chunks already waiting when this online job arrived…
      const ahead = chunks.filter((c) => queuedAt.get(c)! < queuedAt.get(job)! && takenAt.get(c)! > queuedAt.get(job)!);
      expect(ahead.length).toBeGreaterThanOrEqual(10);
      // …were all taken after it: it did not wait behind the bulk backlog.
      expect(ahead.every((c) => takenAt.get(c)! > takenAt.get(job)!)).toBe(true);
    }
  }, 180_000);

  it('a run that will miss its deadline goes urgent and asks the scaler for capacity; cancel takes its chunks back', async () => {
    const loc = locations('deadline');
    await s3.put(`${loc.inPrefix}big.jsonl`, Array.from({ length: 10_000 }, (_, i) => jsonl(i, i)).join('\n'));
    const deadline = Date.now() + 1000;
    const { id } = await runs.start('tenant-a', { model: 'slow', input: loc.input, output: loc.output, chunkRows: 100, deadline });
    const driving = drive(id, { windowChunks: 6 });
    const urgent = await until(async () => {
      const v = await runs.get('tenant-a', id);
      return v?.priority === 'urgent' ? v : undefined;
    });
    expect(urgent.progress.onTrack).toBe(false);
    const request = await until(() => readCapacityRequest(redis, stack.config.queuePrefix, 'slow', Date.now()));
    expect(request.runs).toEqual([runRef('tenant-a', id)]);
    expect(request.rowsPerSecondNeeded).toBeGreaterThan(0);
    // Chunks queued after the raise carry the urgent priority (level with normal online traffic).
    const priorities = await until(async () => {
      const jobs = await stack.withQueue('slow', '1', (q) => q.getJobs(['prioritized']));
      const ps = jobs.filter((j) => j.id?.startsWith(`bulk:${runRef('tenant-a', id)}:`)).map((j) => j.priority);
      return ps.length > 0 ? ps : undefined;
    });
    expect(priorities.every((p) => p === BULK_PRIORITIES.urgent)).toBe(true);

    const canceled = await runs.cancel('tenant-a', id);
    expect(canceled?.status).toBe('canceled');
    const { run } = await driving;
    expect(run.status).toBe('canceled');
    expect(await readCapacityRequest(redis, stack.config.queuePrefix, 'slow', Date.now())).toBeUndefined();
    const left = await stack.withQueue('slow', '1', (q) => q.getJobs(['prioritized', 'waiting']));
    expect(left.filter((j) => j.id?.startsWith(`bulk:${runRef('tenant-a', id)}:`))).toEqual([]);
    expect(await runs.cancel('tenant-b', id)).toBeNull();
  }, 120_000);

  it('the supervisor drives runs nobody drives, and adopts one whose driver died once its lease lapses', async () => {
    const started: string[] = [];
    for (const label of ['api', 'orphan']) {
      const loc = locations(label);
      await s3.put(`${loc.inPrefix}rows.jsonl`, Array.from({ length: 300 }, (_, i) => jsonl(i, i)).join('\n'));
      started.push((await runs.start('tenant-a', { model: 'scorer', input: loc.input, output: loc.output, chunkRows: 100 })).id);
    }
    // The second run's driver "died" holding the lease: nobody may drive it until the lease lapses.
    const store = createRunStore(redis, stack.config.queuePrefix);
    await redis.set(store.leaseKey(runRef('tenant-a', started[1]!)), 'dead-cli', 'PX', 1500);
    const supervisor = startBulkSupervisor(deps, { owner: 'dispatcher-test', pollMs: 100, drive: { pollMs: 250 } });
    try {
      for (const runId of started) {
        const done = await until(async () => {
          const v = await runs.get('tenant-a', runId);
          return !v || v.status === 'running' ? undefined : v;
        });
        expect(done.status).toBe('succeeded');
        expect(done.progress.rowsDone).toBe(300);
      }
    } finally {
      await supervisor.close();
    }
    const leases = started.map((id) => store.leaseKey(runRef('tenant-a', id)));
    expect(await redis.exists(...leases)).toBe(0);
  }, 120_000);
});

/** Polls `check` until it returns a value. */
async function until<T>(check: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 50));
  }
}
