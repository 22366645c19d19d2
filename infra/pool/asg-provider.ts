/**
 * The AWS pool provider (DESIGN §8): one EC2 Auto Scaling group per model version, usually with
 * a warm pool, driven through @aws-sdk/client-auto-scaling. The group, its launch template and
 * its warm pool are the operator's; this provider changes the desired capacity, instance
 * scale-in protection, and terminates the instances it drained.
 *
 * `list` maps the group's instances (DescribeAutoScalingGroups) joined with the workers'
 * heartbeats. The join needs the instance id in the worker's host name: EC2's resource-based host
 * names (`i-0123….ec2.internal`, launch template PrivateDnsNameOptions HostnameType
 * `resource-name`) give it; `instanceOf` overrides the mapping.
 *   Pending, Pending:Wait/Proceed      → the worker's state, else launching
 *   InService                          → the worker's state, else launching (still booting)
 *   Terminating, Terminating:Wait/Proceed → draining while the worker says so, else stopped
 *   Terminated, Detaching/Detached, EnteringStandby/Standby, Quarantined → not listed: not capacity of this pool
 *   Warmed:* (warm pool)               → not listed (see `warmPool`)
 * Warm pool instances are not workers: stopped or hibernated, or running but out of service,
 * they serve nothing until `launch` raises the desired capacity and the group moves them in
 * (Pending → InService), where they boot faster. Listing them as standby would promise capacity
 * that needs a launch; listing them as starting would make the policy launch too little. Their
 * effect shows where it belongs: in the measured cold-start time.
 *
 * Standby is a running worker told to take no jobs; `launch` queues each startAs and `list`
 * hands them to the next workers that finish warming (as the Kubernetes provider does).
 *
 * Scale-in only by draining; `drain(instance)`:
 *   1. SetInstanceProtection(ProtectedFromScaleIn=true) on every other in-service instance not
 *      being drained, so nothing the group does on its own (a lowered desired capacity, a
 *      scaling policy, a scheduled action) can pick a busy worker;
 *   2. the `drain` control to the instance's worker (again on every `list` until it drains);
 *   3. once its heartbeat says stopped (or it has none), TerminateInstanceInAutoScalingGroup with
 *      ShouldDecrementDesiredCapacity=true: exactly that instance goes and no replacement comes.
 *      (Protection does not stop this call: it guards against the group's own choices.)
 * Step 3 runs in `drain` when the worker is already stopped, else in a later `list`. Which
 * instances are being drained is held in memory; a worker that reports stopped on an in-service
 * instance is retired whoever asked, so a restarted scaler still finishes what it started.
 */
import {
  type AutoScalingClient,
  type AutoScalingGroup,
  DescribeAutoScalingGroupsCommand,
  DescribeWarmPoolCommand,
  type Instance,
  PutWarmPoolCommand,
  SetDesiredCapacityCommand,
  SetInstanceProtectionCommand,
  TerminateInstanceInAutoScalingGroupCommand,
  type WarmPoolState,
} from '@aws-sdk/client-auto-scaling';
import { beatBelongsTo, type PoolProvider, type PoolTarget, type PoolWorker, poolTargetName } from '../contracts/pool.ts';
import type { WorkerState } from '../contracts/worker-state.ts';
import { commandFor } from '../fleet/worker-control.ts';
// Types only: the Kubernetes client library stays unloaded on machines that run this provider.
import type { HeartbeatSource, WorkerBeat, WorkerControl } from './k8s-provider.ts';

export interface AsgProviderOptions {
  /** Built by the caller (region, credentials, `endpoint` for tests); closed by `close()`. */
  client: Pick<AutoScalingClient, 'send' | 'destroy'>;
  control: WorkerControl;
  /** Required here: EC2 has no readiness signal that could stand in for the worker's own state. */
  heartbeats: HeartbeatSource;
  /** Default `warmpool-<model>-<version>` (a shared pool: `warmpool-pool-<name>`). */
  groupName?: (target: PoolTarget) => string;
  /** The instance a heartbeat comes from; default: its host name's first label when it is an instance id. */
  instanceOf?: (beat: WorkerBeat) => string | undefined;
  /** A drain `list` could not finish (it retries next time); `drain` itself throws instead. */
  onError?: (err: unknown) => void;
}

export interface WarmPoolView {
  minSize: number;
  poolState: string | undefined;
  instances: Array<{ id: string; lifecycleState: string }>;
}

export interface AsgPoolProvider extends PoolProvider {
  /** The warm pool's instances (DescribeWarmPool), for the pool view. */
  warmPool(target: PoolTarget): Promise<WarmPoolView | undefined>;
  /** PutWarmPool: how many prepared instances to keep, and in which state. */
  configureWarmPool(
    target: PoolTarget,
    config: { minSize: number; maxGroupPreparedCapacity?: number; poolState?: 'Stopped' | 'Running' | 'Hibernated' },
  ): Promise<void>;
}

const WARMED: readonly WorkerState[] = ['standby', 'active'];
const DONE: readonly WorkerState[] = ['stopped', 'failed'];
/** SetInstanceProtection takes at most 50 instance ids per call. */
const PROTECT_BATCH = 50;

interface Snapshot {
  group: AutoScalingGroup;
  beats: Map<string, WorkerBeat>;
}

export function createAsgProvider(options: AsgProviderOptions): AsgPoolProvider {
  const { client, control } = options;
  const nameOf = options.groupName ?? defaultGroupName;
  const instanceOf = options.instanceOf ?? instanceFromHost;
  const retiring = new Set<string>();
  const startAs = new Map<string, Array<'active' | 'standby'>>();
  const wanted = new Map<string, 'active' | 'standby'>();
  const settled = new Set<string>();
  const reportError = options.onError ?? (() => undefined);
  let closed = false;

  const describeGroup = async (name: string): Promise<AutoScalingGroup> => {
    const out = await client.send(new DescribeAutoScalingGroupsCommand({ AutoScalingGroupNames: [name] }));
    const group = out.AutoScalingGroups?.find((g) => g.AutoScalingGroupName === name);
    if (!group) throw new Error(`aws: auto scaling group ${name} not found`);
    return group;
  };

  const snapshot = async (target: PoolTarget): Promise<Snapshot> => {
    const group = await describeGroup(nameOf(target));
    const ids = new Set((group.Instances ?? []).map((i) => i.InstanceId));
    const beats = new Map<string, WorkerBeat>();
    for (const beat of await options.heartbeats(target)) {
      const id = instanceOf(beat);
      if (!id || !ids.has(id) || !beatBelongsTo(beat, target)) continue;
      if ((beats.get(id)?.updatedAt ?? -1) < beat.updatedAt) beats.set(id, beat);
    }
    return { group, beats };
  };

  const isRetiring = (s: Snapshot, i: Instance): boolean =>
    retiring.has(i.InstanceId ?? '') || (i.LifecycleState === 'InService' && s.beats.get(i.InstanceId ?? '')?.state === 'stopped');

  /** Steps 2 and 3 of the header for every instance being drained. */
  const retire = async (s: Snapshot): Promise<void> => {
    for (const i of s.group.Instances ?? []) {
      const id = i.InstanceId ?? '';
      if (!isRetiring(s, i)) continue;
      if (!SERVING.has(i.LifecycleState ?? '')) {
        retiring.delete(id); // Terminating or gone: done.
        continue;
      }
      const beat = s.beats.get(id);
      if (beat && !DONE.includes(beat.state)) {
        if (beat.state !== 'draining') await control(beat.id, 'drain');
        continue;
      }
      await client.send(new TerminateInstanceInAutoScalingGroupCommand({ InstanceId: id, ShouldDecrementDesiredCapacity: true }));
      retiring.delete(id);
    }
  };

  const protectOthers = async (s: Snapshot, except: string): Promise<void> => {
    const ids = (s.group.Instances ?? [])
      .filter((i) => i.InstanceId !== except && i.LifecycleState === 'InService' && !i.ProtectedFromScaleIn && !isRetiring(s, i))
      .map((i) => i.InstanceId ?? '');
    for (let at = 0; at < ids.length; at += PROTECT_BATCH) {
      const batch = ids.slice(at, at + PROTECT_BATCH);
      await client.send(
        new SetInstanceProtectionCommand({
          AutoScalingGroupName: s.group.AutoScalingGroupName,
          InstanceIds: batch,
          ProtectedFromScaleIn: true,
        }),
      );
    }
  };

  /** Hands queued startAs states to workers that have just finished warming. */
  const assignStartAs = async (target: PoolTarget, s: Snapshot): Promise<void> => {
    const queue = startAs.get(nameOf(target)) ?? [];
    for (const i of s.group.Instances ?? []) {
      const id = i.InstanceId ?? '';
      const beat = s.beats.get(id);
      if (!beat || !WARMED.includes(beat.state) || settled.has(id) || isRetiring(s, i)) continue;
      settled.add(id);
      const state = wanted.get(id) ?? queue.shift();
      wanted.delete(id);
      if (state && state !== beat.state) await control(beat.id, commandFor(state));
    }
    const ids = new Set((s.group.Instances ?? []).map((i) => i.InstanceId));
    for (const id of settled) if (!ids.has(id)) settled.delete(id);
  };

  const open = (): void => {
    if (closed) throw new Error('aws pool provider is closed');
  };

  return {
    name: 'aws-asg',

    async list(target) {
      open();
      const s = await snapshot(target);
      // Finishing drains is list's side job: a failure there must not hide the pool from the controller.
      await assignStartAs(target, s).catch(reportError);
      await retire(s).catch(reportError);
      const workers: PoolWorker[] = [];
      for (const i of s.group.Instances ?? []) {
        const state = instanceState(i, s.beats.get(i.InstanceId ?? ''), isRetiring(s, i));
        if (state) workers.push({ id: i.InstanceId ?? '', handle: `${s.group.AutoScalingGroupName}/${i.InstanceId}`, state });
      }
      return workers;
    },

    async launch(target, count, { startAs: state }) {
      open();
      if (count <= 0) return;
      const group = await describeGroup(nameOf(target));
      // Instances come from the warm pool first when the group has one (the service's choice).
      await client.send(
        new SetDesiredCapacityCommand({
          AutoScalingGroupName: group.AutoScalingGroupName,
          DesiredCapacity: (group.DesiredCapacity ?? 0) + count,
          HonorCooldown: false,
        }),
      );
      const queue = startAs.get(nameOf(target)) ?? [];
      queue.push(...Array.from({ length: count }, () => state));
      startAs.set(nameOf(target), queue);
    },

    async setState(target, workerId, state) {
      open();
      const s = await snapshot(target);
      const instance = s.group.Instances?.find((i) => i.InstanceId === workerId);
      if (!instance || isRetiring(s, instance)) return;
      const beat = s.beats.get(workerId);
      if (beat && WARMED.includes(beat.state)) {
        settled.add(workerId);
        return control(beat.id, commandFor(state));
      }
      wanted.set(workerId, state);
    },

    async drain(target, workerId) {
      open();
      const s = await snapshot(target);
      const instance = s.group.Instances?.find((i) => i.InstanceId === workerId);
      if (!instance || !SERVING.has(instance.LifecycleState ?? '')) return; // Gone or going.
      if (!retiring.has(workerId)) await protectOthers(s, workerId);
      retiring.add(workerId);
      await retire(s);
    },

    async warmPool(target) {
      open();
      const out = await client.send(new DescribeWarmPoolCommand({ AutoScalingGroupName: nameOf(target) }));
      if (!out.WarmPoolConfiguration) return undefined;
      return {
        minSize: out.WarmPoolConfiguration.MinSize ?? 0,
        poolState: out.WarmPoolConfiguration.PoolState,
        instances: (out.Instances ?? []).map((i) => ({ id: i.InstanceId ?? '', lifecycleState: i.LifecycleState ?? '' })),
      };
    },

    async configureWarmPool(target, config) {
      open();
      await client.send(
        new PutWarmPoolCommand({
          AutoScalingGroupName: nameOf(target),
          MinSize: config.minSize,
          MaxGroupPreparedCapacity: config.maxGroupPreparedCapacity,
          PoolState: config.poolState as WarmPoolState | undefined,
        }),
      );
    },

    async close() {
      if (closed) return;
      closed = true;
      client.destroy();
    },
  };
}

const SERVING = new Set(['Pending', 'Pending:Wait', 'Pending:Proceed', 'InService']);
const TERMINATING = new Set(['Terminating', 'Terminating:Wait', 'Terminating:Proceed']);

/** The mapping in the header; undefined for instances that are not listed. */
export function instanceState(instance: Instance, beat: WorkerBeat | undefined, retiring: boolean): WorkerState | undefined {
  const lifecycle = instance.LifecycleState ?? '';
  if (TERMINATING.has(lifecycle)) return beat?.state === 'draining' ? 'draining' : 'stopped';
  if (!SERVING.has(lifecycle)) return undefined;
  if (!beat) return retiring ? 'stopped' : 'launching';
  return retiring && !DONE.includes(beat.state) ? 'draining' : beat.state;
}

/** `warmpool-<model>-<version>` or `warmpool-pool-<name>`: group names allow the characters model, version and pool names use. */
export function defaultGroupName(target: PoolTarget): string {
  return poolTargetName(target);
}

/** `i-0abc….ec2.internal` (EC2 resource-based host name) → `i-0abc…`. */
export function instanceFromHost(beat: WorkerBeat): string | undefined {
  const label = beat.host.split('.')[0] ?? '';
  return /^i-[0-9a-f]{8,17}$/.test(label) ? label : undefined;
}
