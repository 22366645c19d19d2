/**
 * The `warmpool` CLI as a user runs it: a real process, real Redis and S3. Bad arguments get a
 * message naming the problem and exit code 2; nothing is written.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { type CliIo, rollbackMain } from '../scripts/commands/deploy.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { testEnv } from './support/services.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const env = testEnv();
const config = loadConfig(env);
const redis = createRedis(config.redisUrl);
const store = createS3ObjectStore(config.s3);

function cli(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

beforeAll(async () => {
  await createModelRegistry({ store, prefix: config.s3.prefix }).publish({
    name: 'cli-model',
    version: '3',
    bytes: buildMlpModel({ features: 4, hidden: 4, layers: 1 }),
  });
});

afterAll(async () => {
  await closeRedis(redis);
  store.close();
});

it('deploy stores the deployment, defaulting to the latest version', async () => {
  const res = await cli('deploy', 'cli-model', '--min', '2', '--max', '4');
  expect(res.stderr).toBe('');
  expect(res.code).toBe(0);
  expect(res.stdout).toContain('deployed cli-model@3');
  expect(await createDeploymentStore(redis, config.queuePrefix).get('cli-model')).toMatchObject({
    version: '3',
    min: 2,
    max: 4,
    standby: 0,
  });
  const list = await cli('deployments');
  expect(list.stdout).toMatch(/cli-model\t3\tmin=2 max=4 standby=0/);
});

it('deploy splits traffic, changes only what it is told, and rollback restores the previous revision', async () => {
  await createModelRegistry({ store, prefix: config.s3.prefix }).publish({
    name: 'cli-model',
    version: '4',
    bytes: buildMlpModel({ features: 4, hidden: 4, layers: 1 }),
  });
  const res = await cli('deploy', 'cli-model', '--split', '3=90,4=10', '--backlog-max', '200');
  expect(res.stderr).toBe('');
  expect(res.code).toBe(0);
  expect(res.stdout).toContain('deployed cli-model@3 split 3=90%, 4=10% (revision 2; min 2, max 4, standby 0, backlog-max 200)');
  const deployments = createDeploymentStore(redis, config.queuePrefix);
  expect(await deployments.get('cli-model')).toMatchObject({
    versions: [
      { version: '3', weight: 90 },
      { version: '4', weight: 10 },
    ],
    min: 2, // kept from the first deploy
    backlogMax: 200,
    revision: 2,
  });
  expect((await cli('deployments')).stdout).toMatch(/cli-model\t3=90,4=10\tmin=2 max=4 standby=0 backlog-max=200\trevision 2\t/);

  const io = capture();
  expect(await rollbackMain(['cli-model'], config, io)).toBe(0);
  expect(io.stdout).toBe("rolled back cli-model to revision 1's config, now revision 3: cli-model@3 (min 2, max 4, standby 0)\n");
  expect(await deployments.get('cli-model')).toMatchObject({ versions: [{ version: '3', weight: 100 }], revision: 3, restoredFrom: 1 });
  expect(await deployments.get('cli-model')).not.toHaveProperty('backlogMax');
});

it.each([
  [['cli-model', 'extra'], /warmpool rollback: unexpected argument 'extra'\nsee 'warmpool rollback --help'/],
  [['never-deployed'], /model never-deployed is not deployed\n/],
  [['cli-modle'], /model cli-modle is not deployed; did you mean "cli-model"\?/],
])('rollback %j → exit 2 with a message naming the problem', async (args, message) => {
  const io = capture();
  expect(await rollbackMain(args, config, io)).toBe(2);
  expect(io.stderr).toMatch(message);
  expect(io.stdout).toBe('');
});

function capture(): CliIo & { stdout: string; stderr: string } {
  const io = {
    stdout: '',
    stderr: '',
    out(text: string) {
      io.stdout += text;
    },
    err(text: string) {
      io.stderr += text;
    },
  };
  return io;
}

it.each([
  [['deploy', 'cli-model', '--split', '3=90,4=5'], /weights must sum to 100 \(got 95\)/],
  [['deploy', 'cli-model', '--split', '3'], /--split takes VERSION=PERCENT pairs/],
  [['deploy', 'cli-model', '--split', '3=90,9=10'], /model cli-model has no version 9/],
  [['deploy', 'cli-model', '--version', '3', '--split', '3=100'], /--version or --split, not both/],
  [['deploy', 'cli-model', '--backlog-max', '0'], /backlogMax must be an integer between 1/],
  [['deploy', 'cli-model', '--policy', '/nonexistent/policy.json'], /cannot read --policy/],
  [['deploy', 'cli-model', '--min=-1'], /--min must be a non-negative integer/],
  [['deploy', 'cli-model', '--min', '-1'], /warmpool deploy: option '--min' argument is ambiguous/],
  [['deploy', 'cli-model', '--standby', 'two'], /--standby must be a non-negative integer/],
  [['deploy', 'cli-model', '--min', '3', '--max', '2'], /max \(2\) is below min \(3\)/],
  [['deploy', 'no-such-model'], /no model named no-such-model in the registry\n/],
  [['deploy', 'cli-modle'], /no model named cli-modle in the registry; did you mean "cli-model"\?/],
  [['deploy', 'cli-model', '--stanby', '1'], /^warmpool deploy: unknown option '--stanby'; did you mean '--standby'\?\n/],
  [['deploy'], /name one model/],
  [['deploy', 'cli-model', '--bogus'], /^warmpool deploy: unknown option '--bogus'\nsee 'warmpool deploy --help'\n$/],
  [['worker'], /--model is required/],
  [['frobnicate'], /unknown command "frobnicate"/],
])('%j → exit 2 with a message naming the problem', async (args, message) => {
  const res = await cli(...args);
  expect(res.code).toBe(2);
  expect(res.stderr).toMatch(message);
});

it('a bad configuration value names the variable and stops before doing anything', async () => {
  const child = spawn(process.execPath, [BIN, 'deployments'], { env: { ...env, PORT: 'eighty' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise((resolve) => child.once('exit', resolve));
  expect(code).toBe(2);
  expect(stderr).toMatch(/configuration error: PORT/);
});
