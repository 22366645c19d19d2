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
 * Lifecycle: start() binds (resolves once listening, with the port: 0 picks a free one); close()
 * lets calls in flight finish for up to `drainMs`, then cuts the rest; idempotent.
 */
import { fileURLToPath } from 'node:url';
import { Server, ServerCredentials, type ServiceDefinition } from '@grpc/grpc-js';
import { load } from '@grpc/proto-loader';
import { PROTO_LOADER_OPTIONS } from './messages.ts';
import { createInferenceService, type GrpcServiceDeps, MESSAGE_BYTES } from './service.ts';

export const PROTO_FILE = fileURLToPath(new URL('./grpc_predict_v2.proto', import.meta.url));

/** How long close() waits for calls in flight (a ModelInfer may be waiting on its job) before cutting them. */
export const GRPC_DRAIN_MS = 5_000;

export interface GrpcServerOptions {
  host: string;
  /** 0 = any free port. */
  port: number;
  /** The largest request message (BODY_LIMIT_BYTES): grpc.max_receive_message_length. */
  maxMessageBytes: number;
  deps: GrpcServiceDeps;
  drainMs?: number;
}

export interface GrpcServer {
  /** `host:port`, the form gRPC clients take as a target (no scheme). */
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startGrpcServer(options: GrpcServerOptions): Promise<GrpcServer> {
  const server = new Server({ 'grpc.max_receive_message_length': options.maxMessageBytes });
  server.addService(await inferenceServiceDefinition(), createInferenceService(options.deps));
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(bindAddress(options.host, options.port), ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    );
  });
  let closing: Promise<void> | undefined;
  return {
    url: `${clientHost(options.host)}:${port}`,
    port,
    close() {
      closing ??= shutdown(server, options.drainMs ?? GRPC_DRAIN_MS);
      return closing;
    },
  };
}

/** The service from the proto, with ModelInfer's deserializer noting each message's size (the byte bucket's cost). */
async function inferenceServiceDefinition(): Promise<ServiceDefinition> {
  const definition = await load(PROTO_FILE, PROTO_LOADER_OPTIONS);
  const service = definition['inference.GRPCInferenceService'] as unknown as ServiceDefinition;
  const infer = service.ModelInfer;
  if (!infer) throw new Error(`${PROTO_FILE} defines no inference.GRPCInferenceService/ModelInfer`);
  const requestDeserialize = (bytes: Buffer) => {
    const message = infer.requestDeserialize(bytes) as object;
    Object.defineProperty(message, MESSAGE_BYTES, { value: bytes.byteLength, enumerable: false });
    return message;
  };
  return { ...service, ModelInfer: { ...infer, requestDeserialize } };
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

/** grpc-js's bind target: an IPv6 host in brackets. */
function bindAddress(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/** Where a client on this machine reaches a server bound to `host` (a wildcard means loopback). */
function clientHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
