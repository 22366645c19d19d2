/**
 * The scaler's Lambda entry (infra/scaler/lambda.ts), as serverless.yml runs it: one controller
 * tick per invocation with POOL_PROVIDER=aws, against a real Redis and the recorded-contract fake
 * of the Auto Scaling API (test/fakes/aws-autoscaling-api.ts) reached the way the SDK in a Lambda
 * would be pointed elsewhere, `AWS_ENDPOINT_URL_AUTO_SCALING`. Shown: a tick launches what a
 * deployment's minimum asks for; a fresh execution environment of the same function carries on
 * as leader at once (the lock is the function's, not the host's); another function does not act
 * beside it; the scaler's metrics reach Redis for the API's /metrics; a bad variable fails the
 * invocation by name, and the next invocation reads the config again.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { defaultGroupName } from '../infra/pool/asg-provider.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { metricsKey } from '../infra/redis/keys.ts';
import { createScalerLambda, type ScalerLambda } from '../infra/scaler/lambda.ts';
import { FakeAutoScaling } from './fakes/aws-autoscaling-api.ts';
import { testEnv, uniqueId } from './support/services.ts';

const SDK_ENV = ['AWS_ENDPOINT_URL_AUTO_SCALING', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY'] as const;
const saved = Object.fromEntries(SDK_ENV.map((k) => [k, process.env[k]]));
const target = { model: uniqueId('lam'), version: '1' };
const group = defaultGroupName(target);
const env = testEnv({ POOL_PROVIDER: 'aws', SCALER_TICK_MS: '60000', AWS_LAMBDA_FUNCTION_NAME: 'warmpool-test-scaler' });
const lambdas: ScalerLambda[] = [];
let fake: FakeAutoScaling;
let redis: RedisClient;

beforeAll(async () => {
  fake = await FakeAutoScaling.start();
  fake.addGroup({ name: group, max: 3 });
  // The AutoScalingClient takes its endpoint and credentials from the process, as on Lambda.
  process.env.AWS_ENDPOINT_URL_AUTO_SCALING = fake.url;
  process.env.AWS_ACCESS_KEY_ID = fake.credentials.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = fake.credentials.secretAccessKey;
  redis = createRedis(env.REDIS_URL as string);
  await createDeploymentStore(redis, env.QUEUE_PREFIX as string).put({ ...target, min: 1, max: 3, standby: 0 });
});

afterAll(async () => {
  for (const l of lambdas) await l.close();
  await fake?.close();
  if (redis) await closeRedis(redis);
  for (const k of SDK_ENV) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

function lambda(overrides: Record<string, string> = {}): ScalerLambda {
  const l = createScalerLambda({ ...env, ...overrides });
  lambdas.push(l);
  return l;
}

const desiredCapacityCalls = () => fake.calls.filter((c) => c.action === 'SetDesiredCapacity' && c.params.AutoScalingGroupName === group);

it('one invocation is one tick: it launches what the deployment’s minimum asks for', async () => {
  const first = lambda();
  expect((await first.handle()).leader).toBe(true);
  expect(desiredCapacityCalls().map((c) => c.params.DesiredCapacity)).toEqual(['1']);
  expect(fake.group(group).desired).toBe(1);
  expect(await redis.exists(metricsKey(env.QUEUE_PREFIX as string, 'scaler'))).toBe(1);

  // A second tick sees the instance launching and asks for nothing more.
  fake.tick();
  expect((await first.handle()).leader).toBe(true);
  expect(desiredCapacityCalls()).toHaveLength(1);
});

it('a new execution environment of the same function leads at once; another function does not act', async () => {
  const other = lambda({ AWS_LAMBDA_FUNCTION_NAME: 'someone-else' });
  expect((await other.handle()).leader).toBe(false);
  const fresh = lambda();
  expect((await fresh.handle()).leader).toBe(true);
  expect(desiredCapacityCalls()).toHaveLength(1);
});

it('a bad variable fails the invocation naming it, and the next invocation reads the config again', async () => {
  const badEnv: NodeJS.ProcessEnv = { ...env, SCALER_TICK_MS: 'soon' };
  const l = createScalerLambda(badEnv);
  lambdas.push(l);
  await expect(l.handle()).rejects.toThrow(/SCALER_TICK_MS/);
  badEnv.SCALER_TICK_MS = '60000'; // fixed between two invocations of the same environment
  expect((await l.handle()).leader).toBe(true);
});
