/**
 * `warmpool pool …` and `warmpool deploy --pool` as a user runs them: the real bin/warmpool.mjs,
 * real Redis and S3. A pool's life in order (set, join, list, show, refused delete, leave,
 * delete), then a table of mistakes that must each be a message naming the problem, no stack
 * trace, and nothing written.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { createSharedPoolStore } from '../infra/deployments/pool-store.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { runCli } from './support/cli-child.ts';
import { testEnv } from './support/services.ts';

const env = testEnv();
const config = loadConfig(env);
const redis = createRedis(config.redisUrl);
const pools = createSharedPoolStore(redis, config.queuePrefix);
const deployments = createDeploymentStore(redis, config.queuePrefix);
const cli = (...args: string[]) => runCli(args, { env, cwd: process.cwd(), timeoutMs: 60_000 });

beforeAll(async () => {
  const store = createS3ObjectStore(config.s3);
  try {
    const bytes = buildMlpModel({ features: 4, hidden: 4, layers: 1 });
    await createModelRegistry({ store, prefix: config.s3.prefix }).publish({ name: 'cli-model', version: '1', bytes });
  } finally {
    store.close();
  }
});

afterAll(async () => {
  for await (const keys of scanKeys(redis, `${config.queuePrefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

describe('a shared pool from the CLI', () => {
  // In order: one pool's life.
  it('pool set creates a pool, then changes only what it is told', async () => {
    const created = await cli('pool', 'set', 'long-tail', '--max', '3', '--standby', '1', '--memory-mb', '2048');
    expect(created).toMatchObject({
      code: 0,
      stdout: 'created pool long-tail (revision 1; max 3, min 1, standby 1, 2048 MB per worker)\n',
    });
    expect(created.stderr).toBe('deployments join it with `warmpool deploy M --pool long-tail`\n');
    const changed = await cli('pool', 'set', 'long-tail', '--standby', '0');
    expect(changed).toMatchObject({
      code: 0,
      stderr: '',
      stdout: 'set pool long-tail (revision 2; max 3, min 1, standby 0, 2048 MB per worker)\n',
    });
  });

  it('deploy --pool joins it; list and show name the member; delete is refused while it is one', async () => {
    const joined = await cli('deploy', 'cli-model', '--version', '1', '--pool', 'long-tail');
    expect(joined).toMatchObject({ code: 0, stdout: 'deployed cli-model@1 (revision 1; shared pool long-tail)\n' });
    expect((await cli('deployments')).stdout).toMatch(/^cli-model\t1\tmin=1 max=1 standby=0 pool=long-tail\trevision 1\t/);

    const list = await cli('pool', 'list');
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^long-tail\tmax=3 min=1 standby=0 memory-mb=2048\tdeployments=cli-model\trevision 2\t\S+\n$/);
    const json = JSON.parse((await cli('pool', 'list', '--json')).stdout) as { pools: unknown[] };
    expect(json.pools).toEqual([expect.objectContaining({ name: 'long-tail', deployments: ['cli-model'], memoryMb: 2048 })]);
    const show = await cli('pool', 'show', 'long-tail');
    expect(show.stdout).toContain('  workers      max 3, min 1, standby 0\n');
    expect(show.stdout).toContain('  deployments  1: cli-model\n');
    expect(JSON.parse((await cli('pool', 'show', 'long-tail', '--json')).stdout)).toMatchObject({ name: 'long-tail', revision: 2 });

    const refused = await cli('pool', 'delete', 'long-tail');
    expect(refused).toMatchObject({ code: 2, stdout: '' });
    expect(refused.stderr).toBe(
      'warmpool pool delete: pool long-tail still serves deployment cli-model: move it out first (warmpool deploy M --pool none, or another pool)\n',
    );
    expect(await pools.get('long-tail')).not.toBeNull();
  });

  it('deploy --pool none leaves it, and then it can be deleted', async () => {
    const left = await cli('deploy', 'cli-model', '--pool', 'none');
    expect(left).toMatchObject({ code: 0, stdout: 'deployed cli-model@1 (revision 2; min 1, max 1, standby 0)\n' });
    expect(await deployments.get('cli-model')).not.toHaveProperty('pool');
    expect(await cli('pool', 'delete', 'long-tail')).toMatchObject({ code: 0, stdout: 'deleted pool long-tail\n', stderr: '' });
    const empty = await cli('pool', 'list');
    expect(empty).toMatchObject({ code: 0, stdout: '', stderr: 'no shared pools yet: `warmpool pool set NAME --max N` creates one\n' });
  });

  it('pool list with its reader gone ends quietly', async () => {
    await pools.put({ name: 'quiet', max: 1, min: 0, standby: 0, memoryMb: 64 });
    const res = await runCli(['pool', 'list'], { env, cwd: process.cwd(), closeStdout: true, timeoutMs: 60_000 });
    expect(res).toMatchObject({ code: 0, stderr: '' });
  });
});

describe('mistakes', () => {
  beforeAll(async () => {
    await pools.put({ name: 'long-tail', max: 2, min: 1, standby: 0, memoryMb: 1024 });
  });

  it.each<[string[], number, RegExp]>([
    [
      ['pool', 'set'],
      2,
      /^warmpool pool set: name one pool, e\.g\. warmpool pool set long-tail --max 3\nsee 'warmpool pool set --help'\n$/,
    ],
    [['pool', 'set', 'fresh'], 2, /^warmpool pool set: pool fresh does not exist yet: a new pool needs max/],
    [['pool', 'set', 'long-tail', '--max', 'two'], 2, /--max must be a non-negative integer \(got "two"\)/],
    [['pool', 'set', 'long-tail', '--min', '5'], 2, /min \(5\) is above max \(2\)/],
    [['pool', 'set', 'long-tail', '--memory-mb', '8'], 2, /memoryMb must be an integer between 64 and 1048576 \(got 8\)/],
    [['pool', 'set', 'Long_Tail', '--max', '1'], 2, /invalid pool name "Long_Tail": a pool name is 1–32 lower-case letters/],
    [['pool', 'set', 'none', '--max', '1'], 2, /"none" is reserved/],
    [['pool', 'set', 'long-tail', '--stanby', '1'], 2, /unknown option '--stanby'; did you mean '--standby'\?/],
    [['pool', 'show', 'nope'], 1, /^warmpool pool show: pool nope does not exist\n`warmpool pool list` lists the shared pools/],
    [['pool', 'show', 'long-tial'], 1, /pool long-tial does not exist; did you mean "long-tail"\?/],
    [['pool', 'delete', 'nope'], 1, /^warmpool pool delete: pool nope does not exist\n/],
    [['pool', 'show', 'a', 'b'], 2, /unexpected argument 'b'/],
    [['pool', 'frob'], 2, /unknown pool subcommand "frob" \(set, list, show, delete\)/],
    [['deploy', 'cli-model', '--pool', 'nope'], 2, /deployment cli-model names pool nope, which does not exist: create it first/],
    [['deploy', 'cli-model', '--pool', 'long-tial'], 2, /pool long-tial, which does not exist.*; did you mean "long-tail"\?/],
    [['deploy', 'cli-model', '--pool', 'Bad Pool'], 2, /invalid pool name "Bad Pool"/],
  ])('%j → exit %i with a message naming the problem, nothing written', async (args, code, message) => {
    const before = JSON.stringify([await pools.list(), await deployments.list()]);
    const res = await cli(...args);
    expect(res.code).toBe(code);
    expect(res.stderr).toMatch(message);
    expect(res.stderr).not.toMatch(/\n\s+at /);
    expect(res.stdout).toBe('');
    expect(JSON.stringify([await pools.list(), await deployments.list()])).toBe(before);
  });
});
