/**
 * The anonymous attacker's gRPC attacks (issue 33 rows 1 and 8), run by hostile-attacker.ts
 * against the API's gRPC listener (GRPC_PORT):
 * - ModelInfer messages of 8 MiB with no key, shaped to be the costliest decode per byte (one
 *   input whose shape is 8 Mi one-byte dimensions): each must be UNAUTHENTICATED, refused before
 *   it is decoded;
 * - rounds of many idle HTTP/2 connections from another address: no more than
 *   GRPC_MAX_CONNECTIONS_PER_ADDRESS are served (the server's SETTINGS arrive), the rest are closed
 *   at once, and each served one is closed after GRPC_IDLE_TIMEOUT_MS.
 */
import http2 from 'node:http2';
import net from 'node:net';
import { Client, credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { shapeSpam } from '../../test/support/grpc-messages.ts';
import { type AttackTally, count, type GrpcTally, problem } from './hostile-attacks.ts';
import { sleep } from './sleep.ts';

const MiB = 1024 * 1024;
export const GRPC_INFER_ATTACK = 'grpc: ModelInfer of 8 MiB, no key';
const INFER_EVERY_MS = 2_000;

/** Both attacks until `stop`; the connection rounds' figures go to `tally.grpc`. */
export async function grpcAttacks(target: GrpcTarget, tally: AttackTally, stop: AbortSignal): Promise<void> {
  await Promise.all([inferWithoutKey(target, tally, stop), idleConnections(target, tally, stop)]);
}

export interface GrpcTarget {
  target: string;
  fromAddress: string;
  /** Connections opened at once in a round. */
  idle: number;
}

async function inferWithoutKey(t: GrpcTarget, tally: AttackTally, stop: AbortSignal): Promise<void> {
  const message = shapeSpam(8 * MiB);
  const client = new Client(t.target, credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  try {
    while (!stop.aborted) {
      tally.sent++;
      const started = performance.now();
      const err = await unary(client, message, stop);
      if (stop.aborted) {
        count(tally, GRPC_INFER_ATTACK, 'in flight at the stop');
        break;
      }
      tally.slowestMs[GRPC_INFER_ATTACK] = Math.max(tally.slowestMs[GRPC_INFER_ATTACK] ?? 0, performance.now() - started);
      const key = err ? `grpc ${status[err.code] ?? err.code}` : 'grpc OK';
      count(tally, GRPC_INFER_ATTACK, key);
      if (err?.code !== status.UNAUTHENTICATED) problem(tally, `${GRPC_INFER_ATTACK}: ${key}`, `${key} ${err?.details ?? ''}`);
      await sleep(INFER_EVERY_MS, stop);
    }
  } finally {
    client.close();
  }
}

function unary(client: Client, message: Buffer, stop: AbortSignal): Promise<ServiceError | null> {
  return new Promise((resolve) => {
    const call = client.makeUnaryRequest(
      '/inference.GRPCInferenceService/ModelInfer',
      (b: Buffer) => b,
      (b: Buffer) => b,
      message,
      new Metadata(),
      { deadline: Date.now() + 30_000 },
      (err) => {
        stop.removeEventListener('abort', cancel);
        resolve(err);
      },
    );
    const cancel = () => call.cancel();
    stop.addEventListener('abort', cancel, { once: true });
  });
}

/** Rounds of `t.idle` connections at once, each held open doing nothing until the server closes it. */
async function idleConnections(t: GrpcTarget, tally: AttackTally, stop: AbortSignal): Promise<void> {
  const [host, port] = [t.target.slice(0, t.target.lastIndexOf(':')), Number(t.target.slice(t.target.lastIndexOf(':') + 1))];
  const g: GrpcTally = tally.grpc;
  // Served and not yet closed, now: what the per-address cap bounds (a round's earlier ones may
  // have been closed idle before its later ones were let in).
  let open = 0;
  const served = (delta: number) => {
    open += delta;
    g.mostServedInRound = Math.max(g.mostServedInRound, open);
  };
  while (!stop.aborted) {
    const round = await Promise.all(Array.from({ length: t.idle }, () => idle(host, port, t.fromAddress, stop, served, g.servedSpans)));
    g.rounds++;
    tally.sent += round.length;
    for (const c of round) {
      const key = c.served ? (c.end === 'stop' ? 'served, open at the stop' : `served, then ${c.end}`) : `closed at once (${c.end})`;
      count(tally, 'grpc: idle connections', key);
      if (c.served && c.end !== 'stop') g.servedHeldMs.push(c.heldMs);
      if (c.served && c.end === 'stop') g.openAtStopMs.push(c.heldMs);
    }
  }
}

interface IdleConnection {
  /** The server's SETTINGS arrived: it took the connection. */
  served: boolean;
  /** How it ended: `goaway` (the idle timeout), `closed` (no GOAWAY), `stop`. */
  end: string;
  heldMs: number;
}

function idle(
  host: string,
  port: number,
  localAddress: string,
  stop: AbortSignal,
  served: (delta: number) => void,
  spans: Array<[number, number]>,
): Promise<IdleConnection> {
  return new Promise((resolve) => {
    const openedAt = performance.now();
    let servedAt = 0;
    let wasServed = false;
    let end = 'closed';
    const session = http2.connect(`http://${host}:${port}`, { createConnection: () => net.connect({ host, port, localAddress }) });
    const onStop = () => {
      end = 'stop';
      session.destroy();
    };
    stop.addEventListener('abort', onStop, { once: true });
    session.on('error', () => undefined);
    session.once('remoteSettings', () => {
      wasServed = true;
      servedAt = performance.now();
      served(1);
    });
    session.once('goaway', () => (end = 'goaway'));
    session.once('close', () => {
      stop.removeEventListener('abort', onStop);
      if (wasServed) {
        served(-1);
        spans.push([servedAt, performance.now()]);
      }
      resolve({ served: wasServed, end, heldMs: Math.round(performance.now() - openedAt) });
    });
  });
}
