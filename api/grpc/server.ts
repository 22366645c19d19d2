/**
 * The OIP gRPC listener (GRPC_PORT): grpc-js serving service.ts from the published proto beside
 * this file, loaded with @grpc/proto-loader at start (messages.ts says how). api/main.ts imports
 * this module only when GRPC_PORT is set, so an API without gRPC never loads grpc-js; the Lambda
 * entry never serves it (API Gateway carries no gRPC).
 *
 * The proto is found beside this source file. That holds for `npm run build`'s dist/ too: the
 * build keeps `import.meta.url` meaning the source file's URL (scripts/build.mjs), and the image
 * carries api/ beside dist/ (Dockerfile).
 *
 * Transport bounds (docs/SECURITY.md, issue 33): connections in all and per source address, and a
 * deadline for the HTTP/2 preface, in connection-gate.ts, which owns the TCP listener and hands
 * sockets to grpc-js through its connection injector; streams per connection
 * (SETTINGS_MAX_CONCURRENT_STREAMS), the idle timeout and keepalive pings in grpc-js's options.
 *
 * Lifecycle: start() listens (resolves once listening, with the port: 0 picks a free one); close()
 * lets calls in flight finish for up to `drainMs`, then cuts the rest; idempotent.
 */
import { fileURLToPath } from 'node:url';
import { Server, ServerCredentials, type ServiceDefinition } from '@grpc/grpc-js';
import { load } from '@grpc/proto-loader';
import { type ConnectionLimits, openConnectionGate } from './connection-gate.ts';
import { PROTO_LOADER_OPTIONS } from './messages.ts';
import { createInferenceService, type GrpcServiceDeps } from './service.ts';

export const PROTO_FILE = fileURLToPath(new URL('./grpc_predict_v2.proto', import.meta.url));

/** How long close() waits for calls in flight (a ModelInfer may be waiting on its job) before cutting them. */
export const GRPC_DRAIN_MS = 5_000;

/** The listener's bounds (config.api.grpc, plus the preface deadline). */
export interface GrpcTransportLimits extends ConnectionLimits {
  /** A connection with no call in flight for this long is closed (GRPC_IDLE_TIMEOUT_MS). */
  idleTimeoutMs: number;
  /** Calls one connection may have in flight (GRPC_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
}

export interface GrpcServerOptions {
  host: string;
  /** 0 = any free port. */
  port: number;
  /** The largest request message (BODY_LIMIT_BYTES): grpc.max_receive_message_length. */
  maxMessageBytes: number;
  limits: GrpcTransportLimits;
  deps: GrpcServiceDeps;
  drainMs?: number;
}

export interface GrpcServer {
  /** `host:port`, the form gRPC clients take as a target (no scheme). */
  url: string;
  port: number;
  /** Connections held now, by source address. */
  connections(): ReadonlyMap<string, number>;
  close(): Promise<void>;
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServer> {
  const { limits } = options;
  const server = new Server({
    'grpc.max_receive_message_length': options.maxMessageBytes,
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
    'grpc.max_connection_idle_ms': limits.idleTimeoutMs,
    // A ping after as long with nothing received finds a peer that vanished without a FIN, even mid-call.
    'grpc.keepalive_time_ms': limits.idleTimeoutMs,
  });
  server.addService(await inferenceServiceDefinition(), createInferenceService(options.deps));
  // grpc-js serves sockets the gate hands it; it binds no port of its own.
  const injector = server.createConnectionInjector(ServerCredentials.createInsecure());
  const gate = await openConnectionGate(options.host, options.port, limits, (socket) => injector.injectConnection(socket));
  let closing: Promise<void> | undefined;
  return {
    url: `${clientHost(options.host)}:${gate.port}`,
    port: gate.port,
    connections: gate.connections,
    close() {
      closing ??= Promise.all([gate.close(), shutdown(server, options.drainMs ?? GRPC_DRAIN_MS)]).then(() => undefined);
      return closing;
    },
  };
}

/** The service from the proto, ModelInfer's message left as its bytes: service.ts decodes it once the caller has paid for it. */
async function inferenceServiceDefinition(): Promise<ServiceDefinition> {
  const definition = await load(PROTO_FILE, PROTO_LOADER_OPTIONS);
  const service = definition['inference.GRPCInferenceService'] as unknown as ServiceDefinition;
  const infer = service.ModelInfer;
  if (!infer) throw new Error(`${PROTO_FILE} defines no inference.GRPCInferenceService/ModelInfer`);
  return { ...service, ModelInfer: { ...infer, requestDeserialize: (bytes: Buffer) => bytes } };
}

function shutdown(server: Server, drainMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, drainMs);
    timer.unref();
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Where a client on this machine reaches a server bound to `host` (a wildcard means loopback). */
function clientHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
