/**
 * Issue 33 rows 4, 11 and 12 on the real services: a real worker process (`warmpool worker`),
 * s3rver, Redis, a driver built by the bulk wiring from config (as the API, dispatcher and CLI
 * build theirs).
 *
 *   - Parquet page bombs (a GZIP page and a BROTLI page, each 1 GiB of zeros declaring 4 bytes)
 *     fail their runs as invalid input naming object, row group and column; the worker's peak
 *     RSS stays within 200 MB of where it was, and it scores the next run;
 *   - a footer past PARQUET_FOOTER_MAX_BYTES fails the run from the driver, naming the limit;
 *   - an input overwritten after the listing (before the driver's plan read, or after it and
 *     before the worker's read) fails the run `input_changed` naming the object.
 */
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBulkRuns } from '../infra/bulk/bulk-runs.ts';
import { driveBulkRun } from '../infra/bulk/driver.ts';
import { createBulkWiring } from '../infra/bulk/wiring.ts';
import type { BulkRunRequest, BulkRunView } from '../infra/contracts/bulk.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { bulkLocations } from './support/bulk-deps.ts';
import { bombParquet, brotliZeros, gzipZeros } from './support/hostile-parquet.ts';
import { TEST_BUCKET } from './support/services.ts';
import { startStack, type TestStack } from './support/stack.ts';

const GiB = 1024 * 1024 * 1024;
const MiB = 1024 * 1024;
/** Small enough that a footer over it is quick to write; the default (4 MiB) is the unit tests'. */
const FOOTER_LIMIT = 256 * 1024;

let stack: TestStack;
let redis: RedisClient;
let wiring: ReturnType<typeof createBulkWiring>;
let s3: ObjectStore;
let workerPid: number;

/** A worker's RSS now and its peak so far (/proc/<pid>/status: VmRSS, VmHWM), in bytes. */
function memoryOf(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1]) * 1024;
  return { rss: kb('VmRSS'), peak: kb('VmHWM') };
}

/** A good input: `rows` rows of id and x = i × scale / rows, uncompressed (so its size does not depend on `scale`). */
function goodParquet(rows: number, scale = 1): Uint8Array {
  return new Uint8Array(
    parquetWriteBuffer({
      columnData: [
        { name: 'id', data: BigInt64Array.from({ length: rows }, (_, i) => BigInt(i)), codec: 'UNCOMPRESSED' },
        { name: 'x', data: Float32Array.from({ length: rows }, (_, i) => (i * scale) / rows), codec: 'UNCOMPRESSED', encoding: 'PLAIN' },
      ],
    }),
  );
}

async function run(
  label: string,
  objects: Record<string, Uint8Array>,
  storeFor?: (bucket: string) => ObjectStore,
): Promise<BulkRunView & { inUrl: string; parts: string[] }> {
  const loc = bulkLocations(stack, label);
  for (const [name, bytes] of Object.entries(objects)) await s3.put(`${loc.inPrefix}${name}`, bytes);
  // The start lists with the plain store; the drive (listing, plans, chunks) goes through `storeFor`.
  const deps = storeFor ? { ...wiring.deps, storeFor } : wiring.deps;
  const request: BulkRunRequest = { model: 'bounds', input: loc.input, output: loc.output };
  const started = await createBulkRuns(wiring.deps).start('tenant-a', request);
  const { run } = await driveBulkRun(deps, { tenant: 'tenant-a', id: started.id }, { owner: 'test', pollMs: 200, progressIntervalMs: 100 });
  const parts = (await s3.list(loc.outPrefix)).map((o) => o.key).filter((k) => /part-\d+\./.test(k));
  return { ...run, inUrl: loc.input, parts };
}

beforeAll(async () => {
  stack = await startStack({
    WARMUP_ITERATIONS: '1',
    INTRA_OP_THREADS: '1',
    HEARTBEAT_INTERVAL_MS: '300',
    PARQUET_FOOTER_MAX_BYTES: String(FOOTER_LIMIT),
    // A chunk that fails is not retried: the runs below end at their first failure.
    JOB_ATTEMPTS: '1',
  });
  redis = createRedis(stack.config.redisUrl);
  wiring = createBulkWiring(stack.config, { redis, log: createLogger('silent') });
  s3 = wiring.deps.storeFor(TEST_BUCKET);
  await stack.registry.publish({
    name: 'bounds',
    version: '1',
    bytes: buildMlpModel({ features: 1, hidden: 8, layers: 1 }),
    maxBatch: 64,
    warmupBatches: [1],
  });
  await stack.deployments.put({ model: 'bounds', version: '1', min: 0, max: 1, standby: 0 });
  const worker = await stack.startWorker('bounds', '1');
  workerPid = worker.pid as number;
  await stack.waitForWorkers('bounds', 'active');
}, 180_000);

afterAll(async () => {
  wiring?.close();
  if (redis) await closeRedis(redis);
  await stack?.close();
});

describe('Parquet page bombs in a tenant’s own bulk location', () => {
  it('a GZIP and a BROTLI page of 1 GiB declaring 16 bytes each fail their runs as invalid input; the worker never holds the gigabyte and scores the next run', async () => {
    const before = memoryOf(workerPid);
    for (const [codec, body] of [
      ['GZIP', gzipZeros(GiB)],
      ['BROTLI', await brotliZeros(GiB)],
    ] as const) {
      const failed = await run(`bomb-${codec}`, { 'bomb.parquet': bombParquet({ codec, body }) });
      expect(failed.status).toBe('failed');
      expect(failed.error?.code).toBe('invalid_input');
      // The GZIP bomb (1 MB, 4 rows) plans into one-row chunks, a sixteenth of the run each, and
      // whichever chunk the driver sees fail first is named.
      const anyChunk = failed.error?.message.replace(/ \(chunk [0-3]\): /, ' (chunk N): ');
      expect(anyChunk).toContain(`${failed.inUrl}bomb.parquet (chunk N): `);
      expect(failed.error?.message).toContain(`row group 0, column "x": a ${codec} page inflates past the 16 bytes its header declares`);
    }
    const after = memoryOf(workerPid);
    // Peak RSS over both bombs: an unbounded inflate would have passed 1 GiB here.
    expect(after.peak - before.rss).toBeLessThan(200 * MiB);
    const next = await run('after-bombs', { 'good.parquet': goodParquet(500) });
    expect(next.status).toBe('succeeded');
    expect(next.progress.rowsDone).toBe(500);
  }, 120_000);
});

describe('PARQUET_FOOTER_MAX_BYTES in the driver', () => {
  it('a footer over the limit fails the run before it is fetched or decoded, naming the object and the limit', async () => {
    const fat = new Uint8Array(
      parquetWriteBuffer({
        columnData: [
          { name: 'id', data: BigInt64Array.from([1n]) },
          { name: 'x', data: Float32Array.from([1]) },
        ],
        kvMetadata: [{ key: 'padding', value: 'p'.repeat(2 * FOOTER_LIMIT) }],
      }),
    );
    const read: number[] = [];
    const counting = (bucket: string): ObjectStore => {
      const store = wiring.deps.storeFor(bucket);
      const getRange: ObjectStore['getRange'] = (key, start, end, options) => {
        read.push(end - start);
        return store.getRange(key, start, end, options);
      };
      return { ...store, getRange };
    };
    const failed = await run('fat-footer', { 'fat.parquet': fat }, counting);
    expect(failed.status).toBe('failed');
    expect(failed.error?.code).toBe('parquet_footer_too_large');
    expect(failed.error?.message).toContain(`${failed.inUrl}fat.parquet`);
    expect(failed.error?.message).toContain(`more than the ${FOOTER_LIMIT} (PARQUET_FOOTER_MAX_BYTES)`);
    // One GET of the file's tail, none of the half-megabyte footer.
    expect(read.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(64 * 1024);
  }, 60_000);
});

describe('reads pinned to the listed etag', () => {
  /**
   * The drive's store, with the input rewritten once right after `when`: a valid file of the
   * same size and other values (unpinned reads would score it without a word), so only the etag tells.
   */
  function rewriting(when: 'listed' | 'planned') {
    let done = false;
    const other = goodParquet(500, 2);
    expect(other.length).toBe(goodParquet(500).length);
    return (bucket: string): ObjectStore => {
      const store = wiring.deps.storeFor(bucket);
      const rewrite = async (key: string) => {
        if (done) return;
        done = true;
        await store.put(key, other);
      };
      return {
        ...store,
        async list(prefix) {
          const listed = await store.list(prefix);
          const input = listed.find((o) => o.key.endsWith('.parquet') && o.key.includes('/in/'));
          if (when === 'listed' && input && prefix.endsWith('/in/')) await rewrite(input.key);
          return listed;
        },
        async getRange(key, start, end, options) {
          const body = await store.getRange(key, start, end, options);
          if (when !== 'planned' || !body) return body;
          // The driver's plan read: hand it the old bytes, then rewrite the object before any chunk is queued.
          const chunks: Buffer[] = [];
          for await (const c of body) chunks.push(c as Buffer);
          await rewrite(key);
          return Readable.from([Buffer.concat(chunks)]);
        },
      };
    };
  }

  it('rewritten after the listing, before the driver reads its footer: the run fails input_changed naming the object', async () => {
    const failed = await run('changed-before-plan', { 'in.parquet': goodParquet(500) }, rewriting('listed'));
    expect(failed.status).toBe('failed');
    expect(failed.error?.code).toBe('input_changed');
    expect(failed.error?.message).toContain(`${failed.inUrl}in.parquet`);
    expect(failed.parts).toEqual([]);
  }, 60_000);

  it('rewritten after the driver planned it, before the worker reads its chunk: the run fails input_changed, no part written', async () => {
    const failed = await run('changed-before-read', { 'in.parquet': goodParquet(500) }, rewriting('planned'));
    expect(failed.status).toBe('failed');
    expect(failed.error?.code).toBe('input_changed');
    expect(failed.error?.message).toContain(`${failed.inUrl}in.parquet (chunk 0)`);
    expect(failed.parts).toEqual([]);
  }, 60_000);
});
