/**
 * The API's HTTP listener under Bun: hono's Bun adapter, `Bun.serve({ fetch: app.fetch })`.
 * Bun also runs @hono/node-server (it implements node:http), but through a compatibility layer
 * that rebuilds a Node request around each of its own; its native server hands the app a
 * WHATWG Request directly, which is what hono is written for.
 *
 * The app's bindings (`c.env`) are the Bun server itself, as `app.fetch` receives it from
 * Bun.serve and as hono's own `getConnInfo` (hono/bun) reads it: the client's address is
 * `server.requestIP(request)` (api/http/client-address.ts).
 *
 * What the Node listener adds and this one does not (api/http-listener.ts): the connection caps
 * (HTTP_MAX_CONNECTIONS*, connection-cap.ts) and JSON answers to requests the parser refuses
 * (client-errors.ts) need Node's `connection` and `clientError` events, which Bun.serve has no
 * counterpart for; Bun's parser answers those with its own bare status. The slow-client bound
 * is Bun's idle timeout, HEADERS_TIMEOUT_MS rounded up to whole seconds (Bun allows 1–255).
 */
/** The part of Bun's server the listener and the app's bindings use. */
export interface BunServer {
  readonly port: number;
  requestIP(request: Request): { address: string; family: string; port: number } | null;
  /** Seconds a request's connection may stay idle; 0 = no limit. */
  timeout(request: Request, seconds: number): void;
  stop(closeActiveConnections?: boolean): Promise<void>;
}

interface BunServeOptions {
  hostname: string;
  port: number;
  idleTimeout: number;
  maxRequestBodySize: number;
  fetch(request: Request, server: BunServer): Response | Promise<Response>;
}

export interface BunListenOptions {
  host: string;
  port: number;
  headersTimeoutMs: number;
  /** The app's fetch; the Bun server is its second argument, hence `c.env`. */
  fetch(request: Request, server: BunServer): Response | Promise<Response>;
}

/** The one member of the `Bun` global this module calls. */
export interface BunRuntime {
  serve(options: BunServeOptions): BunServer;
}

/** The `Bun` global when running under Bun, else undefined. */
export function bunRuntime(): BunRuntime | undefined {
  return (globalThis as { Bun?: BunRuntime }).Bun;
}

/**
 * Larger than any BODY_LIMIT_BYTES, so a body over the limit is still the app's to answer with
 * its JSON 413 (body-limit.ts judges the header first, or counts a chunked body as it reads).
 * Bun reads request bodies on demand: nothing is buffered before the app decides.
 */
const NO_SERVER_BODY_LIMIT = Number.MAX_SAFE_INTEGER;

export function listenOnBun(bun: BunRuntime, options: BunListenOptions): { port: number; close(): Promise<void> } {
  const idleTimeout = Math.min(255, Math.max(1, Math.ceil(options.headersTimeoutMs / 1000)));
  const server = bun.serve({
    hostname: options.host,
    port: options.port,
    idleTimeout,
    maxRequestBodySize: NO_SERVER_BODY_LIMIT,
    async fetch(request, srv) {
      const response = await options.fetch(request, srv);
      // An event stream is quiet between heartbeats (15 s): the idle timeout is for requests.
      if (response.headers.get('content-type')?.startsWith('text/event-stream')) srv.timeout(request, 0);
      return response;
    },
  });
  let closing: Promise<void> | undefined;
  return {
    port: server.port,
    // Open event streams would keep a graceful stop waiting for their clients: end them.
    close: () => {
      closing ??= server.stop(true);
      return closing;
    },
  };
}
