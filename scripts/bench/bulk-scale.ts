/**
 * `npm run bench:bulk-scale [-- --rows N --chunk-rows C --workers W]`: one big bulk run (issue 18,
 * "big runs stay bounded"), measured as a data team would watch it: `warmpool bulk run` as a
 * child driving N rows of JSONL (default 10 million, in objects of a million rows) through W
 * worker processes (default: the machine's cores), with:
 *
 * - the driver's and each worker's peak RSS (VmHWM from /proc at their exit; VmRSS sampled every
 *   second as a fallback), against the input's size: bounded means "does not grow with N";
 * - the progress ETA's error when 10 %, 50 % and 90 % of the rows were done: the predicted
 *   finish (`progress.etaAt`, read from the run's record as the CLI and the API show it) minus the
 *   real one, as a share of the time that was left then;
 * - the manifest's parts (N / C of them) and its size.
 *
 * Long by design (minutes): not part of `npm test` or `warmpool bench`. Linux only (/proc).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { createRunStore, runRef } from '../../infra/bulk/index.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { type Closer, closeAll } from '../../infra/kernel/lifecycle.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';
import { BENCH_TENANT, scopedEnv, spawnRole, startBenchContext, waitForWorkers } from './services.ts';

const FEATURES = 8;
const ROWS_PER_OBJECT = 1_000_000;

interface Sample {
  at: number;
  rowsDone: number;
  etaAt?: number;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      rows: { type: 'string', default: '10000000' },
      'chunk-rows': { type: 'string', default: '1000' },
      workers: { type: 'string', default: String(Math.max(2, os.availableParallelism())) },
    },
  });
  const rows = Number(values.rows);
  const chunkRows = Number(values['chunk-rows']);
  const workers = Number(values.workers);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-bulk-scale-'));
  const closers: Closer[] = [];
  const out = (line: string) => process.stdout.write(`${line}\n`);
  try {
    const ctx = await startBenchContext(dir, false, out, closers);
    const { s3 } = loadConfig(ctx.env);
    const area = `${s3.prefix ? `${s3.prefix}/` : ''}bulk/${BENCH_TENANT}/`;
    const { env, config } = scopedEnv(ctx, 'scale', { BULK_LOCATIONS: `${BENCH_TENANT}:s3://${s3.bucket}/${area}`, INTRA_OP_THREADS: '1' });
    const manifest = await ctx.registry.publish({
      name: 'scale',
      version: '1',
      bytes: buildMlpModel({ features: FEATURES }),
      maxBatch: 256,
    });
    const store = createS3ObjectStore(config.s3);
    const runId = `scale-${Date.now().toString(36)}`;
    const base = `${area}${runId}`;
    const t0 = Date.now();
    let inputBytes = 0;
    for (let start = 0, n = 0; start < rows; start += ROWS_PER_OBJECT, n++) {
      const end = Math.min(rows, start + ROWS_PER_OBJECT);
      const body = Readable.from(linesOf(start, end, (b) => (inputBytes += b)));
      await store.put(`${base}/in/part-${String(n).padStart(4, '0')}.jsonl`, body);
    }
    out(`wrote ${rows} rows (${(inputBytes / 2 ** 20).toFixed(0)} MiB of JSONL) in ${Math.round((Date.now() - t0) / 1000)} s`);

    const redis = createRedis(config.redisUrl);
    closers.push(['redis', () => closeRedis(redis)]);
    const roles = Array.from({ length: workers }, () =>
      spawnRole(['worker', '--model', manifest.name, '--version', manifest.version], env),
    );
    closers.push(['workers', () => Promise.all(roles.map((r) => r.stop())).then(() => undefined)]);
    await waitForWorkers(redis, config, manifest.name, 'active', { count: workers });
    const url = (p: string) => `s3://${config.s3.bucket}/${base}/${p}/`;
    const args = ['bulk', 'run', '--model', 'scale', '--version', '1', '--input', url('in'), '--output', url('out')];
    const driver = spawnRole([...args, '--run-id', runId, '--tenant', BENCH_TENANT, '--chunk-rows', String(chunkRows)], env);
    const pids = { driver: driver.child.pid as number, workers: roles.map((r) => r.child.pid as number) };
    const peak = new Map<number, number>();
    const store2 = createRunStore(redis, config.queuePrefix);
    const samples: Sample[] = [];
    const exited = new Promise<number>((resolve) => driver.child.once('exit', (code) => resolve(code ?? 1)));
    let done = false;
    void exited.then(() => (done = true));
    while (!done) {
      for (const pid of [pids.driver, ...pids.workers]) peak.set(pid, Math.max(peak.get(pid) ?? 0, rssKb(pid, 'VmHWM') ?? 0));
      const record = await store2.read(runRef(BENCH_TENANT, runId));
      if (record?.progress)
        samples.push({
          at: Date.now(),
          rowsDone: record.progress.rowsDone,
          ...(record.progress.etaAt ? { etaAt: record.progress.etaAt } : {}),
        });
      await new Promise((r) => setTimeout(r, 1000));
    }
    const code = await exited;
    const record = await store2.read(runRef(BENCH_TENANT, runId));
    if (code !== 0 || record?.status !== 'succeeded')
      throw new Error(`bulk run exited ${code}: ${record?.status} ${record?.error?.message ?? ''}`);
    for (const pid of pids.workers) peak.set(pid, Math.max(peak.get(pid) ?? 0, rssKb(pid, 'VmHWM') ?? 0));
    const started = record.startedAt ?? t0;
    const finished = record.finishedAt ?? Date.now();
    const seconds = (finished - started) / 1000;
    out(
      `run: ${record.rowsDone} rows in ${seconds.toFixed(0)} s (${Math.round(record.rowsDone / seconds)} rows/s), ${record.chunksDone} parts`,
    );
    const mib = (kb: number | undefined) => `${((kb ?? 0) / 1024).toFixed(0)} MiB`;
    out(
      `peak RSS: driver ${mib(peak.get(pids.driver))}; workers ${pids.workers.map((p) => mib(peak.get(p))).join(', ')} (input ${(inputBytes / 2 ** 20).toFixed(0)} MiB)`,
    );
    for (const share of [0.1, 0.5, 0.9]) {
      const s = samples.find((x) => x.rowsDone >= share * record.rowsDone && x.etaAt !== undefined);
      if (!s || s.etaAt === undefined) {
        out(`ETA at ${share * 100} %: no sample`);
        continue;
      }
      const left = (finished - s.at) / 1000;
      const error = (s.etaAt - finished) / 1000;
      out(
        `ETA at ${share * 100} %: predicted ${error >= 0 ? '+' : ''}${error.toFixed(1)} s off with ${left.toFixed(0)} s left (${((100 * error) / Math.max(1, left)).toFixed(1)} %)`,
      );
    }
    const manifestInfo = await store.head(`${base}/out/_manifest.json`);
    out(`manifest: ${record.chunksDone} parts, ${((manifestInfo?.sizeBytes ?? 0) / 1024).toFixed(0)} KiB`);
    store.close();
    await driver.stop();
    return 0;
  } finally {
    await closeAll([...closers].reverse()).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** JSONL rows [start, end) in blocks of text, counting bytes. */
function* linesOf(start: number, end: number, count: (bytes: number) => void): Generator<string> {
  const block: string[] = [];
  for (let i = start; i < end; i++) {
    const features = Array.from({ length: FEATURES }, (_, k) => Math.round(Math.sin(i + k) * 1000) / 1000);
    block.push(`{"id":${i},"features":[${features.join(',')}]}`);
    if (block.length === 10_000 || i === end - 1) {
      const text = `${block.join('\n')}\n`;
      count(Buffer.byteLength(text));
      block.length = 0;
      yield text;
    }
  }
}

/** A /proc/<pid>/status field in kB; undefined once the process is gone. */
function rssKb(pid: number, field: 'VmHWM' | 'VmRSS'): number | undefined {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

process.exitCode = await main();
