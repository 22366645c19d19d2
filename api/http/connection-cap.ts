/**
 * The HTTP listener's connection bound: connections held at once, in all and per source address,
 * counted from acceptance to close (issue 33). Node bounds none of this by itself: a client that
 * opens a new connection per request holds, through keep-alive, its request rate × 5 s of file
 * descriptors, and a thousand idle sockets from one address are a thousand descriptors.
 *
 *   accepted ─┬─ under both caps ──────────────────────────────────────────▶ served
 *             ├─ at a cap, and an idle keep-alive socket to give back ──────▶ that one closed, this one served
 *             └─ at a cap, nothing idle ─▶ answered 429 (its address) or 503 (all), closed
 *
 * Idle means between requests on a kept-alive connection: the oldest idle socket goes first, of
 * the same address for its cap, of any address for the total. A socket that has not finished its
 * first request yet is never given back (HEADERS_TIMEOUT_MS bounds it), nor one with a request in
 * flight (an event stream is bounded by MAX_SSE_STREAMS*). So an address at its cap keeps being
 * served as long as its own connections are reused or idle, and only an address that holds its
 * whole share busy at once is refused.
 *
 * The answer to a refused connection is written before its request is read: a short error body
 * (`{ error: { code, message } }`, DESIGN §5) with Connection: close, and the socket is destroyed
 * once it is flushed, so a refusal holds its descriptor for one write.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { errorBody } from './error-body.ts';

export interface HttpConnectionLimits {
  /** Connections held at once, all addresses together (HTTP_MAX_CONNECTIONS). */
  maxConnections: number;
  /** Connections one source address may hold at once (HTTP_MAX_CONNECTIONS_PER_ADDRESS). */
  maxConnectionsPerAddress: number;
}

/** What is known of one accepted connection. */
interface Held {
  address: string;
  /** Requests on it whose answer has not finished. */
  inFlight: number;
}

/** The server events the cap listens to (an http.Server, and what @hono/node-server's serve returns). */
type CappedServer = Pick<Server, 'on'>;

export function capConnections(server: CappedServer, limits: HttpConnectionLimits): void {
  const perAddress = new Map<string, number>();
  const held = new Map<Socket, Held>();
  // Insertion order is the order they went idle: the first is the one idle longest.
  const idle = new Set<Socket>();

  const oldestIdle = (address?: string): Socket | undefined => {
    for (const socket of idle) if (address === undefined || held.get(socket)?.address === address) return socket;
    return undefined;
  };
  /** Gives back the oldest idle connection that frees a slot under the cap hit; false when none is idle. */
  const reclaim = (address: string): boolean => {
    const overAddress = (perAddress.get(address) ?? 0) >= limits.maxConnectionsPerAddress;
    const victim = oldestIdle(overAddress ? address : undefined);
    if (!victim) return false;
    // Released now, not on its 'close' (which comes on a later tick): the new socket takes the slot.
    release(victim);
    victim.destroy();
    return true;
  };
  const release = (socket: Socket) => {
    const h = held.get(socket);
    if (!h) return;
    held.delete(socket);
    idle.delete(socket);
    const left = (perAddress.get(h.address) ?? 1) - 1;
    if (left > 0) perAddress.set(h.address, left);
    else perAddress.delete(h.address);
  };
  const full = (address: string) => held.size >= limits.maxConnections || (perAddress.get(address) ?? 0) >= limits.maxConnectionsPerAddress;

  server.on('connection', (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    // At most two rounds: a slot freed for the address may still leave the total full.
    for (let round = 0; round < 2 && full(address); round++) if (!reclaim(address)) break;
    if (full(address)) {
      refuse(socket, held.size >= limits.maxConnections ? 'all' : 'address');
      return;
    }
    held.set(socket, { address, inFlight: 0 });
    perAddress.set(address, (perAddress.get(address) ?? 0) + 1);
    socket.once('close', () => release(socket));
  });

  server.on('request', (req, res) => {
    const socket = req.socket as Socket;
    const h = held.get(socket);
    if (!h) return;
    h.inFlight++;
    idle.delete(socket);
    res.once('close', () => {
      h.inFlight--;
      // Still open and kept alive: idle until its next request, and the first to give back.
      if (h.inFlight === 0 && held.has(socket) && !socket.destroyed) idle.add(socket);
    });
  });
}

function refuse(socket: Socket, cap: 'all' | 'address'): void {
  const [status, reason, code, message] =
    cap === 'address'
      ? ([
          429,
          'Too Many Requests',
          'too_many_connections',
          'this address holds as many connections as it may; reuse one or retry shortly',
        ] as const)
      : ([503, 'Service Unavailable', 'server_busy', 'the server holds as many connections as it may; retry shortly'] as const);
  const body = JSON.stringify(errorBody(code, message));
  const answer =
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nRetry-After: 1\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
  socket.on('error', () => undefined); // a client already gone: nothing to tell it
  socket.write(answer, () => socket.destroy());
}
