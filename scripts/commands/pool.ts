/**
 * `warmpool pool set NAME --max N [--min M] [--standby K] [--memory-mb MB]`, `pool list`,
 * `pool show NAME` and `pool delete NAME`: shared pools (DESIGN §2, §8), whose workers are not
 * bound to a model; deployments join one with `warmpool deploy M --pool NAME`.
 *
 * `set` changes only what it is told; a new pool needs --max and gets min 1 (at most max),
 * standby 0 and 1024 MB. `delete` is refused, naming them, while deployments name the pool. The
 * rules are the API's own (api/use-cases/shared-pools.ts).
 */
import { deletePool, getPool, listPools, type PoolView, putPool } from '../../api/use-cases/shared-pools.ts';
import type { SharedPoolChange } from '../../infra/contracts/shared-pool.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { createSharedPoolStore } from '../../infra/deployments/pool-store.ts';
import type { Config } from '../../infra/kernel/config.ts';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { notFoundHint, withNearestName } from './cli-errors.ts';
import { POOL_DELETE, POOL_LIST, POOL_SET, POOL_SHOW } from './cli-options.ts';
import { type CommandSpec, parseCommand, UsageError, usageError } from './cli-spec.ts';
import { type CliIo, processIo } from './deploy.ts';

type Sub = 'set' | 'list' | 'show' | 'delete';
type Deps = Parameters<typeof listPools>[0];

const SPECS: Record<Sub, CommandSpec> = { set: POOL_SET, list: POOL_LIST, show: POOL_SHOW, delete: POOL_DELETE };

export async function poolMain(sub: Sub, args: string[], config: Config, io: CliIo = processIo): Promise<number> {
  const redis = createRedis(config.redisUrl, { maxRetriesPerRequest: 2 });
  const deps: Deps = {
    pools: createSharedPoolStore(redis, config.queuePrefix),
    deployments: createDeploymentStore(redis, config.queuePrefix),
  };
  try {
    return await run(sub, args, deps, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`${err.message}\n`);
      return 2;
    }
    if (err instanceof NotFoundError) {
      io.err(`warmpool pool ${sub}: ${err.message}\n`);
      for (const hint of notFoundHint(err.code)) io.err(`${hint}\n`);
      return 1;
    }
    if (err instanceof InvalidInputError) {
      io.err(`warmpool pool ${sub}: ${err.message}\n`);
      return 2;
    }
    throw err;
  } finally {
    await closeRedis(redis);
  }
}

async function run(sub: Sub, args: string[], deps: Deps, io: CliIo): Promise<number> {
  const spec = SPECS[sub];
  const { values, positionals } = parseCommand(spec, args);
  const json = 'json' in values && values.json === true;
  if (sub === 'list') {
    const pools = await listPools(deps);
    if (json) io.out(`${JSON.stringify({ pools }, null, 2)}\n`);
    else for (const p of pools) io.out(`${describe(p)}\n`);
    if (pools.length === 0 && !json) io.err('no shared pools yet: `warmpool pool set NAME --max N` creates one\n');
    return 0;
  }
  const name = positionals[0];
  if (!name) throw usageError(spec, `name one pool, e.g. warmpool pool ${sub} long-tail${sub === 'set' ? ' --max 3' : ''}`);
  if (sub === 'set') {
    const { pool, created } = await putPool(deps, { name, change: parseChange(values as Record<string, string | undefined>) });
    io.out(`${created ? 'created' : 'set'} pool ${pool.name} (revision ${pool.revision}; ${boundsText(pool)})\n`);
    if (created) io.err(`deployments join it with \`warmpool deploy M --pool ${pool.name}\`\n`);
    return 0;
  }
  const known = async () => (await deps.pools.list()).map((p) => p.name);
  if (sub === 'delete') {
    const gone = await deletePool(deps, name).catch(async (err: unknown) => {
      throw await withNearestName(err, name, known);
    });
    io.out(`deleted pool ${gone.name}\n`);
    return 0;
  }
  const pool = await getPool(deps, name).catch(async (err: unknown) => {
    throw await withNearestName(err, name, known);
  });
  io.out(json ? `${JSON.stringify(pool, null, 2)}\n` : showText(pool));
  return 0;
}

function parseChange(values: Record<string, string | undefined>): SharedPoolChange {
  const change: SharedPoolChange = {};
  for (const [flag, field] of [
    ['max', 'max'],
    ['min', 'min'],
    ['standby', 'standby'],
    ['memory-mb', 'memoryMb'],
  ] as const) {
    const raw = values[flag];
    if (raw !== undefined) change[field] = toInt(`--${flag}`, raw);
  }
  return change;
}

function toInt(flag: string, raw: string): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isInteger(n) || n < 0) {
    throw new InvalidInputError('invalid_argument', `${flag} must be a non-negative integer (got "${raw}")`);
  }
  return n;
}

function boundsText(p: PoolView): string {
  return `max ${p.max}, min ${p.min}, standby ${p.standby}, ${p.memoryMb} MB per worker`;
}

/** One line of `warmpool pool list`: name, bounds, memory, members, revision, time. */
function describe(p: PoolView): string {
  const members = p.deployments.length === 0 ? '-' : p.deployments.join(',');
  return `${p.name}\tmax=${p.max} min=${p.min} standby=${p.standby} memory-mb=${p.memoryMb}\tdeployments=${members}\trevision ${p.revision}\t${p.updatedAt}`;
}

function showText(p: PoolView): string {
  const members =
    p.deployments.length === 0 ? `none yet (warmpool deploy M --pool ${p.name})` : `${p.deployments.length}: ${p.deployments.join(', ')}`;
  return [
    `pool ${p.name}`,
    `  workers      max ${p.max}, min ${p.min}, standby ${p.standby}`,
    `  memory       ${p.memoryMb} MB per worker, for resident models`,
    `  deployments  ${members}`,
    `  revision     ${p.revision} (created ${p.createdAt}, updated ${p.updatedAt})`,
    '',
  ].join('\n');
}
