/**
 * The AWS Auto Scaling group provider against the recorded-contract fake of the Auto Scaling
 * Query API (test/fakes/aws-autoscaling-api.ts), through the real @aws-sdk/client-auto-scaling
 * pointed at it with `endpoint`: the exact calls (SetDesiredCapacity, SetInstanceProtection
 * before TerminateInstanceInAutoScalingGroup with ShouldDecrementDesiredCapacity=true), warm
 * pool instances entering service, stepped tick by tick; then the shared behaviour suite.
 */
import { AutoScalingClient, SetDesiredCapacityCommand } from '@aws-sdk/client-auto-scaling';
import { afterEach, describe, expect, it } from 'vitest';
import type { PoolTarget, PoolWorker } from '../infra/contracts/pool.ts';
import { type AsgPoolProvider, createAsgProvider, defaultGroupName, instanceFromHost } from '../infra/pool/asg-provider.ts';
import { FakeAutoScaling, type GroupSpec } from './fakes/aws-autoscaling-api.ts';
import { poolProviderBehaviour } from './support/pool-provider-behaviour.ts';
import { uniqueId } from './support/services.ts';

interface Fixture {
  fake: FakeAutoScaling;
  client: AutoScalingClient;
  provider: AsgPoolProvider;
  target: PoolTarget;
  name: string;
  errors: unknown[];
  cleanup(): Promise<void>;
}

async function fixture(group: Omit<GroupSpec, 'name'> = { max: 10 }): Promise<Fixture> {
  const fake = await FakeAutoScaling.start();
  const target = { model: uniqueId('m'), version: 'v1' };
  const name = defaultGroupName(target);
  fake.addGroup({ name, ...group });
  const client = new AutoScalingClient({ endpoint: fake.url, region: fake.region, credentials: fake.credentials, maxAttempts: 1 });
  const errors: unknown[] = [];
  const provider = createAsgProvider({
    client,
    control: (id, command) => fake.control(id, command),
    heartbeats: async (t) => ('pool' in t ? fake.heartbeats('', '', t.pool) : fake.heartbeats(t.model, t.version)),
    onError: (err) => errors.push(err),
  });
  return {
    fake,
    client,
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

async function tickUntil(f: Fixture, check: (ws: PoolWorker[]) => boolean): Promise<PoolWorker[]> {
  for (let i = 0; i < 30; i++) {
    const ws = await f.provider.list(f.target);
    if (check(ws)) return ws;
    f.fake.tick();
  }
  throw new Error(`not reached; last: ${JSON.stringify(await f.provider.list(f.target))}`);
}

const states = (ws: PoolWorker[]) => ws.map((w) => w.state).sort();
const writes = (f: Fixture) => f.fake.calls.filter((c) => !c.action.startsWith('Describe'));

describe('aws auto scaling group provider', () => {
  let current: Fixture | undefined;
  const setup = async (group?: Omit<GroupSpec, 'name'>) => {
    current = await fixture(group);
    return current;
  };
  afterEach(async () => {
    await current?.cleanup();
    current = undefined;
  });

  it('launch raises the desired capacity by n; the group takes prepared warm pool instances first', async () => {
    const f = await setup({ max: 10, warmPool: { minSize: 0, maxGroupPreparedCapacity: 3 } });
    const pool = await f.provider.warmPool(f.target);
    expect(pool?.instances.map((i) => i.lifecycleState)).toEqual(['Warmed:Stopped', 'Warmed:Stopped', 'Warmed:Stopped']);
    // Warm pool instances are not workers: nothing is listed before a launch.
    expect(await f.provider.list(f.target)).toEqual([]);

    await f.provider.launch(f.target, 2, { startAs: 'active' });
    expect(writes(f)).toEqual([
      {
        action: 'SetDesiredCapacity',
        params: expect.objectContaining({ AutoScalingGroupName: f.name, DesiredCapacity: '2', HonorCooldown: 'false' }),
      },
    ]);
    f.fake.tick();
    const entering = await f.provider.list(f.target);
    expect(states(entering)).toEqual(['launching', 'launching']);
    const warmIds = new Set(pool?.instances.map((i) => i.id));
    expect(entering.every((w) => warmIds.has(w.id))).toBe(true);
    expect(f.fake.group(f.name).instances.map((i) => i.lifecycle)).toEqual(['Pending', 'Pending']);

    // Their weights are on disk already: the workers start at loading, then warm up as told.
    f.fake.tick();
    expect(states(await f.provider.list(f.target))).toEqual(['loading', 'loading']);
    await tickUntil(f, (ws) => states(ws).join() === 'active,active');
    expect((await f.provider.warmPool(f.target))?.instances).toHaveLength(1); // refilled to 3 − desired
  });

  it('drain: protects the others, drains the worker, then terminates exactly it with ShouldDecrementDesiredCapacity', async () => {
    const f = await setup();
    await f.provider.launch(f.target, 3, { startAs: 'active' });
    const warmed = await tickUntil(f, (ws) => states(ws).join() === 'active,active,active');
    const [victim, ...others] = warmed as [PoolWorker, ...PoolWorker[]];
    const before = writes(f).length;

    await f.provider.drain(f.target, victim.id);
    expect(writes(f).slice(before)).toEqual([
      {
        action: 'SetInstanceProtection',
        params: expect.objectContaining({
          AutoScalingGroupName: f.name,
          'InstanceIds.member.1': others[0]?.id,
          'InstanceIds.member.2': others[1]?.id,
          ProtectedFromScaleIn: 'true',
        }),
      },
    ]);
    expect(f.fake.controls.at(-1)).toMatchObject({ instanceId: victim.id, command: 'drain' });
    await f.provider.drain(f.target, victim.id); // idempotent while draining: no second protection call
    expect(writes(f).slice(before)).toHaveLength(1);

    f.fake.tick(); // the worker stops
    const stopped = await f.provider.list(f.target);
    expect(stopped.find((w) => w.id === victim.id)?.state).toBe('stopped');
    expect(writes(f).slice(before + 1)).toEqual([
      {
        action: 'TerminateInstanceInAutoScalingGroup',
        params: expect.objectContaining({ InstanceId: victim.id, ShouldDecrementDesiredCapacity: 'true' }),
      },
    ]);
    expect(f.fake.group(f.name).desired).toBe(2);

    const after = await tickUntil(f, (ws) => ws.length === 2);
    expect(after.map((w) => w.id).sort()).toEqual(others.map((w) => w.id).sort());
    expect(states(after)).toEqual(['active', 'active']);
    expect(f.errors).toEqual([]);
  });

  it("the group's own scale-in cannot pick a protected, busy worker", async () => {
    const f = await setup();
    await f.provider.launch(f.target, 3, { startAs: 'active' });
    const [victim] = (await tickUntil(f, (ws) => states(ws).join() === 'active,active,active')) as [PoolWorker];
    await f.provider.drain(f.target, victim.id);
    // Someone else lowers the desired capacity (a scaling policy, a person): only the unprotected
    // instance being drained is eligible.
    await f.client.send(new SetDesiredCapacityCommand({ AutoScalingGroupName: f.name, DesiredCapacity: 1 }));
    f.fake.tick();
    const group = f.fake.group(f.name);
    expect(group.instances.filter((i) => i.lifecycle === 'Terminating').map((i) => i.id)).toEqual([victim.id]);
    expect(group.instances.filter((i) => i.lifecycle === 'InService')).toHaveLength(2);
  });

  it("a drain that would break the group's MinSize fails loudly in drain and is reported, not thrown, by list", async () => {
    const f = await setup({ min: 1, max: 3, desired: 1 });
    const [only] = (await tickUntil(f, (ws) => ws[0]?.state === 'standby')) as [PoolWorker];
    await f.provider.drain(f.target, only.id);
    f.fake.tick();
    expect(states(await f.provider.list(f.target))).toEqual(['stopped']);
    expect(String(f.errors[0])).toMatch(/desiredSize equals minSize \(1\)/);
    await expect(f.provider.drain(f.target, only.id)).rejects.toThrow(/min size constraint/);
  });

  it('setState before warm-up is applied when the worker is warm; calls name errors from the service', async () => {
    const f = await setup({ max: 2 });
    await f.provider.launch(f.target, 1, { startAs: 'standby' });
    f.fake.tick();
    const [worker] = await f.provider.list(f.target);
    await f.provider.setState(f.target, worker?.id ?? '', 'active');
    await tickUntil(f, (ws) => ws[0]?.state === 'active');
    await expect(f.provider.launch(f.target, 5, { startAs: 'active' })).rejects.toThrow(
      'New SetDesiredCapacity value 6 is above max value 2',
    );
    await expect(f.provider.list({ model: 'nope', version: 'v9' })).rejects.toThrow('auto scaling group warmpool-nope-v9 not found');
  });

  it('configureWarmPool writes PutWarmPool and the pool refills in that state', async () => {
    const f = await setup({ max: 4 });
    expect(await f.provider.warmPool(f.target)).toBeUndefined();
    await f.provider.configureWarmPool(f.target, { minSize: 2, maxGroupPreparedCapacity: 2, poolState: 'Running' });
    expect(writes(f).at(-1)).toEqual({
      action: 'PutWarmPool',
      params: expect.objectContaining({ AutoScalingGroupName: f.name, MinSize: '2', MaxGroupPreparedCapacity: '2', PoolState: 'Running' }),
    });
    f.fake.tick();
    const pool = await f.provider.warmPool(f.target);
    expect(pool).toMatchObject({ minSize: 2, poolState: 'Running' });
    expect(pool?.instances.map((i) => i.lifecycleState)).toEqual(['Warmed:Running', 'Warmed:Running']);
  });

  it('a shared pool: raises warmpool-pool-<name> and lists its instances by the heartbeats that name the pool', async () => {
    const f = await setup();
    const pool = { pool: 'tail' };
    f.fake.addGroup({ name: defaultGroupName(pool), max: 10 });
    await f.provider.launch(pool, 2, { startAs: 'standby' });
    expect(writes(f)).toEqual([
      {
        action: 'SetDesiredCapacity',
        params: expect.objectContaining({ AutoScalingGroupName: 'warmpool-pool-tail', DesiredCapacity: '2' }),
      },
    ]);
    let listed: PoolWorker[] = [];
    for (let i = 0; i < 30 && states(listed).join() !== 'standby,standby'; i++) {
      f.fake.tick();
      listed = await f.provider.list(pool);
    }
    expect(states(listed)).toEqual(['standby', 'standby']);
    expect(await f.provider.list(f.target)).toEqual([]);
  });

  it('instanceFromHost reads EC2 resource-based host names only', () => {
    const beat = (host: string) => ({ id: 'w', host, state: 'active' as const, updatedAt: 0, model: 'm', version: 'v' });
    expect(instanceFromHost(beat('i-0123456789abcdef0.ec2.internal'))).toBe('i-0123456789abcdef0');
    expect(instanceFromHost(beat('ip-10-0-0-1.ec2.internal'))).toBeUndefined();
  });
});

poolProviderBehaviour(
  'aws-asg',
  async () => {
    const f = await fixture({ max: 10, warmPool: { minSize: 1 } });
    f.fake.startTicking(20);
    return { provider: f.provider, target: f.target, cleanup: () => f.fake.close() };
  },
  { waitMs: 30_000, pollMs: 20 },
);
