/**
 * `warmpool scaler` picks its provider from POOL_PROVIDER: the Kubernetes one is built from the
 * standard kubeconfig resolution (here KUBECONFIG pointing at the recorded-contract fake) and
 * talks to it; an unknown provider is refused at config validation, naming the variable.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { loadConfig } from '../infra/kernel/config.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { defaultDeploymentName } from '../infra/pool/k8s-provider.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { createPoolProvider } from '../infra/scaler/main.ts';
import { FakeKubernetes } from './fakes/k8s-api.ts';
import { testEnv, testServices } from './support/services.ts';

const previousKubeconfig = process.env.KUBECONFIG;
afterAll(() => {
  if (previousKubeconfig === undefined) delete process.env.KUBECONFIG;
  else process.env.KUBECONFIG = previousKubeconfig;
});

it('POOL_PROVIDER=kubernetes builds the Kubernetes provider from KUBECONFIG and scales the Deployment', async () => {
  const fake = await FakeKubernetes.start();
  const target = { model: 'factory', version: 'v1' };
  fake.addDeployment({
    namespace: 'serving',
    name: defaultDeploymentName(target),
    labels: { app: 'warmpool-worker', 'warmpool.dev/model': 'factory', 'warmpool.dev/version': 'v1' },
  });
  const file = path.join(mkdtempSync(path.join(testServices().tmpDir, 'kube-')), 'config');
  writeFileSync(file, fake.kubeConfig('serving').exportConfig());
  process.env.KUBECONFIG = file;

  const config = loadConfig(testEnv({ POOL_PROVIDER: 'kubernetes', K8S_NAMESPACE: 'serving' }));
  const redis = createRedis(config.redisUrl);
  const provider = await createPoolProvider(config, createLogger('silent'), config.scaler.provider, redis);
  try {
    expect(provider.name).toBe('kubernetes');
    await provider.launch(target, 2, { startAs: 'standby' });
    expect(fake.replicas('serving', defaultDeploymentName(target))).toBe(2);
  } finally {
    await provider.close();
    await closeRedis(redis);
    await fake.close();
  }
});

it('an unknown POOL_PROVIDER is refused naming the variable', () => {
  expect(() => loadConfig(testEnv({ POOL_PROVIDER: 'nomad' }))).toThrow(/POOL_PROVIDER/);
});
