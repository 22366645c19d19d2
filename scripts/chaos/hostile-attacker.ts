/**
 * The attacker of scripts/chaos/hostile-tenant.ts: an ordinary tenant's key and a script that
 * sends the attacks of hostile-attacks.ts in a loop until told to stop, beside the long-lived
 * ones: simulations back to back, event streams held open, slowloris sockets and bursts of
 * made-up keys from another address. It runs as a child process
 * (`node --import tsx hostile-attacker.ts <result file>`, its targets a line of JSON on stdin),
 * as a second client would: its own event loop and sockets, so its requests are not built and
 * read on the API's event loop (the API runs in the scenario's process). Issue 33's attacks run
 * beside them: an anonymous client's gRPC calls and idle connections (hostile-grpc.ts) and
 * /openapi.json flood, a second tenant spending its budgets (hostile-budget.ts), and bulk runs
 * over hostile inputs in the attacker's own area (hostile-bulk.ts). SIGTERM stops it: it closes
 * what it holds (for at most CLOSE_MS: a starved process must still hand its tally back before
 * the scenario's SIGKILL), writes its tally as JSON to the result file and exits.
 */
import { randomBytes } from 'node:crypto';
import { once, setMaxListeners } from 'node:events';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { coerceError } from '../../infra/kernel/errors.ts';
import {
  type Attack,
  type AttackTally,
  type AttackTargets,
  attackCatalogue,
  count,
  exchange,
  failureOf,
  newTally,
  problem,
  REQUEST_TIMEOUT_MS,
  sendAttack,
  simulationAttacks,
} from './hostile-attacks.ts';
import { budgetAttacks } from './hostile-budget.ts';
import { bulkAttacks } from './hostile-bulk.ts';
import { grpcAttacks } from './hostile-grpc.ts';
import { idleHttp } from './hostile-idle-http.ts';
import { pool, statusKey } from './load.ts';
import { sleep } from './sleep.ts';

/** How long the attacker closes what it holds after the stop before it writes its tally anyway. */
const CLOSE_MS = 8_000;
export const OPENAPI_FLOOD = 'read: /openapi.json without a key, back to back';

/** Sends the attacks until `stop` aborts; resolves with the tally once everything it held is closed. */
export async function attack(t: AttackTargets, stop: AbortSignal): Promise<AttackTally> {
  const tally = newTally();
  const catalogue = attackCatalogue(t);
  let next = 0;
  const lane = async () => {
    while (!stop.aborted) {
      const n = next++;
      const a = catalogue[n % catalogue.length] as Attack;
      const round = Math.floor(n / catalogue.length);
      if (a.every === undefined || round % a.every === 0) await sendAttack(t, a, round, tally, stop);
    }
  };
  const openapi: Attack = {
    name: OPENAPI_FLOOD,
    refuse: false,
    request: () => ({ method: 'GET', path: '/openapi.json', anonymous: true }),
  };
  const grpc = { target: t.bounds.grpc.target, fromAddress: t.bounds.grpc.fromAddress, idle: t.sizes.grpcIdle };
  // One that throws is a finding, never the end of the others.
  const guarded = (name: string, run: Promise<unknown>) =>
    run.catch((err: unknown) => problem(tally, `${name}: threw`, coerceError(err).stack ?? String(err)));
  // How late the attacker itself runs: what its measured holds may be late by.
  const LAG_PROBE_MS = 100;
  let expected = performance.now() + LAG_PROBE_MS;
  const lagProbe = setInterval(() => {
    const now = performance.now();
    tally.clientLagMaxMs = Math.max(tally.clientLagMaxMs, now - expected);
    expected = now + LAG_PROBE_MS;
  }, LAG_PROBE_MS);
  stop.addEventListener('abort', () => clearInterval(lagProbe), { once: true });
  const attacks = Promise.all([
    ...Array.from({ length: t.sizes.lanes }, () => guarded('lane', lane())),
    guarded('simulations', simulations(t, tally, stop)),
    guarded('streams', holdStreams(t, tally, stop)),
    guarded('slowloris', slowloris(t, tally, stop)),
    guarded('auth bursts', failedAuthBursts(t, tally, stop)),
    guarded(
      'openapi',
      (async () => {
        for (let n = 0; !stop.aborted; n++) await sendAttack(t, openapi, n, tally, stop);
      })(),
    ),
    guarded('grpc', grpcAttacks(grpc, tally, stop)),
    guarded('idle http', idleHttp({ api: t.api, fromAddress: t.bounds.http.fromAddress, sockets: t.sizes.httpIdle }, tally.httpIdle, stop)),
    guarded('budget', budgetAttacks(t, tally, stop)),
    guarded('bulk', bulkAttacks(t, tally, stop)),
  ]);
  await new Promise<void>((resolve) => (stop.aborted ? resolve() : stop.addEventListener('abort', () => resolve(), { once: true })));
  // The bound's timer is cleared once everything has closed: left running it would keep this
  // process alive for the rest of CLOSE_MS after its tally is written.
  const bound = new AbortController();
  const closed = await Promise.race([attacks.then(() => true), sleep(CLOSE_MS, bound.signal).then(() => false)]);
  bound.abort();
  if (!closed) problem(tally, 'attacker: still closing after the stop', `${CLOSE_MS} ms after SIGTERM; its tally written as it stood`);
  return tally;
}

/** Simulations back to back; a refusal is retried after a short pause, as a script would. */
async function simulations(t: AttackTargets, tally: AttackTally, stop: AbortSignal): Promise<void> {
  const attacks = simulationAttacks(t);
  for (let n = 0; !stop.aborted; n++) {
    const key = await sendAttack(t, attacks[n % attacks.length] as Attack, n, tally, stop);
    if (!key.startsWith('2')) await sleep(50, stop);
  }
}

/** Opens event streams on one of the attacker's own jobs (on a model nobody serves, so it never ends) and holds them. */
async function holdStreams(t: AttackTargets, tally: AttackTally, stop: AbortSignal): Promise<void> {
  const name = 'stream: many on its own job';
  const created = await exchange(
    t,
    {
      method: 'POST',
      path: `/v1/models/${t.models.idle}/jobs`,
      body: {
        inputs: [{ name: 'features', shape: [1, t.features], datatype: 'FP32', data: Array(t.features).fill(0.25) }],
      },
    },
    stop,
  );
  if (created instanceof Error || created.status !== 202) {
    problem(
      tally,
      `${name}: could not create its job`,
      created instanceof Error ? created.message : `${created.key} ${created.text.slice(0, 120)}`,
    );
    return;
  }
  const jobId = (JSON.parse(created.text) as { id: string }).id;
  const held: Array<{ abort: AbortController; open: boolean }> = [];
  // 20 at a time, as fast as the API answers: the cap must hold against a burst. A stream the
  // tenant's rate limit refused is asked for again (after a short pause), so the cap is reached.
  await pool(t.sizes.sseStreams, 20, async (i) => {
    const abort = new AbortController();
    held.push({ abort, open: false });
    try {
      let res: Response;
      let text: string;
      do {
        if (stop.aborted) return;
        tally.sent++;
        res = await fetch(`${t.api}/v1/jobs/${jobId}/events`, {
          headers: { authorization: `Bearer ${t.key}` },
          // Its own signal alone: each held stream is aborted at the stop below (one listener
          // per stream on the stop signal would be hundreds).
          signal: abort.signal,
        });
        text = res.ok ? '' : await res.text();
        count(tally, name, statusKey(res, text));
      } while (statusKey(res, text) === '429 rate_limited' && (await sleep(50, stop).then(() => true)));
      if (res.status >= 500) problem(tally, `${name}: ${res.status} answer`, `stream ${i + 1} → ${statusKey(res, text)}`);
      // Held and read (heartbeats only, while the job waits) until the stop aborts it.
      if (res.ok && res.body) {
        const stream = held.find((s) => s.abort === abort) as { abort: AbortController; open: boolean };
        stream.open = true;
        void watchEnd(res.body, stop).then((end) => {
          stream.open = false;
          if (end === undefined) return;
          tally.streams.endedByServer++;
          tally.streams.firstEnd ??= end.replace(/\s+/g, ' ').slice(0, 200);
        });
      }
    } catch (err) {
      if (!stop.aborted) problem(tally, `${name}: no answer`, `stream ${i + 1} → ${coerceError(err).message}`);
    }
  });
  await new Promise<void>((resolve) => (stop.aborted ? resolve() : stop.addEventListener('abort', () => resolve(), { once: true })));
  tally.streams.openAtStop = held.filter((s) => s.open).length;
  for (const s of held) s.abort.abort();
  await exchange(t, { method: 'DELETE', path: `/v1/jobs/${jobId}` }, AbortSignal.timeout(3_000));
}

/** Reads an event stream to its end: what it carried when the server ended it, undefined when the stop did. */
async function watchEnd(body: ReadableStream<Uint8Array>, stop: AbortSignal): Promise<string | undefined> {
  const decoder = new TextDecoder();
  let text = '';
  try {
    for await (const chunk of body) text = (text + decoder.decode(chunk)).slice(-400);
  } catch {
    // aborted
  }
  return stop.aborted ? undefined : text || '(nothing)';
}

/** Sockets from another address that send a request line and then one header byte every half second. */
async function slowloris(t: AttackTargets, tally: AttackTally, stop: AbortSignal): Promise<void> {
  const { hostname, port } = new URL(t.api);
  const one = async () => {
    while (!stop.aborted) {
      const openedAt = performance.now();
      const closedBy = await trickle(hostname, Number(port), t.fromAddress, stop);
      const heldMs = Math.round(performance.now() - openedAt);
      if (closedBy === 'server') tally.slowloris.closedAfterMs.push(heldMs);
      else tally.slowloris.openAtStopMs.push(heldMs);
    }
  };
  await Promise.all(Array.from({ length: t.sizes.slowloris }, one));
}

/** One slowloris socket: resolves with who ended it. */
function trickle(host: string, port: number, localAddress: string, stop: AbortSignal): Promise<'server' | 'stop'> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port, localAddress });
    let timer: NodeJS.Timeout | undefined;
    const end = (by: 'server' | 'stop') => {
      clearInterval(timer);
      stop.removeEventListener('abort', onStop);
      socket.destroy();
      resolve(by);
    };
    const onStop = () => end('stop');
    stop.addEventListener('abort', onStop, { once: true });
    socket.once('connect', () => {
      socket.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: ');
      timer = setInterval(() => socket.write('a'), 500);
    });
    socket.on('data', () => undefined);
    socket.once('error', () => undefined);
    socket.once('close', () => end('server'));
  });
}

/** Bursts of requests with made-up keys from another address, each followed by one with the attacker's real key. */
async function failedAuthBursts(t: AttackTargets, tally: AttackTally, stop: AbortSignal): Promise<void> {
  while (!stop.aborted) {
    const burst = Array.from({ length: t.sizes.authBurst }, () => rawGet(t, '/v1/models', randomBytes(18).toString('base64url'), stop));
    const answers = await Promise.all(burst);
    if (stop.aborted) break;
    for (const answer of answers) tallyRaw(tally, 'auth: made-up keys', answer);
    const real = await rawGet(t, '/v1/models', t.key, stop);
    if (stop.aborted) break;
    tallyRaw(tally, 'auth: its real key, same address, after a burst', real);
    await sleep(t.sizes.authEveryMs, stop);
  }
}

interface RawAnswer {
  status: number;
  retryAfter?: string;
  text: string;
}

function tallyRaw(tally: AttackTally, name: string, answer: RawAnswer | Error): void {
  tally.sent++;
  if (answer instanceof Error) {
    count(tally, name, `no answer (${failureOf(answer)})`);
    problem(tally, `${name}: no answer`, failureOf(answer));
    return;
  }
  const headers = answer.retryAfter === undefined ? undefined : { 'retry-after': answer.retryAfter };
  const key = statusKey(new Response(null, { status: answer.status, headers }), answer.text);
  count(tally, name, key);
  if (answer.status >= 500) problem(tally, `${name}: ${answer.status} answer`, `${key} ${answer.text.slice(0, 160)}`);
}

/** GET through node:http, which (unlike fetch) can pick the address the request comes from. */
function rawGet(t: AttackTargets, path: string, key: string, stop: AbortSignal): Promise<RawAnswer | Error> {
  const url = new URL(t.api);
  return new Promise((resolve) => {
    const req = http.request(
      { host: url.hostname, port: url.port, path, localAddress: t.fromAddress, headers: { authorization: `Bearer ${key}` }, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        const retryAfter = res.headers['retry-after'];
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, ...(retryAfter === undefined ? {} : { retryAfter }) }));
        res.on('error', (err) => resolve(err));
      },
    );
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error('hung')));
    req.once('error', (err) => resolve(err));
    const onStop = () => req.destroy(new Error('stopped'));
    stop.addEventListener('abort', onStop, { once: true });
    req.once('close', () => stop.removeEventListener('abort', onStop));
    req.end();
  });
}

/**
 * The child process: waits for its targets (one line of JSON on stdin, so it can be started and
 * loaded before anything is measured), attacks until SIGTERM, then writes the tally.
 */
async function main(resultFile: string): Promise<void> {
  const stop = new AbortController();
  // Every request in flight listens on the stop once and lets go when answered (linkedSignal):
  // a few dozen at once (lanes, auth bursts, the bulk lane's runs) is the design, not a leak.
  setMaxListeners(200, stop.signal);
  process.once('SIGTERM', () => stop.abort());
  // Loaded, and a SIGTERM now ends it with its tally: the scenario waits for this line.
  process.stdout.write('ready\n');
  const lines = createInterface({ input: process.stdin });
  const first = await Promise.race([once(lines, 'line').then(([line]) => String(line)), once(stop.signal, 'abort').then(() => undefined)]);
  lines.close();
  process.stdin.destroy();
  if (first === undefined) return;
  const tally = await attack(JSON.parse(first) as AttackTargets, stop.signal);
  writeFileSync(resultFile, JSON.stringify(tally));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await main(process.argv[2] ?? '/dev/stdout');
}
