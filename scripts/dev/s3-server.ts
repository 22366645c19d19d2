/**
 * An S3-protocol server on a local folder (the `s3rver` package), for `warmpool dev` and the
 * test suite, so the model registry and bulk runs speak real S3 without AWS.
 *
 * Clients must use path-style addressing and turn off the AWS SDK's default CRC checksums,
 * which s3rver does not understand:
 *   new S3Client({ endpoint, forcePathStyle: true,
 *     requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' })
 */
import type { Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';

/** s3rver's fixed credentials: any client must sign with these. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } as const;

export interface S3ServerOptions {
  /** Folder holding the buckets; created if missing. */
  directory: string;
  /** 0 or undefined: pick a free port. */
  port?: number;
  host?: string;
  /** Buckets created at start (existing ones are kept with their objects). */
  buckets: string[];
}

export interface S3ServerHandle {
  /** `http://host:port` */
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  /** Stops listening and drops open connections. Safe to call twice. */
  close(): Promise<void>;
}

/** The part of s3rver's (untyped, CommonJS) API we use. */
interface S3rverInstance {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
  httpServer?: Server;
}
type S3rverConstructor = new (options: {
  address: string;
  port: number;
  directory: string;
  silent: boolean;
  configureBuckets: { name: string }[];
}) => S3rverInstance;

const require = createRequire(import.meta.url);

export async function startS3Server(options: S3ServerOptions): Promise<S3ServerHandle> {
  const S3rver = require('s3rver') as S3rverConstructor;
  const host = options.host ?? '127.0.0.1';
  const server = new S3rver({
    address: host,
    port: options.port ?? 0,
    directory: options.directory,
    silent: true,
    configureBuckets: options.buckets.map((name) => ({ name })),
  });
  const address = await server.run();
  let closing: Promise<void> | undefined;
  return {
    endpoint: `http://${formatHost(host)}:${address.port}`,
    ...S3RVER_CREDENTIALS,
    close: () => {
      closing ??= stop(server);
      return closing;
    },
  };
}

async function stop(server: S3rverInstance): Promise<void> {
  const stopped = server.close();
  // server.close() waits for keep-alive sockets the SDK holds open; do not wait on clients.
  server.httpServer?.closeAllConnections();
  await stopped;
}

function formatHost(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}
