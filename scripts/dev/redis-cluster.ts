/**
 * A throwaway local Redis Cluster for tests and benchmarks: `masters` redis-server processes in
 * cluster mode (no replicas, no persistence) on free ports, each with its own folder, the 16384
 * slots split evenly between them. Created with plain CLUSTER commands (SET-CONFIG-EPOCH,
 * ADDSLOTSRANGE, MEET) rather than `redis-cli --cluster create`, so only `redis-server` is needed.
 *
 * `url` is the `redis+cluster://…` form REDIS_URL accepts (infra/redis/client.ts). close() stops every
 * server, once; a failed start stops the ones already running.
 *
 * The chaos suite stops nodes and starts them again (stopNode/startNode): a restarted node keeps
 * its port and folder, so its nodes.conf (slots, epoch, peers) and, with `appendonly`, its data
 * bring it back into the same cluster without another MEET.
 */
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { Redis } from 'ioredis';
import { type RedisServerHandle, type StartRedisOptions, startRedisServer } from './redis-server.ts';

const SLOTS = 16384;
const READY_TIMEOUT_MS = 30_000;

export interface RedisClusterHandle {
  /** `redis+cluster://127.0.0.1:p1,127.0.0.1:p2,…` */
  url: string;
  nodes: Array<{ host: string; port: number }>;
  /**
   * Stops node `index`: 'graceful' shuts it down (the AOF flushed), a signal is the fault itself.
   * Without replicas its slots are unserved until it is back: after cluster-node-timeout every
   * node reports the cluster down (cluster-require-full-coverage, Redis' default).
   */
  stopNode(index: number, signal?: 'SIGKILL' | 'SIGTERM' | 'graceful'): Promise<void>;
  /**
   * Starts a stopped node again on its port and folder. Once every node is running again it
   * resolves only when all of them report `cluster_state:ok` (while others are still stopped, as
   * soon as this one answers: the cluster cannot be ok yet).
   */
  startNode(index: number): Promise<void>;
  /** Whether node `index` is running (not stopped by stopNode). */
  isRunning(index: number): boolean;
  /** The index (in `nodes`) of the master that owns `slot`, as CLUSTER SLOTS says on a running node. */
  nodeOfSlot(slot: number): Promise<number>;
  /** The index of the master that holds `key` (its slot from CLUSTER KEYSLOT). */
  nodeOfKey(key: string): Promise<number>;
  /** Stops every server and waits for them to exit. Safe to call twice. */
  close(): Promise<void>;
}

export interface StartRedisClusterOptions {
  binary: string;
  /** A folder of its own per node is made under it. */
  dir: string;
  /** Default 3. */
  masters?: number;
  host?: string;
  /** Persistence per node, as for a single server (redis-server.ts); off by default. */
  appendonly?: boolean;
  appendfsync?: 'always' | 'everysec' | 'no';
}

export async function startRedisCluster(options: StartRedisClusterOptions): Promise<RedisClusterHandle> {
  const host = options.host ?? '127.0.0.1';
  const count = options.masters ?? 3;
  const servers: Array<RedisServerHandle | undefined> = [];
  const settings: StartRedisOptions[] = [];
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= Promise.allSettled(servers.map((s) => s?.close())).then(() => undefined);
    return closing;
  };
  try {
    for (let i = 0; i < count; i++) {
      const dir = path.join(options.dir, `node-${i}`);
      await mkdir(dir, { recursive: true });
      const base: StartRedisOptions = {
        binary: options.binary,
        dir,
        host,
        appendonly: options.appendonly,
        appendfsync: options.appendfsync,
        extraArgs: clusterArgs(host),
      };
      const server = await startRedisServer(base);
      servers.push(server);
      // Restarts reuse the port the first start picked: the cluster knows the node by it.
      settings.push({ ...base, port: server.port });
    }
    const nodes = servers.map((s) => ({ host, port: (s as RedisServerHandle).port }));
    await formCluster(nodes);
    const withRunningNode = <T>(fn: (client: Redis) => Promise<T>): Promise<T> => {
      const running = nodes.find((_, i) => servers[i] !== undefined);
      if (!running) throw new Error('no node of the local cluster is running');
      return withClients([running], ([client]) => fn(client as Redis));
    };
    const at = (index: number): StartRedisOptions => {
      const s = settings[index];
      if (!s) throw new RangeError(`no node ${index} in a ${count}-node cluster`);
      return s;
    };
    return {
      url: `redis+cluster://${nodes.map((n) => `${n.host}:${n.port}`).join(',')}`,
      nodes,
      async stopNode(index, signal = 'graceful') {
        at(index);
        const server = servers[index];
        servers[index] = undefined;
        if (!server) return;
        if (signal !== 'graceful') process.kill(server.pid, signal);
        await server.close();
      },
      async startNode(index) {
        servers[index] ??= await startRedisServer(at(index));
        if (servers.every((server) => server !== undefined)) await waitUntilOk(nodes, nodes.length);
      },
      isRunning: (index) => servers[index] !== undefined,
      nodeOfSlot: (slot) => withRunningNode((client) => ownerOf(client, nodes, slot)),
      nodeOfKey: (key) => withRunningNode(async (client) => ownerOf(client, nodes, Number(await client.call('CLUSTER', 'KEYSLOT', key)))),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

function clusterArgs(host: string): string[] {
  // nodes.conf lands in the server's own --dir; a short node timeout keeps a test's failover
  // detection quick (none is expected: there are no replicas). The announced address: a node
  // that never met another (a 1-master cluster) otherwise reports an empty IP in CLUSTER SLOTS.
  return [
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    '--cluster-node-timeout',
    '5000',
    '--cluster-announce-ip',
    host,
  ];
}

/** Gives each node its slot range and a distinct epoch, introduces them, and waits for `cluster_state:ok` everywhere. */
async function formCluster(nodes: Array<{ host: string; port: number }>): Promise<void> {
  await withClients(nodes, async (clients) => {
    for (const [i, client] of clients.entries()) {
      const first = Math.floor((i * SLOTS) / clients.length);
      const last = Math.floor(((i + 1) * SLOTS) / clients.length) - 1;
      await client.call('CLUSTER', 'SET-CONFIG-EPOCH', String(i + 1));
      await client.call('CLUSTER', 'ADDSLOTSRANGE', String(first), String(last));
    }
    const [seed] = clients;
    for (const n of nodes.slice(1)) await seed?.call('CLUSTER', 'MEET', n.host, String(n.port));
  });
  await waitUntilOk(nodes, nodes.length);
}

async function withClients<T>(nodes: Array<{ host: string; port: number }>, fn: (clients: Redis[]) => Promise<T>): Promise<T> {
  const clients = nodes.map((n) => new Redis({ host: n.host, port: n.port, lazyConnect: true, maxRetriesPerRequest: 1 }));
  try {
    await Promise.all(clients.map((c) => c.connect()));
    return await fn(clients);
  } finally {
    for (const c of clients) c.disconnect();
  }
}

/** The index in `nodes` of the master whose slot ranges (CLUSTER SLOTS) include `slot`. */
async function ownerOf(client: Redis, nodes: Array<{ port: number }>, slot: number): Promise<number> {
  const ranges = (await client.call('CLUSTER', 'SLOTS')) as Array<[number, number, [string, number, ...unknown[]]]>;
  const owner = ranges.find(([first, last]) => slot >= first && slot <= last);
  const index = nodes.findIndex((n) => n.port === owner?.[2][1]);
  if (index < 0) throw new Error(`no node of the local cluster holds slot ${slot}`);
  return index;
}

/** Until every one of `nodes` reports `cluster_state:ok` and knows `expectedNodes` nodes. */
async function waitUntilOk(nodes: Array<{ host: string; port: number }>, expectedNodes: number): Promise<void> {
  await withClients(nodes, async (clients) => {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    for (;;) {
      const infos = await Promise.all(clients.map((c) => c.call('CLUSTER', 'INFO') as Promise<string>));
      const ok = infos.every((info) => info.includes('cluster_state:ok') && info.includes(`cluster_known_nodes:${expectedNodes}`));
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`the local Redis Cluster did not become ready:\n${infos.join('\n---\n')}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
}
