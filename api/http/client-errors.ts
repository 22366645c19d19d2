/**
 * Requests Node's HTTP parser refuses before the app ever sees them — headers over its 16 KiB
 * limit, a broken request line, a bad Content-Length or chunk — are answered like every other
 * error, `{ error: { code, message } }` (DESIGN §5), instead of Node's bare status line with no
 * body. The connection is closed after: its remaining bytes cannot be trusted to frame a request.
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { errorBody } from './errors.ts';

/** The part of Node's private per-socket state the default handler also looks at. */
interface ServerSocket extends Duplex {
  _httpMessage?: { headersSent?: boolean } | null;
}

/** Any server with Node's `clientError` event (http.Server, and what @hono/node-server's serve returns). */
interface ClientErrorSource {
  on(event: 'clientError', listener: (err: NodeJS.ErrnoException, socket: ServerSocket) => void): unknown;
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
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });
}

function describe(err: NodeJS.ErrnoException): [number, string, string] {
  if (err.code === 'HPE_HEADER_OVERFLOW') return [431, 'headers_too_large', 'request headers are larger than the server accepts (16 KiB)'];
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'request_timeout', 'the request was not received in time'];
  return [400, 'malformed_request', `the request is not valid HTTP/1.1 (${err.code ?? 'parse error'})`];
}
