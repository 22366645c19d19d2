/**
 * The Kubernetes pool provider against the recorded-contract fake API server (test/fakes/k8s-api.ts):
 * the exact calls it makes (scale subresource merge patches with a resourceVersion precondition,
 * pods listed by the Deployment's selector, the drain mark and the deletion cost before the
 * scale-down), stepped tick by tick; then the shared PoolProvider behaviour suite.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { PoolProvider, PoolTarget, PoolWorker } from '../infra/contracts/pool.ts';
import {
  createKubernetesProvider,
  DRAIN_MARK,
  defaultDeploymentName,
  type KubernetesProviderOptions,
  POD_DELETION_COST,
  RETIRE_COST,
} from '../infra/pool/k8s-provider.ts';
import { FakeKubernetes, type RecordedRequest } from './fakes/k8s-api.ts';
import { poolProviderBehaviour } from './support/pool-provider-behaviour.ts';
import { uniqueId } from './support/services.ts';

const NS = 'warmpool';

interface Fixture {
  fake: FakeKubernetes;
  provider: PoolProvider;
  target: PoolTarget;
  name: string;
  errors: unknown[];
  cleanup(): Promise<void>;
}

async function fixture(overrides: Partial<KubernetesProviderOptions> = {}): Promise<Fixture> {
  const fake = await FakeKubernetes.start();
  const target = { model: uniqueId('m'), version: 'v1' };
  const name = defaultDeploymentName(target);
  const labels = { app: 'warmpool-worker', 'warmpool.dev/model': target.model, 'warmpool.dev/version': target.version };
  fake.addDeployment({ namespace: NS, name, labels });
  // A neighbour in the same namespace whose pods must never show up in this target's list.
  fake.addDeployment({ namespace: NS, name: `${name}-other`, labels: { ...labels, 'warmpool.dev/version': 'v2' }, replicas: 1 });
  const errors: unknown[] = [];
  const provider = createKubernetesProvider({
    kubeConfig: fake.kubeConfig(NS),
    namespace: NS,
    control: (id, command) => fake.control(id, command),
    heartbeats: async () => fake.heartbeats(),
    onError: (err) => errors.push(err),
    ...overrides,
  });
  return {
    fake,
    provider,
    target,
    name,
    errors,
    cleanup: async () => {
      await provider.close();
      await fake.close();
    },
  };
}

/** Ticks the cluster and lists until `check` holds (bounded by ticks, not time). */
async function tickUntil(f: Fixture, check: (ws: PoolWorker[]) => boolean, provider = f.provider): Promise<PoolWorker[]> {
  for (let i = 0; i < 30; i++) {
    const ws = await provider.list(f.target);
    if (check(ws)) return ws;
    f.fake.tick();
  }
  throw new Error(`not reached; last: ${JSON.stringify(await provider.list(f.target))}`);
}

const states = (ws: PoolWorker[]) => ws.map((w) => w.state).sort();
const scalePath = (name: string) => `/apis/apps/v1/namespaces/${NS}/deployments/${name}/scale`;
const writes = (f: Fixture) => f.fake.requests.filter((r) => r.method === 'PATCH');

describe('kubernetes provider', () => {
  let current: Fixture | undefined;
  const setup = async (overrides?: Partial<KubernetesProviderOptions>) => {
    current = await fixture(overrides);
    return current;
  };
  afterEach(async () => {
    await current?.cleanup();
    current = undefined;
  });

  it('launch reads the scale and merge-patches replicas up by n with its resourceVersion as a precondition', async () => {
    const f = await setup();
    await f.provider.launch(f.target, 2, { startAs: 'active' });
    await f.provider.launch(f.target, 1, { startAs: 'standby' });
    const scaleCalls = f.fake.requests.filter((r) => r.path === scalePath(f.name));
    expect(scaleCalls.map((r) => r.method)).toEqual(['GET', 'PATCH', 'GET', 'PATCH']);
    const [, first, , second] = scaleCalls as [RecordedRequest, RecordedRequest, RecordedRequest, RecordedRequest];
    expect(first.contentType).toBe('application/merge-patch+json');
    expect(first.body).toEqual({ metadata: { resourceVersion: expect.any(String) }, spec: { replicas: 2 } });
    expect(second.body).toEqual({ metadata: { resourceVersion: expect.any(String) }, spec: { replicas: 3 } });
    expect(f.fake.replicas(NS, f.name)).toBe(3);
    await f.provider.launch(f.target, 0, { startAs: 'active' });
    expect(f.fake.requests.filter((r) => r.path === scalePath(f.name))).toHaveLength(4);
  });

  it("lists pods by the Deployment's own selector and follows them from Pending to a warmed standby", async () => {
    const f = await setup();
    await f.provider.launch(f.target, 1, { startAs: 'standby' });
    const seen: string[] = [];
    const [worker] = await tickUntil(f, (ws) => {
      for (const w of ws) if (seen.at(-1) !== w.state) seen.push(w.state);
      return ws[0]?.state === 'standby';
    });
    expect(seen).toEqual(['launching', 'downloading', 'loading', 'warming', 'standby']);
    expect(worker?.handle).toBe(`${NS}/${worker?.id}`);
    const list = f.fake.requests.find((r) => r.path === `/api/v1/namespaces/${NS}/pods`);
    expect(list?.query.labelSelector).toBe(
      `app=warmpool-worker,warmpool.dev/model=${'model' in f.target ? f.target.model : ''},warmpool.dev/version=v1`,
    );
    // The neighbour's pod exists in the namespace but is not this target's.
    expect(f.fake.podList(NS)).toHaveLength(2);
  });

  it('hands each launch its startAs: the workers that warm up are told active or standby', async () => {
    const f = await setup();
    await f.provider.launch(f.target, 2, { startAs: 'active' });
    await f.provider.launch(f.target, 1, { startAs: 'standby' });
    const ws = await tickUntil(f, (w) => states(w).join() === 'active,active,standby');
    expect(f.fake.controls.map((c) => c.command).sort()).toEqual(['activate', 'activate']);
    expect(new Set(ws.map((w) => w.id)).size).toBe(3);
  });

  it('drain: marks the pod, sends the drain, and only once drained sets the deletion cost and then scales down', async () => {
    const f = await setup();
    await f.provider.launch(f.target, 2, { startAs: 'active' });
    const [victim, keeper] = (await tickUntil(f, (ws) => states(ws).join() === 'active,active')) as [PoolWorker, PoolWorker];
    const before = writes(f).length;

    await f.provider.drain(f.target, victim.id);
    const marking = writes(f).slice(before);
    expect(marking).toEqual([
      expect.objectContaining({
        path: `/api/v1/namespaces/${NS}/pods/${victim.id}`,
        body: { metadata: { annotations: { [DRAIN_MARK]: '0' } } },
      }),
    ]);
    expect(f.fake.controls.at(-1)).toMatchObject({ pod: victim.id, command: 'drain' });
    expect(f.fake.replicas(NS, f.name)).toBe(2); // still draining: nothing scaled yet

    f.fake.tick(); // the worker finishes what it holds and stops
    const drained = await f.provider.list(f.target);
    expect(drained.find((w) => w.id === victim.id)?.state).toBe('stopped');
    const retiring = writes(f).slice(before + 1);
    expect(retiring.map((r) => [r.path, r.body])).toEqual([
      [`/api/v1/namespaces/${NS}/pods/${victim.id}`, { metadata: { annotations: { [POD_DELETION_COST]: RETIRE_COST } } }],
      [scalePath(f.name), { metadata: { resourceVersion: expect.any(String) }, spec: { replicas: 1 } }],
    ]);

    // The ReplicaSet removes exactly the drained pod; repeated lists and drains change nothing more.
    const after = await tickUntil(f, (ws) => ws.length === 1);
    await f.provider.drain(f.target, victim.id);
    expect(after).toEqual([keeper]);
    expect(f.fake.replicas(NS, f.name)).toBe(1);
    expect(f.errors).toEqual([]);
  });

  it('waits while a Pending pod would be deleted before the drained one, then retires the drained one', async () => {
    const f = await setup();
    await f.provider.launch(f.target, 2, { startAs: 'active' });
    const [victim] = (await tickUntil(f, (ws) => states(ws).join() === 'active,active')) as [PoolWorker];
    await f.provider.drain(f.target, victim.id);
    await f.provider.launch(f.target, 1, { startAs: 'standby' });
    f.fake.tick(); // victim stops; the ReplicaSet creates the new pod, still unscheduled

    const pending = await f.provider.list(f.target);
    expect(states(pending)).toEqual(['active', 'launching', 'stopped']);
    expect(f.fake.replicas(NS, f.name)).toBe(3); // scaling down now would delete the Pending pod

    const ws = await tickUntil(f, (w) => w.length === 2 && !w.some((x) => x.id === victim.id));
    expect(ws.some((w) => w.id === pending.find((p) => p.state === 'launching')?.id)).toBe(true);
    expect(f.fake.replicas(NS, f.name)).toBe(2);
  });

  it('a restarted scaler finishes a drain from the mark in the cluster, even after the container restarted', async () => {
    const f = await setup();
    await f.provider.launch(f.target, 2, { startAs: 'active' });
    const [victim, keeper] = (await tickUntil(f, (ws) => states(ws).join() === 'active,active')) as [PoolWorker, PoolWorker];
    await f.provider.drain(f.target, victim.id);
    await f.provider.close();
    // Nobody lists while the worker stops and kubelet restarts the container.
    for (let i = 0; i < 6; i++) f.fake.tick();
    const restarted = f.fake.podList(NS).find((p) => (p.metadata as { name: string }).name === victim.id);
    expect(restarted).toMatchObject({ status: { containerStatuses: [{ restartCount: 1 }] } });

    const second = createKubernetesProvider({
      kubeConfig: f.fake.kubeConfig(NS),
      namespace: NS,
      control: (id, command) => f.fake.control(id, command),
      heartbeats: async () => f.fake.heartbeats(),
    });
    try {
      // The container restarted since the mark: its drained worker is gone, so the first list retires the pod.
      expect((await second.list(f.target)).find((w) => w.id === victim.id)?.state).toBe('draining');
      expect(f.fake.replicas(NS, f.name)).toBe(1);
      expect(await tickUntil(f, (ws) => ws.length === 1, second)).toEqual([keeper]);
    } finally {
      await second.close();
    }
  });

  it('without heartbeats, readiness stands in for the worker state', async () => {
    const f = await setup({ heartbeats: undefined });
    await f.provider.launch(f.target, 1, { startAs: 'standby' });
    expect(states(await f.provider.list(f.target))).toEqual([]);
    f.fake.tick();
    expect(states(await f.provider.list(f.target))).toEqual(['launching']);
    await tickUntil(f, (ws) => ws[0]?.state === 'active');
  });

  it('a shared pool: scales warmpool-pool-<name> and lists its pods by the heartbeats that name the pool', async () => {
    const f = await setup();
    const pool = { pool: 'tail', memoryMb: 512 };
    const name = defaultDeploymentName(pool);
    expect(name).toBe('warmpool-pool-tail');
    f.fake.addDeployment({ namespace: NS, name, labels: { app: 'warmpool-worker', 'warmpool.dev/pool': 'tail' } });
    await f.provider.launch(pool, 1, { startAs: 'standby' });
    expect(f.fake.replicas(NS, name)).toBe(1);
    let listed: PoolWorker[] = [];
    for (let i = 0; i < 30 && listed[0]?.state !== 'standby'; i++) {
      f.fake.tick();
      listed = await f.provider.list(pool);
    }
    expect(states(listed)).toEqual(['standby']);
    // The model's own target never lists the pool's pod, nor the pool a model's.
    await f.provider.launch(f.target, 1, { startAs: 'active' });
    await tickUntil(f, (ws) => states(ws).join() === 'active');
    expect((await f.provider.list(f.target)).map((w) => w.id)).not.toContain(listed[0]?.id);
    expect((await f.provider.list(pool)).map((w) => w.id)).toEqual([listed[0]?.id]);
  });

  it('names a missing Deployment and refuses calls after close', async () => {
    const f = await setup();
    const missing = { model: 'nope', version: 'v9' };
    await expect(f.provider.list(missing)).rejects.toThrow(
      `deployment ${NS}/warmpool-nope-v9: HTTP 404: deployments.apps "warmpool-nope-v9" not found`,
    );
    await expect(f.provider.launch(missing, 1, { startAs: 'active' })).rejects.toThrow(/not found/);
    await f.provider.close();
    await f.provider.close();
    await expect(f.provider.list(f.target)).rejects.toThrow(/closed/);
  });

  it('defaultDeploymentName makes a valid object name', () => {
    expect(defaultDeploymentName({ model: 'Demo_Scorer', version: '1.2.0' })).toBe('warmpool-demo-scorer-1-2-0');
    expect(defaultDeploymentName({ model: 'x'.repeat(80), version: 'v1' })).toHaveLength(63);
  });
});

poolProviderBehaviour(
  'kubernetes',
  async () => {
    const f = await fixture();
    f.fake.startTicking(20);
    return { provider: f.provider, target: f.target, cleanup: () => f.fake.close() };
  },
  { waitMs: 30_000, pollMs: 20 },
);
