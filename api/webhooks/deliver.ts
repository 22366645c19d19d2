/**
 * One webhook HTTP attempt. The host is resolved here, every address it resolves to is checked
 * against the address policy (a name with one private address among public ones is refused:
 * DNS rebinding and split answers), and the socket connects to the very address that was
 * checked, through node:http's `lookup` hook, so a second resolution cannot swap it.
 *
 * Outcomes (Svix-like; the receiver is told nothing more than its status code):
 * - 2xx → succeeded.
 * - 410 Gone → gone: the receiver has said the endpoint is no more; no further attempts.
 * - anything else (3xx, since redirects are not followed; 4xx; 429; 5xx; timeouts; connection
 *   errors; a refused address) → retry, per the schedule, honouring `Retry-After`. Other 4xx
 *   are retried too: they are as often a receiver's bad deploy as a permanent refusal, and the
 *   schedule ends in the dead-letter list, from which a delivery can be replayed.
 *
 * A failed attempt's `error` is a category (`connection_refused`, `timeout`, `http_503`, …:
 * api/webhooks/attempt-error.ts), the only thing the tenant's delivery record shows; the error
 * itself, with names, addresses and ports, is `detail`, for the dispatcher's log.
 *
 * The answer's body is read up to RESPONSE_BODY_LIMIT_BYTES and never kept: once the status is
 * in, the body's end, that cap, the timeout or a reset all end the attempt with that status.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { blockedAddressReason, blockedHostReason, isAllowedHost, urlHost } from './address-policy.ts';
import { attemptErrorCategory, BlockedAddressError, httpErrorCategory } from './attempt-error.ts';

/** The resolver, injectable so tests can map a name to an address. Same shape as dns.lookup with `all: true`. */
export type ResolveAll = (host: string) => Promise<LookupAddress[]>;

export interface AttemptRequest {
  url: string;
  /** The Standard Webhooks headers (webhook-id, -timestamp, -signature). */
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  allowedPrivateHosts: readonly string[];
  resolve?: ResolveAll;
  userAgent?: string;
}

export type AttemptResult =
  | { outcome: 'succeeded'; status: number; durationMs: number }
  | { outcome: 'gone'; status: number; durationMs: number }
  | {
      outcome: 'retry';
      status?: number;
      /** A category (api/webhooks/attempt-error.ts): what the tenant's delivery record shows. */
      error: string;
      /** The error itself, for the dispatcher's log only: names, addresses, ports. */
      detail?: string;
      retryAfter?: string;
      durationMs: number;
    };

export const USER_AGENT = 'warmpool-webhooks/1';

/**
 * How much of a receiver's answer is read before the connection is closed. The outcome is the
 * status alone and the body is discarded; reading a little of it lets an ordinary answer ("ok",
 * a small JSON, a framework's error page: a few KiB) end cleanly instead of by a reset. Past
 * it, reading on would only let a receiver that streams an endless body hold a delivery slot
 * until the timeout. 64 KiB is what one socket read brings in at most (libuv's read size), so
 * the cap costs about one read past an ordinary answer.
 */
export const RESPONSE_BODY_LIMIT_BYTES = 64 * 1024;

export const systemResolve: ResolveAll = (host) =>
  new Promise((resolve, reject) => dnsLookup(host, { all: true, verbatim: true }, (err, addrs) => (err ? reject(err) : resolve(addrs))));

export async function deliverOnce(req: AttemptRequest): Promise<AttemptResult> {
  const started = performance.now();
  const durationMs = () => Math.round(performance.now() - started);
  try {
    const { status, retryAfter } = await post(req);
    if (status >= 200 && status < 300) return { outcome: 'succeeded', status, durationMs: durationMs() };
    if (status === 410) return { outcome: 'gone', status, durationMs: durationMs() };
    return { outcome: 'retry', status, error: httpErrorCategory(status), ...(retryAfter ? { retryAfter } : {}), durationMs: durationMs() };
  } catch (err) {
    return { outcome: 'retry', error: attemptErrorCategory(err), detail: describe(err), durationMs: durationMs() };
  }
}

/** The address to connect to, after checking every address the host resolves to. */
export async function checkedAddress(host: string, allowed: readonly string[], resolve: ResolveAll): Promise<LookupAddress> {
  const open = isAllowedHost(host, allowed);
  if (!open && blockedHostReason(host)) throw new BlockedAddressError(`host ${host} is blocked (${blockedHostReason(host)})`);
  const addresses = await resolve(host);
  const first = addresses[0];
  if (!first) throw new Error(`host ${host} resolved to no address`);
  if (!open) {
    for (const a of addresses) {
      const reason = blockedAddressReason(a.address);
      if (reason) throw new BlockedAddressError(`host ${host} resolves to ${a.address}, a blocked address (${reason})`);
    }
  }
  return first;
}

async function post(req: AttemptRequest): Promise<{ status: number; retryAfter?: string }> {
  const url = new URL(req.url);
  const signal = AbortSignal.timeout(req.timeoutMs);
  // Checked before any socket exists: node:http skips `lookup` for literal addresses.
  const checked = await abortable(checkedAddress(urlHost(url), req.allowedPrivateHosts, req.resolve ?? systemResolve), signal);
  // Only ever answers with the checked address; node:http calls this instead of dns.lookup.
  const lookup: LookupFunction = (_hostname, options, callback) => {
    if (options.all) callback(null, [checked]);
    else callback(null, checked.address, checked.family);
  };
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolvePost, reject) => {
    // Once the status is in, it is the outcome: whatever ends the body then (its end, the cap,
    // the timeout, a reset) ends the attempt with that status, and closes the connection.
    let answer: { status: number; retryAfter?: string } | undefined;
    const done = () => {
      if (answer) resolvePost(answer);
      request.destroy();
    };
    const request = client.request(
      url,
      {
        method: 'POST',
        lookup,
        agent: false, // a fresh connection per attempt: no pooled socket to a previously checked address
        signal,
        headers: {
          ...req.headers,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(req.body),
          'user-agent': req.userAgent ?? USER_AGENT,
        },
      },
      (res) => {
        const retryAfter = res.headers['retry-after'];
        answer = { status: res.statusCode ?? 0, ...(retryAfter ? { retryAfter } : {}) };
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.length; // counted, never kept
          if (read > RESPONSE_BODY_LIMIT_BYTES) done();
        });
        res.on('end', done);
        res.on('close', done);
        res.on('error', done);
      },
    );
    request.on('error', (err) => (answer ? done() : reject(err)));
    request.end(req.body);
  });
}

/** A slow resolver counts against the attempt's timeout too. */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

function describe(err: unknown): string {
  if (err instanceof BlockedAddressError) return `blocked: ${err.message}`;
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) return 'timeout';
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}
