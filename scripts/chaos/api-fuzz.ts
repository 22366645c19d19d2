/**
 * api-fuzz: thousands of generated malformed and hostile requests (scripts/chaos/fuzz-requests.ts,
 * fast-check, fixed seed: a failure replays) against every route of a live API, plus a few raw
 * ones no fetch client would send (oversized headers, broken request lines).
 *
 * Invariants: no 5xx at all; every 4xx carries `{error:{code,message}}`; no request hangs; the
 * server is alive at the end (health and a real submission answer); memory after the run is
 * not far above memory after a warm-up batch (heap measured after a forced GC).
 */
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import fc from 'fast-check';
import { coerceError, errorMessage } from '../../infra/kernel/errors.ts';
import { type FuzzRequest, requestArb } from './fuzz-requests.ts';
import { jobBody, pool } from './load.ts';
import { type ChaosContext, round, type ScenarioReport } from './report.ts';
import { CHAOS_KEY, type ChaosStack, FEATURES, startChaosStack } from './stack.ts';

export interface ApiFuzzSizes {
  requests: number;
  /** Requests sent before the first memory reading (caches, JIT and pools warm up). */
  warmup: number;
  concurrency: number;
  seed: number;
}

export const API_FUZZ_FULL: ApiFuzzSizes = { requests: 10_000, warmup: 1_000, concurrency: 8, seed: 7_2024 };
export const API_FUZZ_SHORT: ApiFuzzSizes = { requests: 1_500, warmup: 300, concurrency: 8, seed: 7_2024 };

const MODEL = 'chaos-fuzz';
const REQUEST_TIMEOUT_MS = 15_000;
const BODY_LIMIT_BYTES = 8 * 1024 * 1024;
const SAMPLES = 5;

interface Tally {
  sent: number;
  byStatus: Record<string, number>;
  /** A socket closed while a body over the limit was still being sent: expected, not an answer. */
  cutOffUploads: number;
  /** Requests sent again after the connection was reset before any answer (then answered). */
  retriedAfterReset: number;
  problems: Record<string, number>;
  samples: string[];
}

export async function apiFuzz(ctx: ChaosContext, sizes: ApiFuzzSizes): Promise<ScenarioReport> {
  const stack = await startChaosStack({
    dir: ctx.dir,
    log: ctx.log,
    redis: ctx.redis,
    env: { BODY_LIMIT_BYTES: String(BODY_LIMIT_BYTES) },
  });
  try {
    await stack.deployModel(MODEL);
    // A worker serves the valid requests the fuzzer happens to make (sync ones wait for it).
    stack.startWorker(MODEL);
    await stack.waitForWorkers(MODEL, 'active');
    const jobId = await submitValid(stack, 0);
    const targets = { model: MODEL, jobId, validKey: CHAOS_KEY, features: FEATURES };
    const arbitrary = requestArb(targets);
    const tally: Tally = { sent: 0, byStatus: {}, cutOffUploads: 0, retriedAfterReset: 0, problems: {}, samples: [] };
    ctx.log(`api-fuzz: ${sizes.requests} generated requests (seed ${sizes.seed}), ${sizes.concurrency} at a time`);
    const started = performance.now();
    // Generated a chunk at a time and dropped once sent: held all at once, the requests' own
    // bodies (megabytes each, some) would dominate the heap this measures.
    const chunks = (from: number, to: number) => sendChunks(stack, arbitrary, sizes, from, to, tally);
    await chunks(0, sizes.warmup);
    const warm = memory();
    await chunks(sizes.warmup, sizes.requests);
    const end = memory();
    const elapsedS = (performance.now() - started) / 1000;
    await sendRaw(stack, tally);
    const alive = await isAlive(stack);
    return report(sizes, tally, { warm, end, alive, elapsedS });
  } finally {
    await stack.close();
  }
}

async function submitValid(stack: ChaosStack, i: number): Promise<string> {
  const res = await stack.call(`/v1/models/${MODEL}/jobs`, { method: 'POST', body: jobBody(i) });
  if (res.status !== 202) throw new Error(`a valid submission answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

const CHUNK = 250;

/** Requests [from, to) of the run: chunk k is always fc.sample(…, seed + k), so a run replays. */
async function sendChunks(
  stack: ChaosStack,
  arbitrary: fc.Arbitrary<FuzzRequest>,
  sizes: ApiFuzzSizes,
  from: number,
  to: number,
  tally: Tally,
): Promise<void> {
  for (let k = Math.floor(from / CHUNK); k * CHUNK < to; k++) {
    const all = fc.sample(arbitrary, { numRuns: CHUNK, seed: sizes.seed + k });
    const lo = Math.max(from, k * CHUNK) - k * CHUNK;
    const hi = Math.min(to, (k + 1) * CHUNK) - k * CHUNK;
    await send(stack, all.slice(lo, hi), sizes.concurrency, tally);
  }
}

async function send(stack: ChaosStack, requests: FuzzRequest[], concurrency: number, tally: Tally): Promise<void> {
  await pool(requests.length, concurrency, async (n) => {
    const req = requests[n] as FuzzRequest;
    tally.sent++;
    let answer = await exchange(stack, req);
    if (answer instanceof Error && !isTimeout(answer) && (req.body?.length ?? 0) <= BODY_LIMIT_BYTES) {
      // A pooled keep-alive socket the server closed just as the client reused it fails the
      // request before the server saw it; any HTTP client retries that once, and so do we.
      tally.retriedAfterReset++;
      answer = await exchange(stack, req);
    }
    if (answer instanceof Error) {
      if ((req.body?.length ?? 0) > BODY_LIMIT_BYTES) tally.cutOffUploads++;
      else note(tally, isTimeout(answer) ? 'no answer (hung)' : `no answer (${describe(answer)})`, describeRequest(req));
      return;
    }
    tally.byStatus[answer.status] = (tally.byStatus[answer.status] ?? 0) + 1;
    const problem = judge(answer.status, req.method, answer.text);
    if (problem) note(tally, problem, `${describeRequest(req)} → ${answer.status} ${answer.text.slice(0, 160)}`);
  });
}

async function exchange(stack: ChaosStack, req: FuzzRequest): Promise<{ status: number; text: string } | Error> {
  try {
    const res = await fetch(`${stack.api.url}${req.path}`, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    return { status: res.status, text: req.method === 'HEAD' ? '' : await res.text() };
  } catch (err) {
    return coerceError(err);
  }
}

function isTimeout(err: Error): boolean {
  return err.name === 'TimeoutError';
}

/** What is wrong with an answer, or undefined. */
function judge(status: number, method: string, text: string): string | undefined {
  if (status >= 500) return `${status} answer`;
  if (status < 400 || method === 'HEAD') return undefined;
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (typeof body.error?.code === 'string' && typeof body.error.message === 'string') return undefined;
  } catch {
    // falls through: not JSON
  }
  return `${status} without {error:{code,message}}`;
}

function note(tally: Tally, problem: string, sample: string): void {
  tally.problems[problem] = (tally.problems[problem] ?? 0) + 1;
  if (tally.samples.length < SAMPLES) tally.samples.push(`${problem}: ${sample}`);
}

/** The request in a line: long header values and bodies by their length. */
function describeRequest(req: FuzzRequest): string {
  const headers = Object.entries(req.headers).map(([k, v]) => `${k}: ${v.length > 60 ? `(${v.length} chars)` : v}`);
  const body = req.body === undefined ? '' : ` body(${req.body.length})=${req.body.slice(0, 120)}`;
  return `${req.method} ${req.path.slice(0, 120)} [${headers.join('; ')}]${body}`;
}

function describe(err: unknown): string {
  const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
  return `${errorMessage(err)}${cause}`;
}

/** Requests only a raw socket sends: the server's HTTP parser refuses them before the app. */
const RAW_REQUESTS = [
  `GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
  'GET /v1/models HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n',
  'NOT A REQUEST LINE\r\n\r\n',
  'POST /v1/models/x/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n',
  'POST /v1/models/x/jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
  'GET /\u00ff\u0000 HTTP/1.1\r\nHost: x\r\n\r\n',
];

async function sendRaw(stack: ChaosStack, tally: Tally): Promise<void> {
  const { hostname, port } = new URL(stack.api.url);
  for (const raw of RAW_REQUESTS) {
    tally.sent++;
    const reply = await rawExchange(hostname, Number(port), raw);
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(reply)?.[1] ?? 0);
    tally.byStatus[status || 'none'] = (tally.byStatus[status || 'none'] ?? 0) + 1;
    const body = reply.slice(reply.indexOf('\r\n\r\n') + 4);
    const problem = status === 0 ? 'raw request: no HTTP answer' : judge(status, 'GET', body);
    if (problem) note(tally, `raw request: ${problem}`, `${JSON.stringify(raw.slice(0, 60))} → ${reply.slice(0, 120)}`);
  }
}

function rawExchange(host: string, port: number, raw: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let reply = '';
    socket.setTimeout(5_000, () => socket.destroy());
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
    });
    socket.once('connect', () => socket.write(raw, 'latin1'));
    socket.once('error', () => undefined);
    socket.once('close', () => resolve(reply));
  });
}

async function isAlive(stack: ChaosStack): Promise<boolean> {
  const live = await stack.call('/v2/health/live').then(
    (r) => r.status === 200,
    () => false,
  );
  const submits = await submitValid(stack, 1).then(
    () => true,
    () => false,
  );
  return live && submits;
}

/** Heap after a full GC (exposed at run time, so no node flag is needed), and RSS. */
export function memory(): { heapMb: number; rssMb: number } {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
  gc();
  const m = process.memoryUsage();
  return { heapMb: m.heapUsed / 2 ** 20, rssMb: m.rss / 2 ** 20 };
}

function report(
  sizes: ApiFuzzSizes,
  tally: Tally,
  r: { warm: { heapMb: number; rssMb: number }; end: { heapMb: number; rssMb: number }; alive: boolean; elapsedS: number },
): ScenarioReport {
  const violations = Object.entries(tally.problems).map(([problem, n]) => `${n}× ${problem}`);
  if (!r.alive) violations.push('the server did not answer health and a valid submission at the end');
  const heapRatio = r.end.heapMb / r.warm.heapMb;
  if (heapRatio > 3) violations.push(`heap grew ${round(heapRatio, 2)}× after the warm-up`);
  if (tally.sent < sizes.requests) violations.push(`only ${tally.sent} of ${sizes.requests} requests sent`);
  const statuses = Object.entries(tally.byStatus)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([s, n]) => `${s}:${n}`)
    .join(' ');
  return {
    name: 'api-fuzz',
    figures: {
      'requests sent': tally.sent,
      'requests/s': round(tally.sent / r.elapsedS),
      seed: sizes.seed,
      'answers by status': statuses,
      '5xx answers': Object.entries(tally.byStatus).reduce((n, [s, c]) => n + (Number(s) >= 500 ? c : 0), 0),
      'uploads over the body limit cut off': tally.cutOffUploads,
      'connection resets, sent again': tally.retriedAfterReset,
      'heap MB after warm-up → end (after GC)': `${round(r.warm.heapMb)} → ${round(r.end.heapMb)} (${round(heapRatio, 2)}×)`,
      'RSS MB after warm-up → end': `${round(r.warm.rssMb)} → ${round(r.end.rssMb)}`,
      'server alive at the end': r.alive ? 'yes' : 'NO',
      ...(tally.samples.length > 0 ? { 'first problems': tally.samples.join(' | ') } : {}),
    },
    violations,
  };
}
