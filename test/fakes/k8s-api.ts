/**
 * A recorded-contract fake of the Kubernetes API server: a real HTTP server on 127.0.0.1 that
 * answers the few endpoints the Kubernetes pool provider calls, with the request and response
 * shapes of the real API, and simulates what the cluster does in between (the ReplicaSet
 * controller, the kubelet, and the warmpool worker inside each pod).
 *
 * Endpoints (Kubernetes API reference v1.30, https://kubernetes.io/docs/reference/kubernetes-api/):
 *   GET   /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale   → autoscaling/v1 Scale
 *   PATCH /apis/apps/v1/namespaces/{ns}/deployments/{name}/scale   (json-patch, merge-patch, strategic-merge-patch)
 *   GET   /api/v1/namespaces/{ns}/pods?labelSelector=…              → v1 PodList
 *   PATCH /api/v1/namespaces/{ns}/pods/{name}                       (same patch types; metadata only, as the API allows)
 * Errors are `Status` objects (reason NotFound / Conflict / Invalid / UnsupportedMediaType /
 * Unauthorized) with the HTTP code the API server uses (api-concepts: "Responses").
 *
 * Behaviour taken from the real controllers:
 * - A patch carrying `metadata.resourceVersion` is an optimistic-concurrency precondition: a
 *   stale one is 409 Conflict (api-concepts: "Resource versions" / "Patch").
 * - Scale-down picks victims the way `ActivePodsWithRanks` orders them
 *   (kubernetes/pkg/controller/controller_utils.go): unassigned before assigned, Pending before
 *   Unknown before Running, not-ready before ready, lower `controller.kubernetes.io/pod-deletion-cost`
 *   first (KEP-2255, GA in 1.24), more restarts first, newer first. A deleted pod is Terminating
 *   (deletionTimestamp set, SIGTERM to the container) for one tick, then gone.
 * - The deletion-cost annotation must parse as an int32, else 422 Invalid (pod validation).
 *
 * Time moves only in `tick()` (or every `tickMs` after `startTicking`), one step per tick:
 *   pod created (Pending, unscheduled) → scheduled → Running, worker launching → downloading →
 *   loading → warming → standby (or the state it was told while warming), Ready while it serves.
 * A worker told to drain goes draining → stopped; after a back-off the container restarts
 * (restartPolicy Always) with a new worker process, as a real Deployment's would.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { type ControlCommand, stateFor } from '../../infra/fleet/worker-control.ts';
import type { HeartbeatPayload } from '../../infra/fleet/worker-states.ts';

export const DELETION_COST = 'controller.kubernetes.io/pod-deletion-cost';

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  contentType: string | undefined;
  body: unknown;
}

export interface RecordedControl {
  workerId: string;
  pod: string;
  command: string;
}

type Json = Record<string, unknown>;

interface SimWorker {
  id: string;
  state: WorkerState;
  /** What it was told while still warming up: the state it enters once warm. */
  afterWarm?: 'active' | 'standby';
  startedAt: number;
  /** Ticks spent stopped: kubelet restarts an exited container after a back-off. */
  stoppedTicks: number;
}

interface SimPod {
  name: string;
  namespace: string;
  uid: string;
  resourceVersion: string;
  createdAt: number;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  owner: { name: string; uid: string };
  scheduled: boolean;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Unknown';
  restarts: number;
  deletingSince?: number;
  worker?: SimWorker;
}

interface SimDeployment {
  namespace: string;
  name: string;
  uid: string;
  resourceVersion: string;
  createdAt: number;
  replicas: number;
  selector: Record<string, string>;
  rs: { name: string; uid: string };
}

const WARM_UP: readonly WorkerState[] = ['launching', 'downloading', 'loading', 'warming'];
/** Kubelet's crash-loop back-off applies to clean exits too (10 s, doubling); a few ticks here. */
const RESTART_BACKOFF_TICKS = 3;

export class FakeKubernetes {
  readonly requests: RecordedRequest[] = [];
  readonly controls: RecordedControl[] = [];
  readonly token = `fake-token-${randomBytes(6).toString('hex')}`;
  private readonly deployments = new Map<string, SimDeployment>();
  private readonly pods = new Map<string, SimPod>();
  private version = 1000;
  private now = Date.UTC(2025, 0, 1);
  private timer: NodeJS.Timeout | undefined;
  private closed: Promise<void> | undefined;

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<FakeKubernetes> {
    const server = http.createServer();
    const fake = new FakeKubernetes(server);
    server.on('request', (req, res) => void fake.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** A kubeconfig for @kubernetes/client-node pointing at this server, as a real one points at a cluster. */
  kubeConfig(namespace = 'default'): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: this.url, skipTLSVerify: true }],
      users: [{ name: 'scaler', token: this.token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'scaler', namespace }],
      currentContext: 'fake',
    });
    return kc;
  }

  /** Creates a Deployment (as `kubectl apply` would) whose pods carry `labels`. */
  addDeployment(spec: { namespace: string; name: string; labels: Record<string, string>; replicas?: number }): void {
    const hash = randomBytes(5).toString('hex').slice(0, 10);
    this.deployments.set(`${spec.namespace}/${spec.name}`, {
      namespace: spec.namespace,
      name: spec.name,
      uid: randomUUID(),
      resourceVersion: this.nextVersion(),
      createdAt: this.now,
      replicas: spec.replicas ?? 0,
      selector: { ...spec.labels },
      rs: { name: `${spec.name}-${hash}`, uid: randomUUID() },
    });
  }

  /** Desired replicas, as `kubectl get deploy` shows them. */
  replicas(namespace: string, name: string): number | undefined {
    return this.deployments.get(`${namespace}/${name}`)?.replicas;
  }

  /** Pods of a namespace as the API would return them. */
  podList(namespace: string): Json[] {
    return [...this.pods.values()].filter((p) => p.namespace === namespace).map((p) => this.podJson(p));
  }

  /** What the workers' heartbeats in Redis would say (one per live worker process). */
  heartbeats(): HeartbeatPayload[] {
    const beats: HeartbeatPayload[] = [];
    for (const pod of this.pods.values()) {
      const w = pod.worker;
      if (!w) continue;
      // A shared pool's pod template names its pool; its worker then names no model (worker-states.ts).
      const pool = pod.labels['warmpool.dev/pool'];
      beats.push({
        id: w.id,
        model: pool === undefined ? (pod.labels['warmpool.dev/model'] ?? '') : '',
        version: pool === undefined ? (pod.labels['warmpool.dev/version'] ?? '') : '',
        ...(pool === undefined ? {} : { pool, models: [] }),
        state: w.state,
        pid: 1,
        host: pod.name,
        startedAt: w.startedAt,
        updatedAt: this.now,
        rowsPerS: 0,
        jobsInFlight: 0,
        memory: { rssBytes: 0, heapUsedBytes: 0 },
      });
    }
    return beats;
  }

  /** The worker control channel as a worker sees it: a message addressed to one worker id. */
  async control(workerId: string, command: ControlCommand): Promise<void> {
    const pod = [...this.pods.values()].find((p) => p.worker?.id === workerId);
    this.controls.push({ workerId, pod: pod?.name ?? '', command });
    const w = pod?.worker;
    if (!w) return; // A message to a worker that is gone is simply not read.
    const state = stateFor(command);
    if (state !== 'active' && state !== 'standby') {
      if (w.state !== 'stopped' && w.state !== 'failed') w.state = 'draining';
    } else if (w.state === 'standby' || w.state === 'active') {
      w.state = state;
    } else if (WARM_UP.includes(w.state)) {
      w.afterWarm = state; // as the worker does: a command sent before warm-up waits for it
    }
  }

  startTicking(tickMs: number): void {
    this.timer ??= setInterval(() => this.tick(), tickMs);
  }

  /** One step of the cluster: terminating pods go, pods and workers progress, the ReplicaSet reconciles. */
  tick(): void {
    this.now += 1000;
    for (const pod of [...this.pods.values()]) {
      if (pod.deletingSince !== undefined) {
        if (pod.deletingSince < this.now) this.pods.delete(`${pod.namespace}/${pod.name}`);
        continue;
      }
      this.progress(pod);
    }
    for (const d of this.deployments.values()) this.reconcile(d);
  }

  close(): Promise<void> {
    this.closed ??= (async () => {
      clearInterval(this.timer);
      await new Promise<void>((resolve) => {
        this.server.close(() => resolve());
        this.server.closeAllConnections();
      });
    })();
    return this.closed;
  }

  // ── the cluster ──────────────────────────────────────────────────────────

  private progress(pod: SimPod): void {
    const before = JSON.stringify([pod.scheduled, pod.phase, pod.worker?.state, pod.restarts]);
    if (!pod.scheduled) pod.scheduled = true;
    else if (pod.phase === 'Pending') {
      pod.phase = 'Running';
      pod.worker = this.newWorker(pod);
    } else if (pod.worker) {
      const w = pod.worker;
      const i = WARM_UP.indexOf(w.state);
      if (i >= 0) w.state = WARM_UP[i + 1] ?? w.afterWarm ?? 'standby';
      else if (w.state === 'draining') w.state = 'stopped';
      else if (w.state === 'stopped' && ++w.stoppedTicks > RESTART_BACKOFF_TICKS) {
        // The process exited 0 and restartPolicy is Always: kubelet starts the container again.
        pod.restarts += 1;
        pod.worker = this.newWorker(pod);
      }
    }
    if (JSON.stringify([pod.scheduled, pod.phase, pod.worker?.state, pod.restarts]) !== before) pod.resourceVersion = this.nextVersion();
  }

  private newWorker(pod: SimPod): SimWorker {
    return { id: `${pod.name}-1-${randomBytes(3).toString('hex')}`, state: 'launching', startedAt: this.now, stoppedTicks: 0 };
  }

  private reconcile(d: SimDeployment): void {
    const owned = [...this.pods.values()].filter((p) => p.owner.uid === d.rs.uid && p.deletingSince === undefined);
    for (let i = owned.length; i < d.replicas; i++) this.createPod(d);
    const surplus = owned.length - d.replicas;
    if (surplus <= 0) return;
    for (const pod of owned.sort(deletionOrder).slice(0, surplus)) {
      pod.deletingSince = this.now;
      pod.resourceVersion = this.nextVersion();
      // SIGTERM: the worker drains what it holds before the grace period ends.
      if (pod.worker && pod.worker.state !== 'stopped') pod.worker.state = 'draining';
    }
  }

  private createPod(d: SimDeployment): void {
    const name = `${d.rs.name}-${randomBytes(3).toString('hex').slice(0, 5)}`;
    this.pods.set(`${d.namespace}/${name}`, {
      name,
      namespace: d.namespace,
      uid: randomUUID(),
      resourceVersion: this.nextVersion(),
      createdAt: this.now,
      labels: { ...d.selector, 'pod-template-hash': d.rs.name.slice(d.name.length + 1) },
      annotations: {},
      owner: d.rs,
      scheduled: false,
      phase: 'Pending',
      restarts: 0,
    });
  }

  private nextVersion(): string {
    this.version += 1;
    return String(this.version);
  }

  // ── HTTP ─────────────────────────────────────────────────────────────────

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://fake');
    const raw = await readBody(req);
    const contentType = req.headers['content-type']?.split(';')[0]?.trim();
    let body: unknown = raw;
    try {
      body = raw === '' ? undefined : JSON.parse(raw);
    } catch {
      // Left as text: the handler answers 400 for a body it cannot use.
    }
    this.requests.push({ method: req.method ?? '', path: url.pathname, query: Object.fromEntries(url.searchParams), contentType, body });
    const reply = (code: number, payload: unknown) => {
      res.writeHead(code, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    if (req.headers.authorization !== `Bearer ${this.token}`) return reply(401, status(401, 'Unauthorized', 'Unauthorized'));
    try {
      const [code, payload] = this.route(req.method ?? '', url, contentType, body);
      reply(code, payload);
    } catch (err) {
      if (err instanceof StatusError) return reply(err.code, err.status);
      reply(500, status(500, 'InternalError', String(err)));
    }
  }

  private route(method: string, url: URL, contentType: string | undefined, body: unknown): [number, unknown] {
    const scale = url.pathname.match(/^\/apis\/apps\/v1\/namespaces\/([^/]+)\/deployments\/([^/]+)\/scale$/);
    if (scale) {
      const d = this.deployment(scale[1] as string, scale[2] as string);
      if (method === 'GET') return [200, this.scaleJson(d)];
      if (method === 'PATCH') return [200, this.patchScale(d, contentType, body)];
      throw methodNotAllowed();
    }
    const podList = url.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)\/pods$/);
    if (podList && method === 'GET') {
      const selector = parseSelector(url.searchParams.get('labelSelector') ?? '');
      const items = [...this.pods.values()].filter((p) => p.namespace === podList[1] && selector(p.labels)).map((p) => this.podJson(p));
      return [200, { kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: String(this.version) }, items }];
    }
    const pod = url.pathname.match(/^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)$/);
    if (pod) {
      const p = this.pods.get(`${pod[1]}/${pod[2]}`);
      if (!p) throw new StatusError(404, status(404, 'NotFound', `pods "${pod[2]}" not found`, { name: pod[2], kind: 'pods' }));
      if (method === 'GET') return [200, this.podJson(p)];
      if (method === 'PATCH') return [200, this.patchPod(p, contentType, body)];
      throw methodNotAllowed();
    }
    throw new StatusError(404, status(404, 'NotFound', 'the server could not find the requested resource'));
  }

  private deployment(namespace: string, name: string): SimDeployment {
    const d = this.deployments.get(`${namespace}/${name}`);
    if (d) return d;
    throw new StatusError(
      404,
      status(404, 'NotFound', `deployments.apps "${name}" not found`, { name, group: 'apps', kind: 'deployments' }),
    );
  }

  private patchScale(d: SimDeployment, contentType: string | undefined, body: unknown): Json {
    const next = applyPatch(this.scaleJson(d), contentType, body);
    checkVersion(next, d.resourceVersion, `deployments.apps "${d.name}"`);
    const replicas = (next.spec as Json | undefined)?.replicas;
    if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) {
      throw invalid(
        'Scale.autoscaling',
        d.name,
        `spec.replicas: Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
      );
    }
    if (replicas !== d.replicas) {
      d.replicas = replicas;
      d.resourceVersion = this.nextVersion();
    }
    return this.scaleJson(d);
  }

  private patchPod(p: SimPod, contentType: string | undefined, body: unknown): Json {
    const current = this.podJson(p);
    const next = applyPatch(current, contentType, body);
    checkVersion(next, p.resourceVersion, `pods "${p.name}"`);
    if (JSON.stringify(next.spec) !== JSON.stringify(current.spec)) {
      throw invalid('Pod', p.name, 'spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`, …');
    }
    const meta = (next.metadata ?? {}) as Json;
    const annotations = (meta.annotations ?? {}) as Record<string, string>;
    const cost = annotations[DELETION_COST];
    if (cost !== undefined && !isInt32(cost)) {
      throw invalid('Pod', p.name, `metadata.annotations[${DELETION_COST}]: Invalid value: "${cost}": must be a 32bit integer`);
    }
    p.annotations = { ...annotations };
    p.labels = { ...((meta.labels ?? {}) as Record<string, string>) };
    p.resourceVersion = this.nextVersion();
    return this.podJson(p);
  }

  private scaleJson(d: SimDeployment): Json {
    const live = [...this.pods.values()].filter((p) => p.owner.uid === d.rs.uid && p.deletingSince === undefined);
    return {
      kind: 'Scale',
      apiVersion: 'autoscaling/v1',
      metadata: {
        name: d.name,
        namespace: d.namespace,
        uid: d.uid,
        resourceVersion: d.resourceVersion,
        creationTimestamp: iso(d.createdAt),
      },
      spec: { replicas: d.replicas },
      // status.selector is the Deployment's selector in label-query string form (autoscaling/v1 ScaleStatus).
      status: { replicas: live.length, selector: formatSelector(d.selector) },
    };
  }

  private podJson(p: SimPod): Json {
    const ready = p.worker?.state === 'standby' || p.worker?.state === 'active';
    const cond = (type: string, ok: boolean) => ({ type, status: ok ? 'True' : 'False', lastTransitionTime: iso(p.createdAt) });
    const running = p.phase === 'Running';
    return {
      kind: 'Pod',
      apiVersion: 'v1',
      metadata: {
        name: p.name,
        generateName: `${p.owner.name}-`,
        namespace: p.namespace,
        uid: p.uid,
        resourceVersion: p.resourceVersion,
        creationTimestamp: iso(p.createdAt),
        ...(p.deletingSince !== undefined ? { deletionTimestamp: iso(p.deletingSince + 30_000), deletionGracePeriodSeconds: 30 } : {}),
        labels: { ...p.labels },
        ...(Object.keys(p.annotations).length > 0 ? { annotations: { ...p.annotations } } : {}),
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: p.owner.name, uid: p.owner.uid, controller: true, blockOwnerDeletion: true },
        ],
      },
      spec: {
        containers: [{ name: 'worker', image: 'warmpool:test' }],
        restartPolicy: 'Always',
        ...(p.scheduled ? { nodeName: 'fake-node-1' } : {}),
      },
      status: {
        phase: p.phase,
        conditions: [
          cond('PodScheduled', p.scheduled),
          cond('Initialized', p.scheduled),
          cond('ContainersReady', ready),
          cond('Ready', ready),
        ],
        ...(running ? { podIP: '10.0.0.10', startTime: iso(p.createdAt) } : {}),
        containerStatuses: [
          {
            name: 'worker',
            image: 'warmpool:test',
            imageID: '',
            ready,
            started: running,
            restartCount: p.restarts,
            state: running
              ? { running: { startedAt: iso(p.worker?.startedAt ?? p.createdAt) } }
              : { waiting: { reason: 'ContainerCreating' } },
          },
        ],
      },
    };
  }
}

/** ActivePodsWithRanks' order (see the header): the pod that sorts first is deleted first. */
function deletionOrder(a: SimPod, b: SimPod): number {
  if (a.scheduled !== b.scheduled) return a.scheduled ? 1 : -1;
  const phase = { Pending: 0, Unknown: 1, Running: 2, Succeeded: 2, Failed: 2 };
  if (phase[a.phase] !== phase[b.phase]) return phase[a.phase] - phase[b.phase];
  const ready = (p: SimPod) => p.worker?.state === 'standby' || p.worker?.state === 'active';
  if (ready(a) !== ready(b)) return ready(a) ? 1 : -1;
  const cost = (p: SimPod) => Number(p.annotations[DELETION_COST] ?? 0);
  if (cost(a) !== cost(b)) return cost(a) - cost(b);
  if (a.restarts !== b.restarts) return b.restarts - a.restarts;
  return b.createdAt - a.createdAt;
}

class StatusError extends Error {
  constructor(
    readonly code: number,
    readonly status: Json,
  ) {
    super(String(status.message));
  }
}

function status(code: number, reason: string, message: string, details?: Json): Json {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, ...(details ? { details } : {}), code };
}

function invalid(kind: string, name: string, cause: string): StatusError {
  return new StatusError(422, status(422, 'Invalid', `${kind} "${name}" is invalid: ${cause}`, { name, kind }));
}

function methodNotAllowed(): StatusError {
  return new StatusError(405, status(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource'));
}

function checkVersion(next: Json, current: string, what: string): void {
  const wanted = (next.metadata as Json | undefined)?.resourceVersion;
  if (wanted !== undefined && wanted !== current) {
    throw new StatusError(
      409,
      status(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${what}: the object has been modified; please apply your changes to the latest version and try again`,
      ),
    );
  }
}

/** The three patch types the API server accepts for built-in objects (api-concepts: "Patch"). */
function applyPatch(target: Json, contentType: string | undefined, body: unknown): Json {
  if (contentType === 'application/merge-patch+json' || contentType === 'application/strategic-merge-patch+json') {
    // Strategic merge differs from RFC 7386 only for lists with merge keys; Scale and pod metadata have none.
    if (!isObject(body))
      throw new StatusError(400, status(400, 'BadRequest', 'json: cannot unmarshal into Go value of type map[string]interface {}'));
    return mergePatch(target, body) as Json;
  }
  if (contentType === 'application/json-patch+json') {
    if (!Array.isArray(body))
      throw new StatusError(400, status(400, 'BadRequest', 'json: cannot unmarshal object into Go value of type jsonpatch.Patch'));
    return jsonPatch(target, body);
  }
  throw new StatusError(
    415,
    status(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json`,
    ),
  );
}

/** RFC 7386. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Json = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

/** RFC 6902, the operations a scaler would use: add, replace, remove, test. */
function jsonPatch(target: Json, ops: unknown[]): Json {
  const doc = structuredClone(target);
  for (const op of ops) {
    if (!isObject(op) || typeof op.path !== 'string') throw new StatusError(422, status(422, 'Invalid', 'invalid JSON patch operation'));
    const keys = op.path
      .split('/')
      .slice(1)
      .map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = keys.pop() ?? '';
    let parent: Json = doc;
    for (const k of keys) parent = (parent[k] ?? {}) as Json;
    if (op.op === 'test' && JSON.stringify(parent[last]) !== JSON.stringify(op.value)) {
      throw new StatusError(
        422,
        status(422, 'Invalid', `the server rejected our request due to an error in our request: test failed at ${op.path}`),
      );
    }
    if (op.op === 'add' || op.op === 'replace') parent[last] = op.value;
    if (op.op === 'remove') delete parent[last];
  }
  return doc;
}

/** Label selector string form (labels.Parse): `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`. */
export function parseSelector(text: string): (labels: Record<string, string>) => boolean {
  const terms = text
    .split(/,(?![^(]*\))/)
    .map((t) => t.trim())
    .filter(Boolean);
  const tests = terms.map((term): ((l: Record<string, string>) => boolean) => {
    const set = term.match(/^(\S+)\s+(in|notin)\s+\((.*)\)$/);
    if (set) {
      const values = (set[3] as string).split(',').map((v) => v.trim());
      const key = set[1] as string;
      return set[2] === 'in' ? (l) => values.includes(l[key] ?? '\0') : (l) => !values.includes(l[key] ?? '\0');
    }
    const cmp = term.match(/^([^!=\s]+)\s*(==|=|!=)\s*(.*)$/);
    if (cmp) {
      const [, key, op, value] = cmp as unknown as [string, string, string, string];
      return op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value;
    }
    if (term.startsWith('!')) return (l) => !(term.slice(1) in l);
    return (l) => term in l;
  });
  return (labels) => tests.every((t) => t(labels));
}

function formatSelector(labels: Record<string, string>): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(',');
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isInt32(text: string): boolean {
  return /^-?\d+$/.test(text) && Number(text) >= -(2 ** 31) && Number(text) <= 2 ** 31 - 1;
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
