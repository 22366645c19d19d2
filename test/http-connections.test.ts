/**
 * The HTTP listener's connection caps (issue 33; api/http/connection-cap.ts) on a real API, real
 * Redis and raw TCP clients from several loopback addresses (127.0.0.x, each a client of its own):
 *
 *  - Past HTTP_MAX_CONNECTIONS_PER_ADDRESS an address's new connection is answered 429
 *    `too_many_connections` as JSON and closed, while the connections it holds and every other
 *    address are served.
 *  - An address at its cap whose connections sit idle between requests is not refused: its
 *    oldest idle connection is closed to make room, and the new one is served.
 *  - Past HTTP_MAX_CONNECTIONS, with nothing idle, a new connection from any address is answered
 *    503 `server_busy`; once a connection closes, the next one is served.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack, type TestStack } from './support/stack.ts';

interface Answer {
  status: number;
  body: string;
  /** The server closed the connection after this answer. */
  closed: boolean;
}

/** A TCP connection to the API from `from`, connected. */
async function connect(url: string, from: string, opened: net.Socket[]): Promise<net.Socket> {
  const { hostname, port } = new URL(url);
  const socket = net.connect({ host: hostname, port: Number(port), localAddress: from });
  opened.push(socket);
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  return socket;
}

/** Reads one answer (status line, headers, Content-Length body) from the socket; `closed` if it ended after. */
function readAnswer(socket: net.Socket): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let text = '';
    let answer: Answer | undefined;
    const timer = setTimeout(() => finish(new Error(`no answer in 10 s (read: ${JSON.stringify(text)})`)), 10_000);
    const finish = (err?: Error) => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('close', onClose);
      if (err) reject(err);
      else resolve(answer as Answer);
    };
    const parse = () => {
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const length = Number(/content-length: (\d+)/i.exec(text.slice(0, end))?.[1] ?? 0);
      if (text.length < end + 4 + length) return;
      answer = { status: Number(text.slice(9, 12)), body: text.slice(end + 4, end + 4 + length), closed: false };
    };
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1');
      parse();
      // A kept-alive answer is complete at its body; a refusal is complete when the socket closes.
      if (answer && !/connection: close/i.test(text)) finish();
    };
    const onClose = () => {
      parse();
      if (answer) answer.closed = true;
      finish(answer ? undefined : new Error(`closed with no answer (read: ${JSON.stringify(text)})`));
    };
    socket.on('data', onData);
    socket.once('close', onClose);
  });
}

function get(socket: net.Socket): Promise<Answer> {
  const answer = readAnswer(socket);
  socket.write('GET /v2/health/live HTTP/1.1\r\nHost: warmpool\r\n\r\n');
  return answer;
}

const closedBy = (socket: net.Socket) =>
  new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())));

describe('HTTP connections per address', () => {
  const PER_ADDRESS = 3;
  let stack: TestStack;
  const opened: net.Socket[] = [];

  beforeAll(async () => {
    stack = await startStack({ HTTP_MAX_CONNECTIONS: '64', HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(PER_ADDRESS) });
  });

  afterAll(async () => {
    for (const s of opened) s.destroy();
    await stack?.close();
  });

  it('refuses the connection past the cap with a JSON 429, and keeps serving the ones held and other addresses', async () => {
    const from = '127.0.0.2';
    const held = [];
    // Connected and not yet sending: busy in the cap's eyes (never given back before a first request).
    for (let i = 0; i < PER_ADDRESS; i++) held.push(await connect(stack.api.url, from, opened));
    const extra = await connect(stack.api.url, from, opened);
    const refused = await readAnswer(extra);
    expect(refused).toMatchObject({ status: 429, closed: true });
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'too_many_connections' } });

    for (const socket of held) expect(await get(socket)).toMatchObject({ status: 200, closed: false });
    const other = await connect(stack.api.url, '127.0.0.3', opened);
    expect(await get(other)).toMatchObject({ status: 200, closed: false });
    for (const s of [...held, other]) s.destroy();
  });

  it('gives back the oldest idle keep-alive connection of an address at its cap instead of refusing', async () => {
    const from = '127.0.0.4';
    const held = [];
    for (let i = 0; i < PER_ADDRESS; i++) {
      const socket = await connect(stack.api.url, from, opened);
      expect(await get(socket)).toMatchObject({ status: 200, closed: false });
      held.push(socket);
    }
    const oldest = held[0] as net.Socket;
    const gone = closedBy(oldest);
    const next = await connect(stack.api.url, from, opened);
    expect(await get(next)).toMatchObject({ status: 200, closed: false });
    await gone;
    // The others were left alone: still kept alive, still served.
    for (const socket of held.slice(1)) expect(await get(socket)).toMatchObject({ status: 200, closed: false });
    for (const s of [...held, next]) s.destroy();
  });
});

describe('HTTP connections in all', () => {
  const TOTAL = 4;
  let stack: TestStack;
  const opened: net.Socket[] = [];

  beforeAll(async () => {
    stack = await startStack({ HTTP_MAX_CONNECTIONS: String(TOTAL), HTTP_MAX_CONNECTIONS_PER_ADDRESS: '3' });
  });

  afterAll(async () => {
    for (const s of opened) s.destroy();
    await stack?.close();
  });

  it('answers 503 server_busy past the total with nothing idle, and serves again once a connection closes', async () => {
    const held = [
      await connect(stack.api.url, '127.0.0.5', opened),
      await connect(stack.api.url, '127.0.0.5', opened),
      await connect(stack.api.url, '127.0.0.6', opened),
      await connect(stack.api.url, '127.0.0.6', opened),
    ];
    const refused = await readAnswer(await connect(stack.api.url, '127.0.0.7', opened));
    expect(refused).toMatchObject({ status: 503, closed: true });
    expect(JSON.parse(refused.body)).toMatchObject({ error: { code: 'server_busy' } });

    // A held connection that ends its request goes idle: the next newcomer takes its place.
    expect(await get(held[0] as net.Socket)).toMatchObject({ status: 200, closed: false });
    const gone = closedBy(held[0] as net.Socket);
    const next = await connect(stack.api.url, '127.0.0.7', opened);
    expect(await get(next)).toMatchObject({ status: 200, closed: false });
    await gone;
  });
});
