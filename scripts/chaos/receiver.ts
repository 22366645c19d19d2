/**
 * A webhook receiver for the scenarios: records the job id of every delivery it answers 2xx
 * (taken from the Standard Webhooks `webhook-id`, `msg_<jobId>_<event>`) and when it first came,
 * optionally answering only after a delay (a slow receiver), and can be stopped and started again
 * on the same port (while stopped, deliveries get "connection refused"). Beside it, the hostile
 * receivers of hostile-tenant: one that never answers, one that streams a body without end.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Receiver {
  /** `http://localhost:<port>/hook` (localhost: WEBHOOK_ALLOWED_PRIVATE_HOSTS names it). */
  url: string;
  /** Job ids delivered (each once, however often it was delivered). */
  readonly delivered: Set<string>;
  /** Job id → when (epoch ms) it was first delivered. */
  readonly deliveredAt: Map<string, number>;
  /** Deliveries answered, repeats included. */
  readonly answered: number;
  /** Milliseconds to wait before answering; 0 = at once. */
  delayMs: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startReceiver(options: { delayMs?: number; listening?: boolean } = {}): Promise<Receiver> {
  const delivered = new Set<string>();
  const deliveredAt = new Map<string, number>();
  let answered = 0;
  let server: http.Server | undefined;
  let port = 0;
  const receiver: Receiver = {
    url: '',
    delivered,
    deliveredAt,
    get answered() {
      return answered;
    },
    delayMs: options.delayMs ?? 0,
    async start() {
      if (server) return;
      const s = http.createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          const id = /^msg_(.+)_[a-z]+$/.exec(String(req.headers['webhook-id'] ?? ''))?.[1];
          const answer = () => {
            if (id && !delivered.has(id)) deliveredAt.set(id, Date.now());
            if (id) delivered.add(id);
            answered++;
            res.writeHead(204).end();
          };
          if (receiver.delayMs > 0) setTimeout(answer, receiver.delayMs);
          else answer();
        });
      });
      await new Promise<void>((resolve) => s.listen(port, '127.0.0.1', resolve));
      port = (s.address() as AddressInfo).port;
      receiver.url = `http://localhost:${port}/hook`;
      server = s;
    },
    async stop() {
      const s = server;
      server = undefined;
      if (!s) return;
      s.closeAllConnections();
      await new Promise<void>((resolve) => s.close(() => resolve()));
    },
  };
  await receiver.start();
  if (options.listening === false) await receiver.stop();
  return receiver;
}

/**
 * Waits until every id in `ids` was delivered, or until `idleMs` pass without a new delivery
 * (late is fine, stuck is not). Returns how many never arrived.
 */
export async function waitForDeliveries(receiver: Receiver, ids: string[], idleMs = 30_000): Promise<number> {
  let lastCount = -1;
  let lastProgressAt = Date.now();
  for (;;) {
    const missing = ids.filter((id) => !receiver.delivered.has(id)).length;
    if (missing === 0) return 0;
    if (receiver.delivered.size !== lastCount) {
      lastCount = receiver.delivered.size;
      lastProgressAt = Date.now();
    } else if (Date.now() - lastProgressAt > idleMs) {
      return missing;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** What a hostile receiver saw: each connection's bytes sent and how long it was held. */
export interface HostileReceiverStats {
  requests: number;
  /** Connections ended, by how long they were held (ms) and how many body bytes the socket took. */
  heldMs: number[];
  bytesSent: number[];
  /** Ages (ms) of the connections still open now. */
  openMs: number[];
}

export interface HostileReceiver {
  url: string;
  stats(): HostileReceiverStats;
  stop(): Promise<void>;
}

/**
 * A receiver an attacker points its webhooks at: `hang` reads the delivery and never answers;
 * `endless` answers 200 and then a body that never ends, 16 KiB chunks as fast as the socket
 * takes them. Either way the dispatcher must end the attempt itself (its timeout, its 64 KiB
 * read cap) and hold nothing for it.
 */
export async function startHostileReceiver(kind: 'hang' | 'endless'): Promise<HostileReceiver> {
  const stats: HostileReceiverStats = { requests: 0, heldMs: [], bytesSent: [], openMs: [] };
  const open = new Map<http.ServerResponse, number>();
  const chunk = Buffer.alloc(16 * 1024, 'x');
  const server = http.createServer((req, res) => {
    stats.requests++;
    const openedAt = performance.now();
    let sent = 0;
    open.set(res, openedAt);
    res.once('close', () => {
      open.delete(res);
      stats.heldMs.push(Math.round(performance.now() - openedAt));
      stats.bytesSent.push(sent);
    });
    req.resume();
    req.on('end', () => {
      if (kind === 'hang') return;
      res.writeHead(200, { 'content-type': 'text/plain' });
      const more = () => {
        while (!res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
      };
      more();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://localhost:${(server.address() as AddressInfo).port}/hook`,
    stats: () => ({ ...stats, openMs: [...open.values()].map((at) => Math.round(performance.now() - at)) }),
    stop: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
