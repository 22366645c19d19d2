/**
 * Idle HTTP connections with no key from one address (issue 33): more than
 * HTTP_MAX_CONNECTIONS_PER_ADDRESS opened at once and each reopened when it closes. The API must
 * answer those past the cap `429 too_many_connections` at once and close the rest when their
 * headers deadline passes, so the descriptors one address holds stay at its cap. A refused
 * socket waits its Retry-After (1 s) before it tries again, as a client that reads its answers.
 */
import net from 'node:net';
import { sleep } from './sleep.ts';

export interface IdleHttpTally {
  /** How each socket ended: `429 too_many_connections`, `408 request_timeout`, `closed with no answer`. */
  answers: Record<string, number>;
  /** How long each socket not refused was held until the server closed it, ms. */
  servedHeldMs: number[];
  /** Sockets still open when the attack stopped. */
  openAtStop: number;
  /**
   * The most sockets connected at once (handshake done, not yet closed), as the attacker sees
   * them: the kernel completes a handshake before the server accepts, so under an event-loop lag
   * of seconds the server may hold fewer at once (its first ones closed by the headers deadline
   * before it accepts the last).
   */
  mostConnected: number;
}

export function newIdleHttpTally(): IdleHttpTally {
  return { answers: {}, servedHeldMs: [], openAtStop: 0, mostConnected: 0 };
}

const RETRY_AFTER_MS = 1_000;

export async function idleHttp(
  target: { api: string; fromAddress: string; sockets: number },
  tally: IdleHttpTally,
  stop: AbortSignal,
): Promise<void> {
  const { hostname, port } = new URL(target.api);
  let open = 0;
  let connected = 0;
  const onConnected = (delta: 1 | -1) => {
    connected += delta;
    tally.mostConnected = Math.max(tally.mostConnected, connected);
  };
  const slot = async () => {
    while (!stop.aborted) {
      open++;
      const { how, heldMs } = await idleSocket(hostname, Number(port), target.fromAddress, stop, onConnected);
      open--;
      if (how === 'stop') continue;
      tally.answers[how] = (tally.answers[how] ?? 0) + 1;
      if (how.startsWith('429') || how.startsWith('503')) await sleep(RETRY_AFTER_MS, stop);
      else tally.servedHeldMs.push(heldMs);
    }
  };
  const slots = Promise.all(Array.from({ length: target.sockets }, slot));
  await new Promise<void>((resolve) => (stop.aborted ? resolve() : stop.addEventListener('abort', () => resolve(), { once: true })));
  tally.openAtStop = open;
  await slots;
}

/** One socket that connects and sends nothing: how it ended (`<status> <code>` of its answer), and after how long. */
function idleSocket(
  host: string,
  port: number,
  localAddress: string,
  stop: AbortSignal,
  onConnected: (delta: 1 | -1) => void,
): Promise<{ how: string; heldMs: number }> {
  return new Promise((resolve) => {
    const openedAt = performance.now();
    const socket = net.connect({ host, port, localAddress });
    let text = '';
    let isConnected = false;
    socket.once('connect', () => {
      isConnected = true;
      onConnected(1);
    });
    const end = (how: string) => {
      if (isConnected) onConnected(-1);
      isConnected = false;
      stop.removeEventListener('abort', onStop);
      socket.destroy();
      resolve({ how, heldMs: Math.round(performance.now() - openedAt) });
    };
    const onStop = () => end('stop');
    stop.addEventListener('abort', onStop, { once: true });
    socket.on('data', (chunk: Buffer) => {
      text = (text + chunk.toString('latin1')).slice(0, 4_096);
    });
    socket.once('error', () => undefined);
    socket.once('close', () => {
      if (stop.aborted) return end('stop');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
      const code = /"code":"([a-z_]+)"/.exec(text)?.[1];
      end(status === undefined ? 'closed with no answer' : `${status} ${code ?? ''}`.trim());
    });
  });
}
