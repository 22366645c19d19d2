/**
 * METRICS_PORT: `/metrics` on a listener of its own, without auth, for a Prometheus scraper on a
 * private network (a Kubernetes pod port no Service or Ingress exposes, a security group open to
 * the monitoring subnet only). It serves nothing else. The API's own port keeps `/metrics`
 * behind an admin key or METRICS_TOKEN (api/http/metrics-auth.ts), so the listener is a choice
 * about where, never a hole in the public port.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Log } from '../infra/kernel/log.ts';
import { PROMETHEUS_CONTENT_TYPE } from './app.ts';
import { answerParseErrorsAsJson, slowClientLimits } from './http/client-errors.ts';
import { errorHandler, notFoundHandler } from './http/errors.ts';

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

export interface MetricsServerOptions {
  host: string;
  port: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  render: () => Promise<string>;
  log?: Log;
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const app = new Hono();
  app.onError(errorHandler(options.log));
  app.notFound(notFoundHandler);
  app.get('/metrics', async (c) => c.body(await options.render(), 200, { 'Content-Type': PROMETHEUS_CONTENT_TYPE }));
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: options.host, port: options.port, serverOptions: slowClientLimits(options) }, () =>
      resolve(s),
    );
  });
  answerParseErrorsAsJson(server);
  const { port } = server.address() as AddressInfo;
  const host = options.host === '0.0.0.0' ? '127.0.0.1' : options.host;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        if ('closeAllConnections' in server) server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
