/**
 * The attacker of scripts/chaos/hostile-tenant.ts: an ordinary tenant's key and a script that
 * sends the attacks of hostile-attacks.ts in a loop until told to stop, beside the long-lived
 * ones: simulations back to back, event streams held open, slowloris sockets and bursts of
 * made-up keys from another address. It runs as a child process
 * (`node --import tsx hostile-attacker.ts <result file>`, its targets a line of JSON on stdin),
 * as a second client would: its own event loop and sockets, so its requests are not built and
 * read on the API's event loop (the API runs in the scenario's process). SIGTERM stops it: it
 * closes what it holds, writes its tally as JSON to the result file and exits.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
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
  newTally,
  problem,
  REQUEST_TIMEOUT_MS,
  sendAttack,
  simulationAttacks,
} from './hostile-attacks.ts';
import { pool, statusKey } from './load.ts';
import { sleep } from './sleep.ts';

/** Sends the attacks until `stop` aborts; resolves with the tally once everything it held is closed. */
export async function attack(t: AttackTargets, stop: AbortSignal): Promise<AttackTally> {
  const tally = newTally();
  const catalogue = attackCatalogue(t);
  let next = 0;
  const lane = async () => {
    while (!stop.aborted) {
      const n = next++;
      await sendAttack(t, catalogue[n % catalogue.length] as Attack, Math.floor(n / catalogue.length), tally, stop);
    }
  };
  await Promise.all([
    ...Array.from({ length: t.sizes.lanes }, lane),
    simulations(t, tally, stop),
    holdStreams(t, tally, stop),
    slowloris(t, tally, stop),
    failedAuthBursts(t, tally, stop),
  ]);
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
    try {
      let res: Response;
      let text: string;
      do {
        if (stop.aborted) return;
        tally.sent++;
        res = await fetch(`${t.api}/v1/jobs/${jobId}/events`, {
          headers: { authorization: `Bearer ${t.key}` },
          signal: AbortSignal.any([abort.signal, stop]),
        });
        text = res.ok ? '' : await res.text();
        count(tally, name, statusKey(res, text));
      } while (statusKey(res, text) === '429 rate_limited' && (await sleep(50, stop).then(() => true)));
      if (res.status >= 500) problem(tally, `${name}: ${res.status} answer`, `stream ${i + 1} → ${statusKey(res, text)}`);
      // Held and read (heartbeats only, while the job waits) until the stop aborts it.
      if (res.ok && res.body) {
        const stream = { abort, open: true };
        held.push(stream);
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
  await exchange(t, { method: 'DELETE', path: `/v1/jobs/${jobId}` });
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
    const burst = Array.from({ length: t.sizes.authBurst }, () => rawGet(t, '/v1/models', randomBytes(18).toString('base64url')));
    for (const answer of await Promise.all(burst)) tallyRaw(tally, 'auth: made-up keys', answer);
    tallyRaw(tally, 'auth: its real key, same address, after a burst', await rawGet(t, '/v1/models', t.key));
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
    count(tally, name, `no answer (${answer.message})`);
    problem(tally, `${name}: no answer`, answer.message);
    return;
  }
  const headers = answer.retryAfter === undefined ? undefined : { 'retry-after': answer.retryAfter };
  const key = statusKey(new Response(null, { status: answer.status, headers }), answer.text);
  count(tally, name, key);
  if (answer.status >= 500) problem(tally, `${name}: ${answer.status} answer`, `${key} ${answer.text.slice(0, 160)}`);
}

/** GET through node:http, which (unlike fetch) can pick the address the request comes from. */
function rawGet(t: AttackTargets, path: string, key: string): Promise<RawAnswer | Error> {
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
    req.end();
  });
}

/**
 * The child process: waits for its targets (one line of JSON on stdin, so it can be started and
 * loaded before anything is measured), attacks until SIGTERM, then writes the tally.
 */
async function main(resultFile: string): Promise<void> {
  const stop = new AbortController();
  process.once('SIGTERM', () => stop.abort());
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
