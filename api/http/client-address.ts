/**
 * The address a request came from, for limits kept per source address (failed
 * authentication, api/http/auth-failures.ts).
 *
 * By default it is what the client cannot write: the socket's peer on the node server and on
 * Bun's (api/bun-listener.ts), the source IP API Gateway saw on Lambda. Behind proxies every client shares the proxy's address;
 * TRUST_PROXY_HOPS = n believes the last n X-Forwarded-For entries, each appended by one proxy
 * with the address it saw: the client's is the entry n places left of the socket's peer. A
 * client may put anything at the front of the header; it cannot change what the trusted proxies
 * appended after it. Trusting more hops than there are proxies lets a client choose its address.
 */
import { isIPv4, isIPv6 } from 'node:net';
import type { Context } from 'hono';

/** What the node server (@hono/node-server), Bun's server and the Lambda adapter put in `c.env`. */
interface Bindings {
  incoming?: { socket?: { remoteAddress?: string } };
  /** Bun.serve passes the server itself, as hono's Bun adapter reads it (hono/bun getConnInfo). */
  requestIP?: (request: Request) => { address: string } | null;
  requestContext?: { identity?: { sourceIp?: string }; http?: { sourceIp?: string } };
}

/** The client's address, or undefined when the runtime does not say (hono's `app.request`). */
export function clientAddress(c: Context, trustedHops = 0): string | undefined {
  const peer = peerAddress(c.env as Bindings | undefined, c.req.raw);
  if (trustedHops <= 0 || peer === undefined) return peer;
  const forwarded = (c.req.header('x-forwarded-for') ?? '')
    .split(',')
    .map((a) => a.trim())
    .filter(Boolean);
  const chain = [...forwarded, peer];
  return chain[Math.max(0, chain.length - 1 - trustedHops)];
}

function peerAddress(env: Bindings | undefined, request: Request): string | undefined {
  if (typeof env?.requestIP === 'function') return env.requestIP(request)?.address;
  return env?.incoming?.socket?.remoteAddress ?? env?.requestContext?.identity?.sourceIp ?? env?.requestContext?.http?.sourceIp;
}

/**
 * The bucket an address counts in: an IPv4 address itself (an IPv4-mapped IPv6 one unwrapped),
 * an IPv6 address's /64 (one subscriber usually holds a whole /64, and would otherwise get a
 * fresh bucket per address), `unknown` when there is no address or it is not one.
 */
export function addressBucket(address: string | undefined): string {
  const a = (address ?? '').replace(/%.*$/, '');
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a)?.[1] ?? a;
  if (isIPv4(v4)) return v4;
  if (!isIPv6(a)) return 'unknown';
  const [head = '', tail] = a.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = [...left, ...new Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
