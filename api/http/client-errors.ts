/**
 * Requests Node's HTTP parser refuses before the app ever sees them — headers over its 16 KiB
 * limit, a broken request line, a bad Content-Length or chunk — are answered like every other
 * error, `{ error: { code, message } }` (DESIGN §5), instead of Node's bare status line with no
 * body. The connection is closed after: its remaining bytes cannot be trusted to frame a request.
 *
 * Closed means destroyed (issue 20). Node's HTTP server keeps sockets half-open, so `end()`
 * alone only closes our side: a client that keeps sending holds the socket for as long as it
 * likes (a slowloris held them 400 s). A client too slow to send its headers or its request
 * in time (`slowClientLimits`) gets its 408, a malformed request its 400 or 431; either gets
 * CLIENT_ERROR_LINGER_MS to read it, then the socket goes whatever the client does. The 408 was
 * once written and the socket destroyed at once, as Node's own handler does; a socket destroyed
 * with request bytes unread is reset, and on a busy server the reset overtook the answer.
 */
import { type ServerOptions, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody } from './error-body.ts';

/** The part of Node's private per-socket state the default handler also looks at. */
interface ServerSocket extends Duplex {
  _httpMessage?: { headersSent?: boolean } | null;
}

/** Any server with Node's `clientError` event (http.Server, and what @hono/node-server's serve returns). */
interface ClientErrorSource {
  on(event: 'clientError', listener: (err: NodeJS.ErrnoException, socket: ServerSocket) => void): unknown;
}

/** How long a refused client may take to read its error answer before its socket is destroyed. */
export const CLIENT_ERROR_LINGER_MS = 1_000;

/**
 * The server options that bound how long a client may take to send a request: headers within
 * HEADERS_TIMEOUT_MS, the whole request within REQUEST_TIMEOUT_MS. Node checks these deadlines
 * every `connectionsCheckingInterval` (30 s by default, which would let a 10 s deadline run to
 * 40 s): here a quarter of the headers timeout, at most a second.
 */
export function slowClientLimits(limits: { headersTimeoutMs: number; requestTimeoutMs: number }): ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: Math.max(25, Math.min(1_000, Math.floor(limits.headersTimeoutMs / 4))),
  };
}

export function answerParseErrorsAsJson(server: ClientErrorSource): void {
  server.on('clientError', (err, socket) => {
    // A reset client or a response already under way: nothing sensible to write.
    if (err.code === 'ECONNRESET' || !socket.writable || socket._httpMessage?.headersSent) {
      socket.destroy();
      return;
    }
    const [status, code, message] = describe(err);
    const body = JSON.stringify(errorBody(code, message));
    const answer =
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`;
    // What the client still sends is read and dropped while it reads the answer: a socket closed
    // with bytes unread is reset, and the reset can reach the client before the answer does
    // (a 408 to a client whose body a busy server read too slowly came back as "fetch failed").
    socket.on('data', () => undefined);
    socket.resume();
    socket.end(answer);
    const linger = setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS);
    linger.unref();
    socket.once('close', () => clearTimeout(linger));
  });
}

function describe(err: NodeJS.ErrnoException): [number, string, string] {
  if (err.code === 'HPE_HEADER_OVERFLOW') return [431, 'headers_too_large', 'request headers are larger than the server accepts (16 KiB)'];
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'request_timeout', 'the request was not received in time'];
  return [400, 'malformed_request', `the request is not valid HTTP/1.1 (${err.code ?? 'parse error'})`];
}
