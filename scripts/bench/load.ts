/**
 * Load generation against the API's submit route. Two shapes, because they answer different
 * questions:
 *
 * - closed loop (autocannon, N connections each sending as soon as its last answer came): the
 *   most the API accepts, for the maximum end-to-end rate;
 * - open loop (node:http on keep-alive sockets, request i sent at t0 + i / rate whatever the
 *   answers): a fixed offered rate for latency. autocannon's own `overallRate` refills each
 *   connection's quota once a second, so a second's requests leave in a burst at its start;
 *   a schedule per request has no bursts, and measuring from the scheduled time (not the send)
 *   counts any queueing in the generator too, so a slow server cannot hide its latency
 *   (coordinated omission).
 */
import http from 'node:http';
import { createRequire } from 'node:module';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { type LatencySummary, summarizeMs } from './stats.ts';

export interface SubmitTarget {
  /** Base URL of the API, e.g. http://127.0.0.1:8080. */
  url: string;
  path: string;
  headers: Record<string, string>;
  /** The body of request i: distinct per i, so no request is a result-cache hit. */
  body: (i: number) => string | Buffer;
  /** The same target as data, for a generator in another process (submit-target.ts makes both). */
  recipe?: TargetRecipe;
}

/** How request bodies carry tensors: JSON numbers, or the OIP binary tensor extension. */
export type BodyForm = 'json' | 'binary';

/** A target as data: its model's inputs, body form and seed make its bodies (submit-target.ts's targetFrom). */
export interface TargetRecipe {
  url: string;
  path: string;
  manifest: Pick<ModelManifest, 'name' | 'inputs'>;
  /** The caller's headers (auth); the body form adds its own. */
  headers: Record<string, string>;
  form: BodyForm;
  /** Request i's body is the body of seed + i. */
  seed: number;
}

export interface ClosedLoopResult {
  ids: string[];
  startedAt: number;
  /** When the last answer came (autocannon itself returns up to a second later, on its sampling tick). */
  endedAt: number;
  /** Answers other than 202, and transport errors. */
  rejected: number;
}

/** What the bench uses of autocannon (the package ships no types). */
interface AutocannonRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Buffer;
  setupRequest?: (req: AutocannonRequest) => AutocannonRequest;
  onResponse?: (status: number, body: string) => void;
}
interface AutocannonResult {
  errors: number;
  timeouts: number;
  non2xx: number;
}
type Autocannon = (opts: {
  url: string;
  connections: number;
  amount: number;
  timeout: number;
  requests: AutocannonRequest[];
}) => Promise<AutocannonResult>;

const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

/** `amount` submits on `connections` connections, each as fast as the API answers. */
export async function closedLoopSubmit(target: SubmitTarget, amount: number, connections: number): Promise<ClosedLoopResult> {
  const ids: string[] = [];
  const run = await closedLoop(target, amount, connections, (status, body) => {
    if (status !== 202) return false;
    ids.push((JSON.parse(body) as { id: string }).id);
    return true;
  });
  return { ids, startedAt: run.startedAt, endedAt: run.endedAt, rejected: run.failed };
}

export interface SyncLoopResult {
  /** Answered 200. */
  completed: number;
  startedAt: number;
  endedAt: number;
  /** Other answers, and transport errors. */
  failed: number;
}

/**
 * `amount` sync inference calls (POST /v2/models/{m}/infer) on `connections` connections, each
 * sending its next call as soon as its answer came: a request is done when it is answered.
 */
export function closedLoopInfer(target: SubmitTarget, amount: number, connections: number): Promise<SyncLoopResult> {
  return closedLoop(target, amount, connections, (status) => status === 200);
}

/** autocannon's closed loop over `target`'s bodies; `accept` judges each answer (false: failed). */
async function closedLoop(
  target: SubmitTarget,
  amount: number,
  connections: number,
  accept: (status: number, body: string) => boolean,
): Promise<SyncLoopResult> {
  let next = 0;
  let completed = 0;
  let failed = 0;
  const startedAt = Date.now();
  let endedAt = startedAt;
  const result = await autocannon({
    url: target.url,
    connections,
    amount,
    timeout: 30,
    requests: [
      {
        method: 'POST',
        path: target.path,
        headers: target.headers,
        setupRequest: (req) => ({ ...req, body: target.body(next++) }),
        onResponse: (status, body) => {
          endedAt = Date.now();
          if (accept(status, body)) completed++;
          else failed++;
        },
      },
    ],
  });
  return { completed, startedAt, endedAt, failed: Math.max(failed, result.errors + result.timeouts) };
}

export interface OpenLoopResult {
  /** Accepted jobs with the time their request was scheduled (epoch ms). */
  accepted: Array<{ id: string; scheduledAt: number }>;
  rejected: number;
  /** Scheduled → 202 received. */
  http: LatencySummary;
  /** The latest a request left after its scheduled time: a busy generator shows here. */
  maxDispatchLagMs: number;
}

/** `amount` submits at `ratePerS`, on at most `maxSockets` keep-alive connections. */
export async function openLoopSubmit(target: SubmitTarget, ratePerS: number, amount: number, maxSockets: number): Promise<OpenLoopResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  const url = new URL(target.path, target.url);
  const accepted: OpenLoopResult['accepted'] = [];
  const httpMs: number[] = [];
  let rejected = 0;
  let maxDispatchLagMs = 0;
  const inFlight: Array<Promise<void>> = [];
  const t0 = Date.now();
  const p0 = performance.now();
  const at = (i: number) => (i * 1000) / ratePerS;
  try {
    let i = 0;
    while (i < amount) {
      const elapsed = performance.now() - p0;
      // Everything due by now leaves now; the next check comes when the next one is due.
      if (i < amount && at(i) <= elapsed) maxDispatchLagMs = Math.max(maxDispatchLagMs, elapsed - at(i));
      for (; i < amount && at(i) <= elapsed; i++) {
        const scheduledAt = t0 + at(i);
        const scheduledP = p0 + at(i);
        inFlight.push(
          post(agent, url, target.headers, target.body(i)).then(
            ({ status, body }) => {
              httpMs.push(performance.now() - scheduledP);
              if (status === 202) accepted.push({ id: (JSON.parse(body) as { id: string }).id, scheduledAt });
              else rejected++;
            },
            () => {
              rejected++;
            },
          ),
        );
      }
      if (i < amount) await sleepMs(Math.max(0, at(i) - (performance.now() - p0)));
    }
    await Promise.all(inFlight);
  } finally {
    agent.destroy();
  }
  return { accepted, rejected, http: summarizeMs(httpMs), maxDispatchLagMs };
}

function post(
  agent: http.Agent,
  url: URL,
  headers: Record<string, string>,
  body: string | Buffer,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body).toString() } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function sleepMs(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
