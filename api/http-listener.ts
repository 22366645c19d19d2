/**
 * The API's HTTP listener, chosen by the runtime the process runs on: Bun's own server under
 * Bun (api/bun-listener.ts), @hono/node-server everywhere else. Both serve the same app; what
 * differs is what the server itself bounds before the app sees a request (see bun-listener.ts).
 * close() is idempotent and ends open event streams rather than waiting for their clients.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { bunRuntime, listenOnBun } from './bun-listener.ts';
import { answerParseErrorsAsJson, slowClientLimits } from './http/client-errors.ts';
import { capConnections, type HttpConnectionLimits } from './http/connection-cap.ts';

export interface ListenOptions {
  host: string;
  port: number;
  /** The app's fetch; its second argument becomes `c.env`. */
  fetch(request: Request, env: unknown): Response | Promise<Response>;
  limits: { headersTimeoutMs: number; requestTimeoutMs: number; http: HttpConnectionLimits };
}

export interface HttpListener {
  port: number;
  runtime: 'node' | 'bun';
  close(): Promise<void>;
}

export async function listen(options: ListenOptions): Promise<HttpListener> {
  const bun = bunRuntime();
  if (!bun) return listenOnNode(options);
  const { host, port, fetch, limits } = options;
  return { ...listenOnBun(bun, { host, port, fetch, headersTimeoutMs: limits.headersTimeoutMs }), runtime: 'bun' };
}

async function listenOnNode(options: ListenOptions): Promise<HttpListener> {
  const { host, port, fetch, limits } = options;
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch, hostname: host, port, serverOptions: slowClientLimits(limits) }, () => resolve(s));
    // Before the first connection can arrive: every socket is counted from its acceptance.
    capConnections(s as Server, limits.http);
  });
  answerParseErrorsAsJson(server);
  let closing: Promise<void> | undefined;
  return {
    port: (server.address() as AddressInfo).port,
    runtime: 'node',
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        // Open event streams (SSE) would keep close() waiting for their clients: end them.
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      });
      return closing;
    },
  };
}
