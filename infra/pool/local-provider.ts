/**
 * The local PoolProvider (infra/contracts/pool.ts): worker processes forked on this machine,
 * `<command> --model M --version V [--standby]` for a deployment's pool and `<command> --pool NAME
 * [--memory-mb MB]` for a shared pool's (a pool worker boots to standby holding no model; the
 * pool controller tells it what to hold: infra/fleet/pool-holdings.ts), steered through the control channel
 * (infra/fleet/worker-control.ts). It starts, steers and drains what the controller says and decides
 * nothing itself: a crashed child simply disappears from `list`, and the controller launches a
 * replacement if it still wants one.
 *
 * Identity: a worker names itself (its heartbeat id) only once it runs. Until its first
 * heartbeat a child is listed as `launching` under a provisional id, `pending-<pid>`; once the
 * heartbeat appears (matched by pid) it is listed under the heartbeat id. Calls naming the
 * provisional id still work: `setState` is remembered and sent as soon as the real id is
 * known, `drain` sends SIGTERM (a worker drains on SIGTERM in any phase).
 *
 * Draining never kills: `drain` sends the `drain` command and, if the process still runs after
 * `drainGraceMs`, SIGTERM (same behaviour in the worker, for a worker that missed the command).
 * Only `close()` escalates, to SIGKILL after `drainTimeoutMs`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import {
  beatBelongsTo,
  isSharedPoolTarget,
  type PoolProvider,
  type PoolTarget,
  type PoolWorker,
  poolTargetKey,
} from '../contracts/pool.ts';
import type { WorkerState } from '../contracts/worker-state.ts';
import { poolWorkerEnv } from '../fleet/pool-worker-env.ts';
import { type ControlCommand, commandFor, sendControl } from '../fleet/worker-control.ts';
import { listHeartbeats } from '../fleet/worker-states.ts';
import type { Clock } from '../kernel/clock.ts';
import { API_SECRET_VARIABLES } from '../kernel/config.ts';
import { once } from '../kernel/lifecycle.ts';
import type { Log } from '../kernel/log.ts';
import type { RedisClient } from '../redis/client.ts';

export interface LocalProviderOptions {
  /** argv that starts a worker, e.g. [process.execPath, 'bin/warmpool.mjs', 'worker']. */
  command: string[];
  env: NodeJS.ProcessEnv;
  /** Reads heartbeats and sends control commands; owned by the caller. */
  redis: Pick<RedisClient, 'scan' | 'mget' | 'get' | 'set' | 'publish'>;
  /** QUEUE_PREFIX the workers use. */
  prefix: string;
  clock: Clock;
  log: Log;
  /** Where a worker's stdout/stderr go; default: inherited. */
  stdio?: 'inherit' | 'ignore';
  /** After a `drain` command, SIGTERM if the process still runs this long after; default 10 s. */
  drainGraceMs?: number;
  /** close(): SIGKILL a child that has not exited this long after SIGTERM; default 30 s. */
  drainTimeoutMs?: number;
  /** TTL of the desired-state key (three heartbeat TTLs); default infra/fleet/worker-control.ts's. */
  controlTtlMs?: number;
}

interface Child {
  target: PoolTarget;
  process: ChildProcess;
  pid: number;
  exited: Promise<void>;
  /** The heartbeat id, once seen. */
  workerId?: string;
  lastState?: WorkerState;
  /** A setState sent before the heartbeat id was known. */
  pending?: ControlCommand;
  draining: boolean;
  /** Aborts the drain grace timer when the child exits. */
  gone: AbortController;
}

const PROVISIONAL = 'pending-';

export function createLocalProvider(options: LocalProviderOptions): PoolProvider {
  const { redis, prefix, clock, log } = options;
  const drainGraceMs = options.drainGraceMs ?? 10_000;
  const drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
  const children = new Set<Child>();
  let closed = false;

  const send = (workerId: string, command: ControlCommand) =>
    sendControl(redis, prefix, workerId, command, options.controlTtlMs === undefined ? {} : { ttlMs: options.controlTtlMs });

  const spawnWorker = (target: PoolTarget, startAs: 'active' | 'standby'): void => {
    const [cmd, ...args] = options.command;
    const flags = workerFlags(target, startAs);
    const proc = spawn(cmd as string, [...args, ...flags], {
      // A pool worker loads and releases sessions all its life: poolWorkerEnv keeps its RSS honest.
      env: isSharedPoolTarget(target) ? poolWorkerEnv(workerEnvironment(options.env)) : workerEnvironment(options.env),
      stdio: ['ignore', options.stdio ?? 'inherit', options.stdio ?? 'inherit'],
    });
    if (proc.pid === undefined) {
      // spawn failed (e.g. no such command); the 'error' event carries why.
      proc.once('error', (err) => log.error({ err, target: poolTargetKey(target) }, 'worker failed to spawn'));
      return;
    }
    const child: Child = {
      target,
      process: proc,
      pid: proc.pid,
      exited: new Promise((resolve) => proc.once('exit', () => resolve())),
      draining: false,
      gone: new AbortController(),
    };
    children.add(child);
    log.info({ target: poolTargetKey(target), pid: proc.pid, startAs }, 'worker launched');
    void child.exited.then(() => {
      children.delete(child);
      child.gone.abort();
      const { exitCode: code, signalCode: signal } = proc;
      if (!child.draining || code !== 0) log.info({ target: poolTargetKey(target), pid: child.pid, code, signal }, 'worker exited');
    });
  };

  /** Learns heartbeat ids and states, and forwards commands given before the id was known. */
  const refresh = async (target: PoolTarget): Promise<Child[]> => {
    const beats = await listHeartbeats(redis, prefix);
    const mine = [...children].filter((c) => sameTarget(c.target, target));
    for (const child of mine) {
      const beat = beats.find((b) => b.pid === child.pid && beatBelongsTo(b, target));
      if (!beat) continue;
      child.workerId = beat.id;
      child.lastState = beat.state;
      if (child.pending) {
        const command = child.pending;
        child.pending = undefined;
        await send(beat.id, command);
      }
    }
    return mine.filter((c) => c.process.exitCode === null && c.process.signalCode === null);
  };

  /** By heartbeat id, or by the provisional id it was listed under before. */
  const find = (target: PoolTarget, workerId: string): Child | undefined =>
    [...children].find((c) => sameTarget(c.target, target) && (idOf(c) === workerId || `${PROVISIONAL}${c.pid}` === workerId));

  const terminate = async (child: Child, killAfterMs: number): Promise<void> => {
    if (child.process.exitCode !== null || child.process.signalCode !== null) return;
    child.process.kill('SIGTERM');
    const timer = setTimeout(() => child.process.kill('SIGKILL'), killAfterMs);
    await child.exited;
    clearTimeout(timer);
  };

  /** SIGTERM after the grace period unless the child exits first. */
  const graceThenTerm = (child: Child): void => {
    clock.sleep(drainGraceMs, child.gone.signal).then(
      () => {
        log.warn({ pid: child.pid, id: idOf(child) }, 'worker still running after drain; sending SIGTERM');
        child.process.kill('SIGTERM');
      },
      () => {}, // exited first
    );
  };

  return {
    name: 'local',

    async list(target) {
      const live = await refresh(target);
      return live.map((c): PoolWorker => ({ id: idOf(c), state: c.lastState ?? 'launching', handle: String(c.pid) }));
    },

    async launch(target, count, { startAs }) {
      if (closed) throw new Error('local pool provider is closed');
      for (let i = 0; i < count; i++) spawnWorker(target, startAs);
    },

    async setState(target, workerId, state) {
      const child = find(target, workerId);
      if (child && !child.workerId) {
        child.pending = commandFor(state);
        return;
      }
      // Not one of ours (or already gone): the command is harmless, and steers a worker this
      // provider did not start but the controller sees.
      await send(child?.workerId ?? workerId, commandFor(state));
    },

    async drain(target, workerId) {
      const child = find(target, workerId);
      if (child?.draining) return;
      if (child) child.draining = true;
      if (child && !child.workerId) {
        child.process.kill('SIGTERM');
        return;
      }
      await send(child?.workerId ?? workerId, 'drain');
      if (child) graceThenTerm(child);
    },

    close: once(async () => {
      closed = true;
      await Promise.all([...children].map((c) => terminate(c, drainTimeoutMs)));
      children.clear();
    }),
  };
}

function idOf(child: Child): string {
  return child.workerId ?? `${PROVISIONAL}${child.pid}`;
}

function sameTarget(a: PoolTarget, b: PoolTarget): boolean {
  return poolTargetKey(a) === poolTargetKey(b);
}

/**
 * The worker's flags: a deployment's worker is told its model, version and how to start; a shared
 * pool's worker its pool (and memory budget) only: it boots to standby holding nothing, whatever
 * `startAs` says, and becomes active when told to hold a model.
 */
export function workerFlags(target: PoolTarget, startAs: 'active' | 'standby'): string[] {
  if (isSharedPoolTarget(target))
    return ['--pool', target.pool, ...(target.memoryMb !== undefined ? ['--memory-mb', String(target.memoryMb)] : [])];
  return ['--model', target.model, '--version', target.version, ...(startAs === 'standby' ? ['--standby'] : [])];
}

/** `env` without the API's secrets (API_SECRET_VARIABLES): a worker authenticates nobody. */
export function workerEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const copy = { ...env };
  for (const name of API_SECRET_VARIABLES) delete copy[name];
  return copy;
}
