/**
 * The gRPC listener's bounds (issue 33 rows 1 and 8) on a real API (GRPC_PORT), real Redis and
 * real HTTP/2 clients:
 *
 *  - ModelInfer is authenticated and charged before its message is decoded: 8 MiB messages with
 *    no key or a wrong key are UNAUTHENTICATED and the API's memory does not grow by a decoded
 *    message (one such message, 8 Mi shape dimensions, was ~800 MB of objects through
 *    proto-loader), while another tenant's HTTP request is answered; a tenant over its byte
 *    budget is RESOURCE_EXHAUSTED even for bytes that are not protobuf (never decoded), while
 *    within budget the same bytes are INVALID_ARGUMENT malformed_message.
 *  - Connections: past GRPC_MAX_CONNECTIONS_PER_ADDRESS the extra one is closed while the earlier
 *    ones keep working; an idle connection is closed after GRPC_IDLE_TIMEOUT_MS; a socket that
 *    sends no HTTP/2 preface is closed after the handshake deadline (HEADERS_TIMEOUT_MS), one that
 *    sends something else at once.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { Client, credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shapeSpam } from './support/grpc-messages.ts';
import { KEY_A, KEY_B, startStack, type TestStack } from './support/stack.ts';

const MiB = 1024 * 1024;
const PER_ADDRESS = 3;

/** A client with a connection of its own (no subchannel shared with the others). */
function client(target: string): Client {
  return new Client(target, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
}

/** A unary call with the message as bytes (no client-side codec): the error, or null. */
function call(c: Client, method: string, message: Buffer, key?: string): Promise<ServiceError | null> {
  return new Promise((resolve) => {
    const metadata = new Metadata();
    if (key !== undefined) metadata.set('authorization', `Bearer ${key}`);
    c.makeUnaryRequest(
      `/inference.GRPCInferenceService/${method}`,
      (b: Buffer) => b,
      (b: Buffer) => b,
      message,
      metadata,
      { deadline: Date.now() + 30_000 },
      (err) => resolve(err),
    );
  });
}

const live = (c: Client) => call(c, 'ServerLive', Buffer.alloc(0));

describe('gRPC bounds on a real API', () => {
  let stack: TestStack;
  let target: string;
  const clients: Client[] = [];
  const open = () => {
    const c = client(target);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    stack = await startStack({
      GRPC_PORT: '0',
      BODY_LIMIT_BYTES: String(9 * MiB),
      GRPC_MAX_CONNECTIONS_PER_ADDRESS: String(PER_ADDRESS),
      GRPC_IDLE_TIMEOUT_MS: '1000',
      HEADERS_TIMEOUT_MS: '1000',
      // tenant-a: one 9 MiB burst of message bytes, refilled at 1 KiB/s; tenant-b's bucket is its own.
      RATE_LIMIT_BYTES_PER_S: '1024',
      RATE_LIMIT_BYTES_BURST: String(9 * MiB),
    });
    target = stack.api.grpcUrl as string;
  });

  afterAll(async () => {
    for (const c of clients) c.close();
    await stack?.close();
  });

  it('8 MiB ModelInfer calls with no key or a wrong key are UNAUTHENTICATED, never decoded; other tenants are answered', async () => {
    const message = shapeSpam(8 * MiB);
    const c = open();
    expect((await call(c, 'ModelInfer', message))?.code).toBe(status.UNAUTHENTICATED); // warm: the first call loads what it needs
    const before = process.memoryUsage().rss;
    for (let round = 0; round < 3; round++) {
      const calls = Array.from({ length: 8 }, (_, i) => call(c, 'ModelInfer', message, i % 2 ? 'key-wrong-wrong-wrong' : undefined));
      const other = stack.call('/v1/jobs/job_nope', { key: KEY_B });
      const [answers, res] = await Promise.all([Promise.all(calls), other]);
      expect(answers.map((e) => e?.code)).toEqual(Array(8).fill(status.UNAUTHENTICATED));
      expect(res.status).toBe(404);
      await res.body?.cancel();
    }
    const grownMiB = (process.memoryUsage().rss - before) / MiB;
    // 24 messages of 8 MiB arrived; one decoded by proto-loader was ~800 MB of objects.
    expect(grownMiB).toBeLessThan(400);
  }, 120_000);

  it('over its byte budget a tenant is RESOURCE_EXHAUSTED before its message is decoded', async () => {
    const c = open();
    const garbage = Buffer.alloc(5 * MiB, 0xff); // not protobuf: decoding it would fail
    const first = await call(c, 'ModelInfer', garbage, KEY_A); // 5 of 9 MiB
    expect(first?.code).toBe(status.INVALID_ARGUMENT);
    expect(first?.metadata.get('warmpool-error-code')[0]).toBe('malformed_message');
    const second = await call(c, 'ModelInfer', garbage, KEY_A); // past the 9 MiB burst
    expect(second?.code).toBe(status.RESOURCE_EXHAUSTED);
    expect(second?.details).toMatch(
      /^too many requests: the limit is 1024 message bytes per second with bursts of 9437184; retry in \d+ s$/,
    );
    // Another tenant's budget is its own.
    expect((await call(c, 'ModelInfer', garbage, KEY_B))?.code).toBe(status.INVALID_ARGUMENT);
  }, 60_000);

  it(`past ${PER_ADDRESS} connections from one address the extra one is closed; the earlier ones keep working`, async () => {
    // Earlier tests' clients hold connections of their own: closed first.
    for (const c of clients.splice(0)) c.close();
    const held = Array.from({ length: PER_ADDRESS }, open);
    for (const c of held) expect(await live(c)).toBeNull();
    const extra = await live(open());
    expect(extra?.code).toBe(status.UNAVAILABLE);
    for (const c of held) expect(await live(c)).toBeNull();
  }, 60_000);

  it('an idle connection is closed (GOAWAY) after GRPC_IDLE_TIMEOUT_MS', async () => {
    for (const c of clients.splice(0)) c.close();
    // The closed clients' connections end asynchronously: until they have, the address is at its cap.
    let session: http2.ClientHttp2Session | undefined;
    while (!session) {
      const attempt = http2.connect(`http://${target}`);
      attempt.on('error', () => undefined);
      const served = await new Promise<boolean>((resolve) => {
        attempt.once('remoteSettings', () => resolve(true)); // the server's SETTINGS: grpc-js has it
        attempt.once('close', () => resolve(false));
      });
      if (served) session = attempt;
      else await new Promise((r) => setTimeout(r, 100));
    }
    const s = session;
    const goaway = new Promise<boolean>((resolve) => {
      s.once('goaway', () => resolve(true));
      s.once('close', () => resolve(false));
    });
    expect(await goaway).toBe(true);
    await new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));
    expect(s.destroyed).toBe(true);
  }, 30_000);

  it('a socket that sends no HTTP/2 preface is closed after the handshake deadline; one that sends something else at once', async () => {
    const [host, port] = [target.slice(0, target.lastIndexOf(':')), Number(target.slice(target.lastIndexOf(':') + 1))];
    const socketClosed = (opening?: string) =>
      new Promise<string>((resolve) => {
        const socket = net.connect({ host, port });
        let reply = '';
        socket.on('data', (d) => (reply += d.toString('latin1')));
        socket.on('error', () => undefined);
        if (opening) socket.write(opening);
        socket.once('close', () => resolve(reply));
      });
    // Neither gets an answer: they never reached HTTP/2.
    expect(await socketClosed()).toBe('');
    expect(await socketClosed('GET / HTTP/1.1\r\nHost: x\r\n\r\n')).toBe('');
  }, 30_000);
});
