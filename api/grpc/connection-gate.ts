/**
 * The gRPC listener's own TCP server: it counts connections, in all and per source address, and
 * hands a socket to grpc-js (`inject`, a Server's connection injector) only once it has sent the
 * HTTP/2 connection preface. grpc-js alone bounds none of this: before, a thousand idle sockets
 * from one address were a thousand file descriptors held for ever (issue 33).
 *
 *   accepted ──(over a cap)──────────────────────────▶ destroyed at once
 *      │
 *      ├──(no preface within handshakeTimeoutMs, or bytes that are not it)──▶ destroyed
 *      ▼
 *   injected: grpc-js's session (its idle timeout, stream cap and keepalive apply) ──▶ closed
 *
 * A socket counts from its acceptance to its close, whatever state it is in: a silent socket
 * holds a slot for at most handshakeTimeoutMs. Close: stop listening, destroy what is still in
 * its handshake; injected sessions are grpc-js's to drain (server.ts).
 */
import net, { type AddressInfo, type Socket } from 'node:net';

/** What every HTTP/2 client sends first (RFC 9113 §3.4). */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

export interface ConnectionLimits {
  /** Connections held at once, all addresses together (GRPC_MAX_CONNECTIONS). */
  maxConnections: number;
  /** Connections one source address may hold at once (GRPC_MAX_CONNECTIONS_PER_ADDRESS). */
  maxConnectionsPerAddress: number;
  /** How long a new connection has to send the HTTP/2 preface. */
  handshakeTimeoutMs: number;
}

export interface ConnectionGate {
  port: number;
  /** Connections held now, by source address (for tests and metrics). */
  connections(): ReadonlyMap<string, number>;
  close(): Promise<void>;
}

export async function openConnectionGate(
  host: string,
  port: number,
  limits: ConnectionLimits,
  inject: (socket: Socket) => void,
): Promise<ConnectionGate> {
  const perAddress = new Map<string, number>();
  let total = 0;
  const handshaking = new Set<Socket>();

  const admit = (socket: Socket) => {
    const address = socket.remoteAddress ?? '';
    const held = perAddress.get(address) ?? 0;
    if (total >= limits.maxConnections || held >= limits.maxConnectionsPerAddress) {
      // No HTTP/2 yet, so no GOAWAY to send: the client sees the connection closed and backs off.
      socket.destroy();
      return;
    }
    total++;
    perAddress.set(address, held + 1);
    socket.once('close', () => {
      total--;
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    });
    socket.on('error', () => undefined); // a reset; 'close' follows and releases the slot
    awaitPreface(socket);
  };

  const awaitPreface = (socket: Socket) => {
    handshaking.add(socket);
    let head: Buffer = Buffer.alloc(0);
    const done = () => {
      clearTimeout(timer);
      socket.off('data', onData);
      handshaking.delete(socket);
    };
    const timer = setTimeout(() => {
      done();
      socket.destroy();
    }, limits.handshakeTimeoutMs);
    timer.unref();
    const onData = (chunk: Buffer) => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const seen = Math.min(head.length, PREFACE.length);
      if (!head.subarray(0, seen).equals(PREFACE.subarray(0, seen))) {
        done();
        socket.destroy();
        return;
      }
      if (head.length < PREFACE.length) return;
      done();
      // The bytes read go back in front of the stream: grpc-js's HTTP/2 session reads them first.
      socket.pause();
      socket.unshift(head);
      inject(socket);
    };
    socket.on('data', onData);
    socket.once('close', done);
  };

  const server = net.createServer(admit);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });

  let closing: Promise<void> | undefined;
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => perAddress,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const socket of handshaking) socket.destroy();
      });
      return closing;
    },
  };
}
