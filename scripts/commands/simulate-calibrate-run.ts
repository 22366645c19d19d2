/**
 * The real half of `warmpool simulate calibrate`: a one-machine stack (embedded Redis and S3
 * unless REDIS_URL / S3_ENDPOINT are set, the API in-process, real `warmpool worker` processes),
 * a model published to it, and experiments recorded job by job from BullMQ's own timestamps:
 *
 * 1. drain — a burst of requests queued at once through the API's own entry writer (the job
 *    queue's `enqueue`, without HTTP: the worker is under test here, not the API's parsing), so
 *    they reach the workers as production's do, coalesced into queue entries; served flat out:
 *    the pool's real capacity;
 * 2. replay — arrivals at the times given (offsets from the start, built from that capacity),
 *    each submitted through the API's POST /v1/models/{m}/jobs, as a client would;
 * 3. a second drain, so a machine whose speed drifted meanwhile shows it.
 *
 * Each worker's cold start is timed phase by phase from its own `worker state` log lines.
 * Every job's rows are distinct, so the API's result cache answers none of them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startApiServer } from '../../api/main.ts';
import { isEntryData, isEntryResult, type QueuedRequest } from '../../infra/contracts/entry.ts';
import { queueName } from '../../infra/contracts/job.ts';
import { type HeartbeatPayload, listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { closeAll } from '../../infra/kernel/lifecycle.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { type BullJobQueue, createBullJobQueue, openQueueProbes, type QueueProbe } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import type { BatchPoint, Phase } from '../../infra/simulator/index.ts';
import { figures, type MeasuredJob } from '../../infra/simulator/index.ts';
import { startEmbeddedServices } from '../dev/embedded-services.ts';
import { stopChild } from '../dev/stop-child.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';

const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));
const MODEL = 'calib';
const VERSION = '1';
const KEY = 'key-calibrate-0123456789';
/**
 * A wide MLP (≈ 8.5 M weights, 34 MB): heavy enough per row that ONNX Runtime, not the queue or
 * the API, bounds the worker, so the replay needs a submit rate one in-process API sustains.
 */
const HIDDEN = 2048;

export interface RealRunOptions {
  /** Base environment: REDIS_URL / S3_* set means use those services, else embedded ones start. */
  env: NodeJS.ProcessEnv;
  workers: number;
  rowsPerJob: number;
  features: number;
  /** Replay arrival offsets (ms from the replay's start), given the pool's measured capacity in jobs/s. */
  arrivals: (capacityJobsPerSec: number) => number[];
  drainJobs: number;
  log: (line: string) => void;
}

export interface RealRun {
  profile: BatchPoint[];
  chosenBatch: number;
  threads: number;
  /** Per worker: ms spent in each cold-start phase (spawn → active). */
  coldStarts: Array<Record<Phase, number>>;
  replay: MeasuredJob[];
  drains: MeasuredJob[][];
}

type Closers = Array<[string, () => Promise<void> | void]>;

export async function runReal(o: RealRunOptions): Promise<RealRun> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-calibrate-'));
  const closers: Closers = [['tmp', () => rmSync(dir, { recursive: true, force: true })]];
  try {
    const env = await stackEnv(o.env, dir, closers, o.log);
    const config = loadConfig(env);
    const store = createS3ObjectStore(config.s3);
    closers.push(['s3-client', () => store.close()]);
    const registry = createModelRegistry({ store, prefix: config.s3.prefix });
    await registry.publish({
      name: MODEL,
      version: VERSION,
      bytes: buildMlpModel({ features: o.features, hidden: HIDDEN, layers: 3, seed: 5 }),
      maxBatch: 128,
    });
    const api = await startApiServer(config, createLogger('warn', { role: 'api' }));
    closers.push(['api', () => api.close()]);
    const redis = createRedis(config.redisUrl);
    closers.push(['redis', () => closeRedis(redis)]);
    // Everything this run wrote lives under its own prefix: leave a shared Redis as it was.
    closers.push(['keys', () => deleteKeys(redis, config.queuePrefix)]);
    const probes = openQueueProbes(redis, config.queuePrefix);
    const queue = probes.queue(queueName(MODEL, VERSION));
    closers.push(['queue', () => probes.close()]);
    // The bursts' producer: the job queue the API itself writes through (entry-writer.ts).
    const jobs = createBullJobQueue({
      connection: config.redisUrl,
      prefix: config.queuePrefix,
      retentionS: config.jobs.retentionS,
      attempts: config.jobs.attempts,
      coalesceMaxRequests: config.jobs.coalesceMaxRequests,
    });
    closers.push(['jobs', () => jobs.close()]);
    const burst = { jobs, queue };

    const coldStarts = await startWorkers(env, o.workers, closers);
    const beat = await waitActive(() => listHeartbeats(redis, config.queuePrefix), o.workers);
    const profile = beat.batchProfile;
    if (!profile) throw new Error('the worker reported no batch profile');
    o.log(
      `calibrate: ${o.workers} worker(s) active, batch ${profile.chosenBatch} rows, ${profile.threads} thread(s), ${Math.round(profile.rowsPerS)} rows/s at that batch in warm-up`,
    );

    const first = await drain(burst, o, 0);
    const capacity = figures(first).jobsPerSec;
    o.log(`calibrate: a burst of ${o.drainJobs} jobs of ${o.rowsPerJob} rows drained at ${capacity.toFixed(1)} jobs/s`);
    const offsets = o.arrivals(capacity);
    o.log(`calibrate: replaying ${offsets.length} arrivals over ${((offsets.at(-1) ?? 0) / 1000).toFixed(0)} s through the API`);
    const replayFrom = Date.now();
    await replay(api.url, offsets, o);
    await waitDone(queue, o.drainJobs + offsets.length);
    const replayed = (await measuredJobs(queue)).filter((j) => j.arrivedMs >= replayFrom);
    const second = await drain(burst, o, o.drainJobs + offsets.length);
    o.log(`calibrate: the second burst drained at ${figures(second).jobsPerSec.toFixed(1)} jobs/s`);
    return {
      profile: profile.entries.map((e) => ({ batch: e.batch, ms: e.p50Ms })),
      chosenBatch: profile.chosenBatch,
      threads: profile.threads,
      coldStarts: await Promise.all(coldStarts),
      replay: replayed,
      drains: [first, second],
    };
  } finally {
    await closeAll([...closers].reverse()).catch(() => undefined);
  }
}

async function stackEnv(base: NodeJS.ProcessEnv, dir: string, closers: Closers, log: (l: string) => void): Promise<NodeJS.ProcessEnv> {
  const id = `calib${Date.now().toString(36)}`;
  const env: NodeJS.ProcessEnv = {
    ...base,
    // Workers log their state changes at info: the cold-start phases are read from those lines.
    LOG_LEVEL: 'info',
    PORT: '0',
    QUEUE_PREFIX: id,
    S3_PREFIX: id,
    API_KEYS: `calibrate:${KEY}`,
    RATE_LIMIT_RPS: '1000000',
    RATE_LIMIT_BURST: '1000000',
    HEARTBEAT_INTERVAL_MS: '200',
    MODEL_CACHE_DIR: path.join(dir, 'cache'),
  };
  await startEmbeddedServices(env, { dir, log, closers });
  return env;
}

/** Spawns the workers; each promise resolves with its phases once it is active. */
async function startWorkers(env: NodeJS.ProcessEnv, count: number, closers: Closers): Promise<Array<Promise<Record<Phase, number>>>> {
  return Array.from({ length: count }, () => {
    const spawnedAt = Date.now();
    const child = spawn(process.execPath, [BIN, 'worker', '--model', MODEL, '--version', VERSION], {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    closers.push(['worker', () => stopChild(child)]);
    return phasesOf(child, spawnedAt);
  });
}

/** Reads the worker's `worker state` log lines until it is active. */
function phasesOf(child: ChildProcess, spawnedAt: number): Promise<Record<Phase, number>> {
  const since: Partial<Record<string, number>> = {};
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      let entry: { msg?: string; state?: string; time?: number };
      try {
        entry = JSON.parse(line);
      } catch {
        return;
      }
      if (entry.msg !== 'worker state' || !entry.state || typeof entry.time !== 'number') return;
      since[entry.state] ??= entry.time;
      if (entry.state === 'failed') reject(new Error('a calibration worker failed to start'));
      if (entry.state !== 'active') return;
      // A phase not logged (too short to matter) counts as 0; its time goes to the next one.
      const mark = (s: string, fallback: number) => since[s] ?? fallback;
      const active = entry.time;
      const warming = mark('warming', active);
      const loading = mark('loading', warming);
      const downloading = mark('downloading', loading);
      resolve({
        launching: downloading - spawnedAt,
        downloading: loading - downloading,
        loading: warming - loading,
        warming: active - warming,
      });
    });
    child.once('exit', (code) => reject(new Error(`a calibration worker exited (${code}) before it was active`)));
  });
}

async function waitActive(beats: () => Promise<HeartbeatPayload[]>, count: number): Promise<HeartbeatPayload> {
  const deadline = Date.now() + 180_000;
  while (Date.now() < deadline) {
    const active = (await beats()).filter((b) => b.model === MODEL && b.state === 'active' && b.batchProfile);
    if (active.length >= count && active[0]) return active[0];
    await systemClock.sleep(100);
  }
  throw new Error(`timed out waiting for ${count} active calibration worker(s)`);
}

function rows(o: RealRunOptions, i: number): number[] {
  // Distinct per job (the result cache must miss), rounded to keep the JSON small.
  return Array.from({ length: o.rowsPerJob * o.features }, (_, k) => Math.round(Math.sin(i * 7.1 + k) * 1000) / 1000);
}

/**
 * Submits job i at offsets[i] after the start, open loop: a slow answer delays no later submit.
 * Over a bounded keep-alive pool, as a load balancer would: a fresh socket per request at a
 * hundred requests a second gets connections reset on a busy machine.
 */
async function replay(url: string, offsets: number[], o: RealRunOptions): Promise<void> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
  const start = Date.now() + 200;
  const pending: Array<Promise<void>> = [];
  let failure: unknown;
  try {
    for (let i = 0; i < offsets.length && failure === undefined; i++) {
      const wait = start + (offsets[i] as number) - Date.now();
      if (wait > 1) await systemClock.sleep(wait);
      const body = JSON.stringify({
        inputs: [{ name: 'features', shape: [o.rowsPerJob, o.features], datatype: 'FP32', data: rows(o, i) }],
      });
      pending.push(
        post(agent, `${url}/v1/models/${MODEL}/jobs`, body).catch((err: unknown) => {
          failure ??= err;
        }),
      );
    }
    await Promise.all(pending);
  } finally {
    agent.destroy();
  }
  if (failure !== undefined) throw failure;
}

/**
 * One submit. A keep-alive socket the server closed as idle just as it was reused fails with a
 * reset before the server read anything (Node's documented race, `req.reusedSocket`): that one is
 * sent again, once, on a fresh socket. Seen on a loaded machine (the whole suite at once) as
 * "socket hang up".
 */
async function post(agent: http.Agent, url: string, body: string): Promise<void> {
  try {
    await postOnce(agent, url, body);
  } catch (err) {
    if (!(err instanceof Error && (err as { reusedSocket?: boolean }).reusedSocket)) throw err;
    await postOnce(agent, url, body);
  }
}

function postOnce(agent: http.Agent, url: string, body: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => (res.statusCode === 202 ? resolve() : reject(new Error(`submit answered ${res.statusCode}: ${text}`))));
      },
    );
    req.on('error', (err: Error & { code?: string }) => {
      // Only a reset of a reused socket before any answer is safe to send again (see post()).
      const idleRace = req.reusedSocket && (err.code === 'ECONNRESET' || err.message === 'socket hang up');
      reject(idleRace ? Object.assign(err, { reusedSocket: true }) : err);
    });
    req.end(body);
  });
}

/** Where a burst goes (the entry writer) and where its jobs are read. */
interface Burst {
  jobs: Pick<BullJobQueue, 'enqueue'>;
  queue: QueueProbe;
}

/** Queues a burst after `before` requests (all done), waits for it, and returns its requests. */
async function drain(burst: Burst, o: RealRunOptions, before: number): Promise<MeasuredJob[]> {
  const from = Date.now();
  await addBurst(burst.jobs, o, before);
  await waitDone(burst.queue, before + o.drainJobs);
  return (await measuredJobs(burst.queue)).filter((j) => j.arrivedMs >= from);
}

/** `o.drainJobs` requests at once, as the API queues a request it accepted (no result cache: rows are distinct). */
async function addBurst(jobs: Burst['jobs'], o: RealRunOptions, offset: number): Promise<void> {
  const submittedAt = Date.now();
  await Promise.all(
    Array.from({ length: o.drainJobs }, (_, j) => {
      const request: QueuedRequest = {
        tenant: 'calibrate',
        model: MODEL,
        version: VERSION,
        submittedAt,
        rows: o.rowsPerJob,
        inputs: [{ name: 'features', datatype: 'FP32', shape: [o.rowsPerJob, o.features], data: Float32Array.from(rows(o, offset + j)) }],
      };
      return jobs.enqueue(request, { priority: 'normal', jobId: `job_calib_${submittedAt}_${offset + j}` });
    }),
  );
}

/**
 * Waits until `total` requests have succeeded. Every request reaches BullMQ inside a queue entry
 * (infra/contracts/entry.ts): each completed entry counts its succeeded members; a member or an
 * entry that failed fails the calibration.
 */
async function waitDone(queue: QueueProbe, total: number): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (Date.now() < deadline) {
    const c = await queue.counts('failed');
    if (c.failed > 0) throw new Error(`${c.failed} calibration queue entries failed`);
    if ((await measuredJobs(queue)).length >= total) return;
    await systemClock.sleep(250);
  }
  throw new Error('timed out waiting for the calibration jobs');
}

/** Every request that succeeded: an entry's member, arrived at its own submit, run with its entry. */
async function measuredJobs(queue: QueueProbe): Promise<MeasuredJob[]> {
  const jobs = await queue.completed();
  const measured: MeasuredJob[] = [];
  for (const j of jobs) {
    if (!isEntryData(j.data) || !isEntryResult(j.result)) continue;
    const result = j.result;
    const failed = Object.entries(result.members).find(([, outcome]) => outcome.status !== 'succeeded');
    if (failed) throw new Error(`calibration request ${failed[0]} ended ${failed[1].status}`);
    for (const m of j.data.members) {
      measured.push({ arrivedMs: m.submittedAt, startedMs: j.processedOn ?? Number.NaN, doneMs: j.finishedOn ?? Number.NaN });
    }
  }
  return measured.filter((m) => Number.isFinite(m.startedMs) && Number.isFinite(m.doneMs)).sort((a, b) => a.arrivedMs - b.arrivedMs);
}

async function deleteKeys(redis: ReturnType<typeof createRedis>, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}
