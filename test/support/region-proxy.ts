/**
 * A proxy in front of the regional API that counts what reaches it and can play the network's
 * failures: `down` resets every connection before a byte is read (the region unreachable), and
 * `lose-answer` lets the next request reach the region, waits for its whole answer, then resets
 * the client's connection (the answer lost on the way back). Each answer's status and
 * `Idempotent-Replayed` header are recorded, so a test can count the jobs the region made.
 */
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ProxyMode = 'pass' | 'down' | 'lose-answer';

export interface ProxiedRequest {
  method: string;
  path: string;
  /** The region's status; undefined when the proxy reset the connection first. */
  status?: number;
  replayed?: boolean;
  /** The region's answer reached the client. */
  delivered: boolean;
}

export interface RegionProxy {
  url: string;
  /** Where it forwards: the API it was started for, or another one set later. */
  target: string;
  mode: ProxyMode;
  requests: ProxiedRequest[];
  /** Requests that reached the region, the edge's own catalog reads left out. */
  reached(): ProxiedRequest[];
  close(): Promise<void>;
}

export async function startRegionProxy(target: string): Promise<RegionProxy> {
  const proxy: RegionProxy = {
    url: '',
    target,
    mode: 'pass',
    requests: [],
    reached: () => proxy.requests.filter((r) => r.status !== undefined && r.path !== '/v1/edge/catalog'),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const forward = (req: IncomingMessage, res: ServerResponse) => {
    const record: ProxiedRequest = { method: req.method ?? 'GET', path: req.url ?? '/', delivered: false };
    proxy.requests.push(record);
    if (proxy.mode === 'down') {
      req.socket.destroy();
      return;
    }
    const upstream = new URL(proxy.target);
    const lose = proxy.mode === 'lose-answer';
    if (lose) proxy.mode = 'pass';
    const out = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (answer) => {
        record.status = answer.statusCode;
        record.replayed = answer.headers['idempotent-replayed'] === 'true';
        if (lose) {
          answer.resume();
          answer.once('end', () => req.socket.destroy());
          return;
        }
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.once('end', () => {
          record.delivered = true;
        });
      },
    );
    out.once('error', () => req.socket.destroy());
    req.pipe(out);
  };
  const server = createServer(forward);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return proxy;
}
