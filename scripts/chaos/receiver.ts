/**
 * A webhook receiver for the scenarios: records the job id of every delivery it answers 2xx
 * (taken from the Standard Webhooks `webhook-id`, `msg_<jobId>_<event>`), optionally answering
 * only after a delay (a slow receiver), and can be stopped and started again on the same port
 * (while stopped, deliveries get "connection refused").
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Receiver {
  /** `http://localhost:<port>/hook` (localhost: WEBHOOK_ALLOWED_PRIVATE_HOSTS names it). */
  url: string;
  /** Job ids delivered (each once, however often it was delivered). */
  readonly delivered: Set<string>;
  /** Deliveries answered, repeats included. */
  readonly answered: number;
  /** Milliseconds to wait before answering; 0 = at once. */
  delayMs: number;
  stop(): Promise<void>;
  start(): Promise<void>;
}

export async function startReceiver(options: { delayMs?: number; listening?: boolean } = {}): Promise<Receiver> {
  const delivered = new Set<string>();
  let answered = 0;
  let server: http.Server | undefined;
  let port = 0;
  const receiver: Receiver = {
    url: '',
    delivered,
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
