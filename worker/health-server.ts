/**
 * The worker's health endpoint, for whatever runs it: Kubernetes probes and preStop hook
 * (deploy/k8s), the AWS host agent (deploy/aws/worker-host.sh), Docker's HEALTHCHECK. Plain
 * node:http on its own port, so it answers while the main loop is busy assembling batches.
 *
 *   GET /live   200 while the process can still serve or start to (503 once failed)
 *   GET /ready  200 once warm-up finished (standby or active), 503 before and while draining
 *   GET /drain  asks the worker to drain (the same as SIGTERM or the control channel's `drain`)
 *               and answers once it has stopped: a preStop hook that blocks until drained
 *
 * Ready means warmed, not active: a standby worker is ready (the scaler may activate it within a
 * second), and readiness is what a rolling update and the Kubernetes provider's deletion order
 * wait on. Every answer is JSON `{ state }`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WorkerState } from '../infra/contracts/worker-state.ts';

/** The slice of WarmpoolWorker (worker-process.ts) this server reads. */
export interface HealthSource {
  readonly currentState: WorkerState;
  on(event: 'worker:state', fn: (state: WorkerState, previous: WorkerState) => void): () => void;
}

export interface HealthServerOptions {
  source: HealthSource;
  /** 0 picks a free port. */
  port: number;
  /** Default 0.0.0.0: probes come from the kubelet, not from inside the pod. */
  host?: string;
  /** Starts the worker's drain (idempotent), e.g. the entry's own drain function. */
  drain?: () => void | Promise<void>;
}

export interface HealthServer {
  readonly url: string;
  /** Stops listening and cuts open requests (a /drain still waiting); idempotent. */
  close(): Promise<void>;
}

const READY: readonly WorkerState[] = ['standby', 'active'];
const DONE: readonly WorkerState[] = ['stopped', 'failed'];

export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const { source } = options;
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return reply(res, 405, source.currentState);
    if (path === '/live') return reply(res, source.currentState === 'failed' ? 503 : 200, source.currentState);
    if (path === '/ready') return reply(res, READY.includes(source.currentState) ? 200 : 503, source.currentState);
    if (path === '/drain' && options.drain) return void drainThenReply(res);
    reply(res, 404, source.currentState);
  });

  async function drainThenReply(res: http.ServerResponse): Promise<void> {
    const stopped = untilDone(source);
    try {
      await options.drain?.();
    } catch {
      // The drain's own failure ends in `failed` or `stopped` all the same; the state says which.
    }
    reply(res, 200, await stopped);
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

/** Resolves with the state once the worker is stopped or failed (now, if it already is). */
function untilDone(source: HealthSource): Promise<WorkerState> {
  if (DONE.includes(source.currentState)) return Promise.resolve(source.currentState);
  return new Promise((resolve) => {
    const off = source.on('worker:state', (state) => {
      if (!DONE.includes(state)) return;
      off();
      resolve(state);
    });
  });
}

function reply(res: http.ServerResponse, status: number, state: WorkerState): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify({ state }));
}
