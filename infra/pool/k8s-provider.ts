/**
 * The Kubernetes pool provider (DESIGN §8): one Deployment per model version, scaled through its
 * `scale` subresource, its pods listed by the Deployment's own selector and joined with the
 * workers' heartbeats (pod name = worker host). The Deployment itself (image, env, resources,
 * readiness probe) is the operator's: this provider only changes its replica count and annotates
 * its pods.
 *
 * Standby on Kubernetes is a running pod whose warmed worker was told (through the worker control
 * channel) to take no jobs. Pods have no identity when `launch` asks for them, so each launch
 * queues its `startAs` and `list` hands the queued states to the next workers that finish warming
 * (a restarted scaler forgets the queue; those workers stay in the state they chose themselves
 * and the next tick's `setState` corrects them).
 *
 * Scale-in only by draining. A ReplicaSet picks its own victim on scale-down, so `drain(pod)`:
 *   1. marks the pod (annotation `warmpool.dev/drain-after-restarts` = the container's restart
 *      count now): the mark lives in the cluster, so a restarted scaler finishes the drain;
 *   2. sends the worker the `drain` control (again on every `list` until it drains: a lost
 *      message or a restarted container is told again);
 *   3. once the worker has drained (its heartbeat says stopped, or it is gone, or the container
 *      restarted since the mark) sets `controller.kubernetes.io/pod-deletion-cost` to the lowest
 *      int32 on that pod, then lowers the scale by one (a merge patch carrying the Scale's
 *      resourceVersion, so a concurrent change is a 409, never a lost update). The ReplicaSet
 *      controller deletes the lowest-cost pod first (KEP-2255) — but only among pods of the same
 *      rank: an unscheduled, Pending or not-ready pod sorts before any cost. Step 3 therefore waits
 *      while another pod would sort first, and while the Deployment is mid-change (live pods ≠
 *      replicas), which is also what makes a repeated step 3 never decrement twice.
 * Step 3 runs in `drain` when the worker is already drained, else in a later `list` (the
 * controller lists every tick, so no background loop is needed).
 *
 * RBAC the scaler's service account needs in the namespace: get and patch on
 * `deployments/scale` (apps), list and patch on `pods`.
 */
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
  type V1Scale,
} from '@kubernetes/client-node';
import { beatBelongsTo, type PoolProvider, type PoolTarget, type PoolWorker, poolTargetKey, poolTargetName } from '../contracts/pool.ts';
import type { WorkerState } from '../contracts/worker-state.ts';
import { type ControlCommand, commandFor } from '../fleet/worker-control.ts';
import type { HeartbeatPayload } from '../fleet/worker-states.ts';
import { errorMessage } from '../kernel/errors.ts';

export const POD_DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';
export const DRAIN_MARK = 'warmpool.dev/drain-after-restarts';
/** The lowest value the annotation accepts (int32): this pod goes before any other of its rank. */
export const RETIRE_COST = '-2147483648';

/**
 * Sends one command on the worker control channel, e.g.
 * `(id, command) => sendControl(redis, prefix, id, command)` (infra/fleet/worker-control.ts). A
 * function, so this provider depends on the channel's vocabulary, not on Redis.
 */
export type WorkerControl = (workerId: string, command: ControlCommand) => Promise<void>;
/** The heartbeat fields a provider joins on. */
export type WorkerBeat = Pick<HeartbeatPayload, 'id' | 'host' | 'state' | 'updatedAt' | 'model' | 'version'> & { pool?: string };
export type HeartbeatSource = (target: PoolTarget) => Promise<WorkerBeat[]>;

export interface KubernetesProviderOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  control: WorkerControl;
  /** Live heartbeats of the target's workers. Without it, readiness stands in: Ready = active. */
  heartbeats?: HeartbeatSource;
  /** Default `warmpool-<model>-<version>` (a shared pool: `warmpool-pool-<name>`), made a valid object name. */
  deploymentName?: (target: PoolTarget) => string;
  /** A drain `list` could not finish (it retries next time); `drain` itself throws instead. */
  onError?: (err: unknown) => void;
}

const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const WARMED: readonly WorkerState[] = ['standby', 'active'];
const DONE: readonly WorkerState[] = ['stopped', 'failed'];
const CONFLICT_RETRIES = 5;

interface Snapshot {
  name: string;
  scale: V1Scale;
  pods: V1Pod[];
  beats: Map<string, WorkerBeat>;
}

export function createKubernetesProvider(options: KubernetesProviderOptions): PoolProvider {
  const { namespace, control } = options;
  const apps = options.kubeConfig.makeApiClient(AppsV1Api);
  const core = options.kubeConfig.makeApiClient(CoreV1Api);
  const nameOf = options.deploymentName ?? defaultDeploymentName;
  const startAs = new Map<string, Array<'active' | 'standby'>>();
  const wanted = new Map<string, 'active' | 'standby'>();
  const settled = new Set<string>();
  const reportError = options.onError ?? (() => undefined);
  let closed = false;

  const readScale = async (name: string): Promise<V1Scale> => {
    try {
      return await apps.readNamespacedDeploymentScale({ name, namespace });
    } catch (err) {
      throw new Error(`kubernetes: cannot read the scale of deployment ${namespace}/${name}: ${describe(err)}`, { cause: err });
    }
  };

  /** Sets replicas with the resourceVersion the change was computed from as a precondition. */
  const writeReplicas = (name: string, scale: V1Scale, replicas: number) =>
    apps.patchNamespacedDeploymentScale(
      { name, namespace, body: { metadata: { resourceVersion: scale.metadata?.resourceVersion }, spec: { replicas } } },
      MERGE_PATCH,
    );

  const annotate = (pod: V1Pod, annotations: Record<string, string>) =>
    core.patchNamespacedPod({ name: podName(pod), namespace, body: { metadata: { annotations } } }, MERGE_PATCH);

  const snapshot = async (target: PoolTarget): Promise<Snapshot> => {
    const name = nameOf(target);
    const scale = await readScale(name);
    // status.selector is the Deployment's pod selector in label-query form: no second source of truth.
    const selector = scale.status?.selector;
    // An empty selector would list every pod in the namespace.
    if (!selector) throw new Error(`kubernetes: deployment ${namespace}/${name} reports no pod selector yet`);
    const { items } = await core.listNamespacedPod({ namespace, labelSelector: selector });
    const hosts = new Set(items.map(podName));
    const beats = new Map<string, WorkerBeat>();
    for (const beat of (await options.heartbeats?.(target)) ?? []) {
      if (!hosts.has(beat.host) || !beatBelongsTo(beat, target)) continue;
      // A restarted container leaves its old worker's last beat until the TTL: the newest wins.
      if ((beats.get(beat.host)?.updatedAt ?? -1) < beat.updatedAt) beats.set(beat.host, beat);
    }
    return { name, scale, pods: items, beats };
  };

  const drained = (s: Snapshot, pod: V1Pod): boolean => {
    const beat = s.beats.get(podName(pod));
    if (restartCount(pod) > Number(pod.metadata?.annotations?.[DRAIN_MARK])) return true;
    if (beat) return DONE.includes(beat.state);
    return options.heartbeats ? true : !isReady(pod);
  };

  /** Step 3 of the header for every marked pod whose worker has drained. */
  const retire = async (s: Snapshot): Promise<void> => {
    const live = s.pods.filter((p) => !p.metadata?.deletionTimestamp);
    const done = live.filter((p) => isMarked(p) && drained(s, p));
    const replicas = s.scale.spec?.replicas ?? 0;
    if (done.length === 0 || live.length !== replicas) return;
    const others = live.filter((p) => !done.includes(p));
    if (others.some((o) => done.some((d) => sortsBefore(o, d)))) return;
    for (const pod of done) {
      if (pod.metadata?.annotations?.[POD_DELETION_COST] !== RETIRE_COST) await annotate(pod, { [POD_DELETION_COST]: RETIRE_COST });
    }
    await writeReplicas(s.name, s.scale, replicas - done.length).catch((err: unknown) => {
      if (!isConflict(err)) throw err; // Someone changed the scale meanwhile: the next list retries.
    });
  };

  /** Tells marked pods' workers to drain (again), and hands queued startAs states to fresh warm workers. */
  const tell = async (target: PoolTarget, s: Snapshot): Promise<void> => {
    const key = targetKey(target);
    const queue = startAs.get(key) ?? [];
    for (const pod of s.pods) {
      const name = podName(pod);
      const beat = s.beats.get(name);
      if (!beat || pod.metadata?.deletionTimestamp) continue;
      if (isMarked(pod)) {
        if (beat.state !== 'draining' && !DONE.includes(beat.state)) await control(beat.id, 'drain');
        continue;
      }
      if (!WARMED.includes(beat.state) || settled.has(name)) continue;
      settled.add(name);
      const state = wanted.get(name) ?? queue.shift();
      wanted.delete(name);
      if (state && state !== beat.state) await control(beat.id, commandFor(state));
    }
    const names = new Set(s.pods.map(podName));
    for (const name of settled) if (!names.has(name)) settled.delete(name);
  };

  const workerOf = (s: Snapshot, pod: V1Pod): PoolWorker => {
    const name = podName(pod);
    return { id: name, handle: `${namespace}/${name}`, state: podState(pod, s.beats.get(name), options.heartbeats !== undefined) };
  };

  const open = (): void => {
    if (closed) throw new Error('kubernetes pool provider is closed');
  };

  return {
    name: 'kubernetes',

    async list(target) {
      open();
      const s = await snapshot(target);
      // Finishing drains is list's side job: a failure there must not hide the pool from the controller.
      await tell(target, s).catch(reportError);
      await retire(s).catch(reportError);
      return s.pods.map((p) => workerOf(s, p));
    },

    async launch(target, count, { startAs: state }) {
      open();
      if (count <= 0) return;
      const name = nameOf(target);
      for (let attempt = 1; ; attempt++) {
        const scale = await readScale(name);
        try {
          await writeReplicas(name, scale, (scale.spec?.replicas ?? 0) + count);
          break;
        } catch (err) {
          if (!isConflict(err) || attempt >= CONFLICT_RETRIES) throw err;
        }
      }
      const queue = startAs.get(targetKey(target)) ?? [];
      queue.push(...Array.from({ length: count }, () => state));
      startAs.set(targetKey(target), queue);
    },

    async setState(target, workerId, state) {
      open();
      const s = await snapshot(target);
      const pod = s.pods.find((p) => podName(p) === workerId);
      if (!pod || isMarked(pod)) return;
      const beat = s.beats.get(workerId);
      if (!options.heartbeats) return control(workerId, commandFor(state)); // The channel addresses the host then.
      if (beat && WARMED.includes(beat.state)) {
        settled.add(workerId);
        return control(beat.id, commandFor(state));
      }
      wanted.set(workerId, state); // Not warm yet: told when it is.
    },

    async drain(target, workerId) {
      open();
      const s = await snapshot(target);
      const pod = s.pods.find((p) => podName(p) === workerId);
      if (!pod || pod.metadata?.deletionTimestamp) return; // Gone or going: nothing to do.
      if (!isMarked(pod)) {
        await annotate(pod, { [DRAIN_MARK]: String(restartCount(pod)) });
        pod.metadata = { ...pod.metadata, annotations: { ...pod.metadata?.annotations, [DRAIN_MARK]: String(restartCount(pod)) } };
      }
      if (!options.heartbeats) await control(workerId, 'drain');
      await tell(target, s);
      await retire(s);
    },

    async close() {
      closed = true;
    },
  };
}

/** `warmpool-<model>-<version>` or `warmpool-pool-<name>` as a DNS-1123 label (lower case, [a-z0-9-], ≤ 63 characters). */
export function defaultDeploymentName(target: PoolTarget): string {
  const raw = poolTargetName(target).toLowerCase();
  return raw
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, 63)
    .replace(/-+$/, '');
}

/** The worker state a pod shows: its worker's heartbeat, else what the pod itself says. */
export function podState(pod: V1Pod, beat: WorkerBeat | undefined, hasHeartbeats: boolean): WorkerState {
  const phase = pod.status?.phase;
  if (phase === 'Failed') return 'failed';
  if (phase === 'Succeeded') return 'stopped';
  if (pod.metadata?.deletionTimestamp) return beat?.state === 'draining' ? 'draining' : 'stopped';
  const marked = isMarked(pod);
  if (beat) return marked && !DONE.includes(beat.state) ? 'draining' : beat.state;
  if (hasHeartbeats) return marked ? 'stopped' : 'launching';
  if (marked) return isReady(pod) ? 'draining' : 'stopped';
  return isReady(pod) ? 'active' : 'launching';
}

/**
 * Whether the ReplicaSet controller would delete `a` before `b` whatever their deletion costs:
 * the ranks of ActivePodsWithRanks (kubernetes/pkg/controller/controller_utils.go) that come
 * before the cost — unassigned first, then Pending < Unknown < Running, then not-ready first.
 */
export function sortsBefore(a: V1Pod, b: V1Pod): boolean {
  const assigned = (p: V1Pod) => Boolean(p.spec?.nodeName);
  if (assigned(a) !== assigned(b)) return !assigned(a);
  const phase = (p: V1Pod) => ({ Pending: 0, Unknown: 1, Running: 2 })[p.status?.phase ?? ''] ?? 2;
  if (phase(a) !== phase(b)) return phase(a) < phase(b);
  return !isReady(a) && isReady(b);
}

function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

function isMarked(pod: V1Pod): boolean {
  return pod.metadata?.annotations?.[DRAIN_MARK] !== undefined;
}

function restartCount(pod: V1Pod): number {
  return (pod.status?.containerStatuses ?? []).reduce((n, c) => n + c.restartCount, 0);
}

function podName(pod: V1Pod): string {
  return pod.metadata?.name ?? '';
}

function targetKey(target: PoolTarget): string {
  return poolTargetKey(target);
}

function isConflict(err: unknown): boolean {
  return err instanceof ApiException && err.code === 409;
}

function describe(err: unknown): string {
  if (err instanceof ApiException) {
    // The body is the API server's Status object, as text.
    let message: unknown;
    try {
      message = (JSON.parse(String(err.body)) as { message?: unknown }).message;
    } catch {
      message = undefined;
    }
    return `HTTP ${err.code}${typeof message === 'string' ? `: ${message}` : ''}`;
  }
  return errorMessage(err);
}
