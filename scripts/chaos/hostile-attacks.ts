/**
 * The attacks of scripts/chaos/hostile-tenant.ts, issue 20's table as requests an ordinary
 * tenant can send (hostile-attacker.ts sends them in a loop), and how an answer is judged.
 *
 * Every answer is counted by attack and by `status code` (load.ts statusKey). A problem is an
 * answer that shows an attack worked, named with the request and the answer's start:
 * - a 5xx, or no answer, to anything;
 * - a 2xx to an attack that must be refused (`refuse`);
 * - an answer carrying the victim's rows (their ids' marker), another tenant's run id revealed,
 *   or the internals an attack is after (worker pids and hosts, ORT node names, model names on
 *   an open /metrics).
 */
import { coerceError } from '../../infra/kernel/errors.ts';
import { type IdleHttpTally, newIdleHttpTally } from './hostile-idle-http.ts';
import { statusKey } from './load.ts';

export interface AttackSizes {
  /** Request attacks in flight at once (each lane sends the next as soon as its last is answered). */
  lanes: number;
  /** Event streams opened on one of the attacker's own jobs. */
  sseStreams: number;
  /** Sockets trickling header bytes, each reopened when the server closes it. */
  slowloris: number;
  /** Requests with made-up keys per burst, one burst every `authEveryMs`. */
  authBurst: number;
  authEveryMs: number;
  /** Size of the huge `parameters` and `id` strings. */
  hugeBytes: number;
  /** Idle gRPC connections opened at once from `bounds.grpc.fromAddress`, a round after another. */
  grpcIdle: number;
  /** Bulk runs started at once over the attacker's own input, its run cap already full. */
  bulkFlood: number;
  /** Idle HTTP connections with no key from `bounds.http.fromAddress`, each reopened when it closes (hostile-idle-http.ts). */
  httpIdle: number;
}

/** Everything the attacker knows: what an ordinary tenant could learn or guess. */
export interface AttackTargets {
  api: string;
  key: string;
  /** Where the unauthenticated attacks (made-up keys, slowloris) come from: another host's address. */
  fromAddress: string;
  bucket: string;
  /** The attacker's own bulk area (a key prefix in `bucket`) and an input it wrote there. */
  own: string;
  victim: {
    /** The victim's bulk area, its input and the outputs its runs write. */
    prefix: string;
    input: string;
    outputs: string[];
    /** Run ids the victim uses (predictable: nightly-…). */
    runIds: string[];
    /** Ids of some of the victim's jobs. */
    jobIds: string[];
    /** A string inside every row id of the victim's bulk input: seen in an answer, its data leaked. */
    marker: string;
  };
  /** The model registry's models folder (a key prefix in `bucket`). */
  registry: string;
  /** The models: `shared` (the victim's, with a canary version; deployed with at most `maxWorkers`), `dynamic` (a dynamic non-batch axis), `gather` (a lookup table), `idle` (never served). */
  models: { shared: string; maxWorkers: number; canaryVersion: string; dynamic: string; gather: string; idle: string };
  features: number;
  /** A local port nobody listens on (webhook errors must not say so). */
  closedPort: number;
  sizes: AttackSizes;
  bounds: BoundTargets;
}

/** What issue 33's attacks aim at: the bounds that charge, cap or refuse before the work. */
export interface BoundTargets {
  /** A second hostile tenant's key: it spends its own byte and storage budgets (hostile-budget.ts). */
  hoardKey: string;
  /** MAX_STORED_BYTES_PER_TENANT and MAX_ACTIVE_BULK_RUNS_PER_TENANT of the stack. */
  storedBudgetBytes: number;
  bulkRunCap: number;
  /** The API's gRPC listener (`host:port`), its caps, and the address the idle connections come from. */
  grpc: { target: string; perAddress: number; idleTimeoutMs: number; fromAddress: string };
  /** HTTP_MAX_CONNECTIONS_PER_ADDRESS of the stack, and the address the idle HTTP connections come from. */
  http: { perAddress: number; fromAddress: string };
  /** `repeat`: 256 floats in → 64 Ki out (a large-output model, served); `echo`: BYTES in and out (never served). */
  models: { repeat: string; echo: string };
  /** Webhook receivers the attacker owns: one never answers, one streams an endless body. */
  hooks: { hang: string; endless: string };
  /** The variables that reach the bucket (S3_*, AWS_*): the attacker writes its own area. */
  s3Env: Record<string, string>;
  /** Key prefixes in `bucket`, in the attacker's own area: its hostile inputs. */
  inputs: { gzipBomb: string; brotliBomb: string; fatFooter: string; rewrite: string; tiny: string };
  /** Objects under `inputs.rewrite` (it rewrites them with other values while its run runs). */
  rewriteObjects: number;
}

export interface AttackTally {
  sent: number;
  /** Answers by attack, then by `status code`. */
  answers: Record<string, Record<string, number>>;
  /** The slowest answer of each attack, ms. */
  slowestMs: Record<string, number>;
  problems: Record<string, number>;
  samples: string[];
  /** Slowloris: how long each socket was held until the server closed it, and the ages of those still open at the stop. */
  slowloris: { closedAfterMs: number[]; openAtStopMs: number[] };
  /** The event streams that opened: still open at the stop, or ended by the server before (and how the first ended). */
  streams: { openAtStop: number; endedByServer: number; firstEnd?: string };
  /** Ids of the jobs each attack got a 202 for (the first 500), for the scenario to read back. */
  acceptedIds: Record<string, string[]>;
  grpc: GrpcTally;
  httpIdle: IdleHttpTally;
  /** Hostile bulk runs started and not seen ending before the stop (hostile-bulk.ts): the scenario waits for them. */
  openRuns: Array<{ id: string; name: string }>;
  /**
   * The attacker's own event-loop lag, the most a 100 ms timer fired late over the phase: a hold
   * it measures (a socket's close) can be late by as much, since it runs at nice 19 on a busy host.
   */
  clientLagMaxMs: number;
}

/** The idle gRPC connection rounds (hostile-grpc.ts). */
export interface GrpcTally {
  rounds: number;
  /** The most connections seen served (their SETTINGS came) and open at once: at most GRPC_MAX_CONNECTIONS_PER_ADDRESS. */
  mostServedInRound: number;
  /**
   * Each served connection's [SETTINGS, close] as this process saw them (performance.now()). Seen
   * late by as much as its event loop lagged, and not in the order they happened across sockets.
   */
  servedSpans: Array<[number, number]>;
  /** How long each served connection was held until the server closed it, and the ages of those open at the stop. */
  servedHeldMs: number[];
  openAtStopMs: number[];
}

export interface Request {
  method: string;
  path: string;
  body?: unknown;
  /** Sent without the attacker's key. */
  anonymous?: boolean;
  /** An event stream: a 2xx is not read to the end. */
  stream?: boolean;
  /** Another key than the attacker's. */
  key?: string;
  /** A body sent as it is (with `headers`), instead of `body` as JSON. */
  raw?: Uint8Array<ArrayBuffer> | string;
  headers?: Record<string, string>;
}

export interface Attack {
  name: string;
  /** Must be refused: a 2xx means the attack worked. */
  refuse: boolean;
  /** Sent in one catalogue round of this many (a costly body: a few per phase make the point). */
  every?: number;
  request(n: number): Request;
  /** What an answer reveals that it must not, beyond its status. */
  leak?(status: number, text: string): string | undefined;
}

export const REQUEST_TIMEOUT_MS = 30_000;
const SAMPLES = 8;

/** Two refusals that must read alike, or the answer tells which buckets exist (hostile-report.ts). */
export const UNKNOWN_BUCKET = 'bulk: an unknown bucket';
export const BUCKET_NOT_GRANTED = 'bulk: a bucket not granted';
/**
 * Answers that say nothing of the request itself: a 429 rate_limited comes before the request is
 * looked at, and a 408 request_timeout means the attacker's own client (at nice 19) did not send
 * it in time.
 */
export const INCONCLUSIVE_ANSWERS = ['429 rate_limited', '408 request_timeout'];

/** Jobs pinned to the canary version with a 1 ms start deadline: expired before a worker takes them, they must not count against it. */
export const CANARY_ATTACK = 'canary: pinned, timeoutMs 1';

/** The request attacks, in the order the lanes take them (round-robin). */
export function attackCatalogue(t: AttackTargets): Attack[] {
  const s3 = (key: string) => `s3://${t.bucket}/${key}`;
  const ownIn = s3(`${t.own}in/`);
  const ownOut = (n: number) => s3(`${t.own}out-${n}/`);
  const bulk = (input: string, output: string, extra: Record<string, unknown> = {}): Request => ({
    method: 'POST',
    path: '/v1/bulk-runs',
    body: { model: t.models.shared, version: '1', input, output, chunkRows: 10, ...extra },
  });
  const job = (model: string, body: Record<string, unknown>): Request => ({ method: 'POST', path: `/v1/models/${model}/jobs`, body });
  const seq = (shape: number[], data: number[]) => ({ inputs: [{ name: 'seq', shape, datatype: 'FP32', data }], cache: false });
  const idx = (i: number) => ({ inputs: [{ name: 'idx', shape: [1, 1], datatype: 'INT64', data: [i] }], cache: false });
  const features = { inputs: [{ name: 'features', shape: [1, t.features], datatype: 'FP32', data: Array(t.features).fill(0.5) }] };
  const hook = (url: string) => job(t.models.gather, { ...idx(1), webhook: { url } });
  const pick = <T>(list: T[], n: number) => list[n % list.length] as T;
  const huge = 'x'.repeat(t.sizes.hugeBytes);
  const b = t.bounds;
  // 2 Mi empty strings, 6 MiB of JSON under the 8 MiB body limit: counted from the shape, never read.
  const strings = JSON.stringify({ inputs: [{ name: 'text', shape: [1, 2 ** 21], datatype: 'BYTES', data: Array(2 ** 21).fill('') }] });
  const json = { 'content-type': 'application/json' };
  return [
    {
      name: 'job: 2 Mi empty strings (BYTES)',
      refuse: true,
      every: 8,
      request: () => ({ method: 'POST', path: `/v1/models/${b.models.echo}/jobs`, raw: strings, headers: json }),
    },
    { name: 'webhook: a receiver that never answers', refuse: false, request: () => hook(b.hooks.hang) },
    { name: 'webhook: a receiver with an endless body', refuse: false, request: () => hook(b.hooks.endless) },
    { name: "bulk: the victim's input", refuse: true, request: (n) => bulk(s3(t.victim.input), ownOut(n)) },
    { name: "bulk: output into the victim's", refuse: true, request: (n) => bulk(ownIn, s3(pick(t.victim.outputs, n))) },
    { name: "bulk: the victim's whole area", refuse: true, request: (n) => bulk(s3(t.victim.prefix), ownOut(n)) },
    { name: 'bulk: the registry as input', refuse: true, request: (n) => bulk(s3(t.registry), ownOut(n)) },
    { name: 'bulk: output into the registry', refuse: true, request: () => bulk(ownIn, s3(`${t.registry}${t.models.shared}/`)) },
    // A new name each time: a client per bucket would pile up in the API.
    { name: UNKNOWN_BUCKET, refuse: true, request: (n) => bulk(`s3://chaos-no-such-bucket-${n}/in/`, ownOut(n)) },
    { name: BUCKET_NOT_GRANTED, refuse: true, request: (n) => bulk(s3('elsewhere/in/'), ownOut(n)) },
    {
      name: "bulk: the victim's run ids",
      refuse: false,
      request: (n) => {
        const runId = pick(t.victim.runIds, n);
        return bulk(ownIn, s3(`${t.own}squat-${runId}/`), { runId });
      },
      leak: (status, text) => (status === 409 || /another (owner|tenant)/i.test(text) ? 'a run id of another tenant revealed' : undefined),
    },
    {
      name: "bulk: read the victim's runs",
      refuse: false,
      request: (n) => ({ method: 'GET', path: `/v1/bulk-runs/${pick(t.victim.runIds, n)}` }),
    },
    {
      name: "bulk: cancel the victim's runs",
      refuse: false,
      request: (n) => ({ method: 'DELETE', path: `/v1/bulk-runs/${pick(t.victim.runIds, n)}` }),
    },
    { name: 'job: zero-length axis, 1e9 rows', refuse: true, request: () => job(t.models.dynamic, seq([1e9, 0], [])) },
    {
      name: 'job: zero-length axis, timeoutMs 1',
      refuse: true,
      request: () => job(t.models.dynamic, { ...seq([1e9, 0], []), timeoutMs: 1 }),
    },
    {
      name: 'infer: zero-length axis, 1e9 rows',
      refuse: true,
      request: () => ({ method: 'POST', path: `/v2/models/${t.models.dynamic}/infer`, body: seq([1e9, 0], []) }),
    },
    { name: 'job: 100,001 rows', refuse: true, request: () => job(t.models.dynamic, seq([100_001, 1], Array(100_001).fill(0))) },
    { name: 'job: huge parameters', refuse: true, request: () => job(t.models.gather, { ...idx(1), parameters: { blob: huge } }) },
    { name: 'job: huge id', refuse: true, request: () => job(t.models.gather, { ...idx(1), id: huge }) },
    {
      name: CANARY_ATTACK,
      refuse: false,
      request: () => job(t.models.shared, { ...features, version: t.models.canaryVersion, timeoutMs: 1, cache: false }),
    },
    {
      name: 'infer: index out of range (ORT)',
      refuse: true,
      request: () => ({ method: 'POST', path: `/v2/models/${t.models.gather}/infer`, body: idx(99) }),
      leak: (_, text) => (/gather_0|Gather node|onnxruntime/i.test(text) ? 'graph internals in the answer' : undefined),
    },
    { name: 'webhook: IPv4-mapped IPv6', refuse: true, request: () => hook('http://[::ffff:127.0.0.1]:9/hook') },
    { name: 'webhook: NAT64 local-use', refuse: true, request: () => hook('http://[64:ff9b:1::7f00:1]:9/hook') },
    { name: 'webhook: 6to4', refuse: true, request: () => hook('http://[2002:7f00:1::1]:9/hook') },
    { name: 'webhook: a closed local port', refuse: false, request: () => hook(`http://localhost:${t.closedPort}/hook`) },
    { name: "job: read the victim's", refuse: true, request: (n) => ({ method: 'GET', path: `/v1/jobs/${pick(t.victim.jobIds, n)}` }) },
    {
      name: "job: cancel the victim's",
      refuse: true,
      request: (n) => ({ method: 'DELETE', path: `/v1/jobs/${pick(t.victim.jobIds, n)}` }),
    },
    {
      name: "job: stream the victim's",
      refuse: true,
      request: (n) => ({ method: 'GET', path: `/v1/jobs/${pick(t.victim.jobIds, n)}/events`, stream: true }),
    },
    {
      name: 'deployments: change one',
      refuse: true,
      request: () => ({ method: 'PUT', path: `/v1/deployments/${t.models.shared}`, body: { versions: [{ version: '1', weight: 100 }] } }),
    },
    {
      name: 'deployments: roll back',
      refuse: true,
      request: () => ({ method: 'POST', path: `/v1/deployments/${t.models.shared}/rollback`, body: {} }),
    },
    {
      name: 'read: /metrics without a key',
      refuse: false,
      request: () => ({ method: 'GET', path: '/metrics', anonymous: true }),
      leak: (status, text) => (status < 300 && text.includes(t.models.shared) ? 'model names and traffic on an open /metrics' : undefined),
    },
    {
      name: "read: /metrics with a tenant's key",
      refuse: false,
      request: () => ({ method: 'GET', path: '/metrics' }),
      leak: (status, text) =>
        status < 300 && text.includes(t.models.shared) ? "model names and traffic on /metrics to a tenant's key" : undefined,
    },
    {
      name: 'read: /v1/pool',
      refuse: false,
      request: () => ({ method: 'GET', path: '/v1/pool' }),
      leak: (_, text) => (/"(pid|host)"\s*:/.test(text) ? 'worker pids and hosts shown to a tenant' : undefined),
    },
  ];
}

/**
 * Dashboard simulations, back to back on a lane of their own, taking turns: the issue's request
 * (10,000 workers over a day), and the largest a deployment's own bounds allow.
 */
export function simulationAttacks(t: AttackTargets): Attack[] {
  const path = (q: string) => `/v1/deployments/${t.models.shared}/simulation?minutes=1440&${q}`;
  const max = t.models.maxWorkers;
  return [
    {
      name: 'dashboard: simulation, 10,000 workers',
      refuse: false,
      request: () => ({ method: 'GET', path: path('min=10000&max=10000&standby=10000') }),
    },
    {
      name: 'dashboard: simulation, a day at its max',
      refuse: false,
      request: () => ({ method: 'GET', path: path(`min=${max}&max=${max}&standby=${max}`) }),
    },
  ];
}

export function newTally(): AttackTally {
  return {
    sent: 0,
    answers: {},
    slowestMs: {},
    problems: {},
    samples: [],
    slowloris: { closedAfterMs: [], openAtStopMs: [] },
    streams: { openAtStop: 0, endedByServer: 0 },
    acceptedIds: {},
    grpc: { rounds: 0, mostServedInRound: 0, servedSpans: [], servedHeldMs: [], openAtStopMs: [] },
    httpIdle: newIdleHttpTally(),
    openRuns: [],
    clientLagMaxMs: 0,
  };
}

/** One attack, its answer tallied and judged. Returns the answer's key (`403 location_forbidden`). */
export async function sendAttack(t: AttackTargets, a: Attack, n: number, tally: AttackTally, stop?: AbortSignal): Promise<string> {
  const req = a.request(n);
  tally.sent++;
  const started = performance.now();
  const answer = await exchange(t, req, stop);
  if (answer instanceof Error) {
    if (stop?.aborted) return 'stopped';
    count(tally, a.name, `no answer (${answer.name === 'TimeoutError' ? 'hung' : failureOf(answer)})`);
    problem(tally, `${a.name}: no answer`, `${describe(req)} → ${failureOf(answer)}`);
    return 'no answer';
  }
  tally.slowestMs[a.name] = Math.max(tally.slowestMs[a.name] ?? 0, performance.now() - started);
  const key = answer.key;
  count(tally, a.name, key);
  if (answer.status === 202) keepId(tally, a.name, answer.text);
  const found = judge(a, t, answer.status, answer.text);
  if (found) problem(tally, `${a.name}: ${found}`, `${describe(req)} → ${key} ${answer.text.slice(0, 200)}`);
  return key;
}

function judge(a: Attack, t: AttackTargets, status: number, text: string): string | undefined {
  if (status >= 500) return `${status} answer`;
  if (a.refuse && status < 400) return `accepted (${status}): the attack worked`;
  if (text.includes(t.victim.marker)) return "the victim's rows in the answer";
  return a.leak?.(status, text);
}

/**
 * A failed request's message with its cause: fetch says only "fetch failed", and what failed
 * (a reset, the other side closing, a refused connection) is in `cause`.
 */
export function failureOf(err: Error): string {
  const cause = err.cause as { code?: unknown; message?: unknown } | undefined;
  const why = cause === undefined ? undefined : typeof cause.code === 'string' ? cause.code : cause.message;
  return typeof why === 'string' && why !== '' ? `${err.message}: ${why}` : err.message;
}

export async function exchange(
  t: AttackTargets,
  req: Request,
  stop?: AbortSignal,
): Promise<{ status: number; key: string; text: string } | Error> {
  const linked = linkedSignal(REQUEST_TIMEOUT_MS, stop);
  const headers: Record<string, string> = req.anonymous ? {} : { authorization: `Bearer ${req.key ?? t.key}` };
  if (req.body !== undefined) headers['content-type'] = 'application/json';
  try {
    const res = await fetch(`${t.api}${req.path}`, {
      method: req.method,
      headers: { ...headers, ...req.headers },
      body: req.raw ?? (req.body === undefined ? undefined : JSON.stringify(req.body)),
      signal: linked.signal,
    });
    // An event stream that opened is not read: it would last as long as its job.
    const text = req.stream && res.ok ? '' : await res.text();
    if (req.stream && res.ok) await res.body?.cancel();
    return { status: res.status, key: statusKey(res, text), text };
  } catch (err) {
    return coerceError(err);
  } finally {
    linked.dispose();
  }
}

/**
 * A signal that aborts after `timeoutMs` or when `stop` does, and lets go of `stop` once the
 * request is done. AbortSignal.any([timeout, stop]) per request instead left a listener on the
 * one long-lived stop signal per request until a GC (Node's MaxListenersExceededWarning, "11
 * abort listeners added to [AbortSignal]"): thousands of them over a phase.
 */
export function linkedSignal(timeoutMs: number, stop?: AbortSignal): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onStop = () => controller.abort(stop?.reason);
  const timer = setTimeout(() => controller.abort(new DOMException('request timed out', 'TimeoutError')), timeoutMs);
  if (stop?.aborted) onStop();
  else stop?.addEventListener('abort', onStop, { once: true });
  return {
    signal: controller.signal,
    dispose() {
      clearTimeout(timer);
      stop?.removeEventListener('abort', onStop);
    },
  };
}

function keepId(tally: AttackTally, attackName: string, text: string): void {
  const ids = tally.acceptedIds[attackName] ?? [];
  const id = (JSON.parse(text) as { id?: unknown }).id;
  if (typeof id === 'string' && ids.length < 500) ids.push(id);
  tally.acceptedIds[attackName] = ids;
}

export function count(tally: AttackTally, attackName: string, key: string): void {
  const byKey = tally.answers[attackName] ?? {};
  byKey[key] = (byKey[key] ?? 0) + 1;
  tally.answers[attackName] = byKey;
}

export function problem(tally: AttackTally, what: string, sample: string): void {
  tally.problems[what] = (tally.problems[what] ?? 0) + 1;
  // On one line: a sample may be a Prometheus text or a stack.
  if (tally.problems[what] === 1 && tally.samples.length < SAMPLES) tally.samples.push(`${what}: ${sample.replace(/\s+/g, ' ')}`);
}

/** The request in a line: long bodies by their length. */
function describe(req: Request): string {
  const body = req.raw !== undefined ? `(${req.raw.length} bytes as sent)` : req.body === undefined ? '' : JSON.stringify(req.body);
  return `${req.method} ${req.path}${body ? ` ${body.length > 200 ? `(${body.length} bytes) ${body.slice(0, 120)}…` : body}` : ''}`;
}
