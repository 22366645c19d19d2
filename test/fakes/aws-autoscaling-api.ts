/**
 * A recorded-contract fake of the Amazon EC2 Auto Scaling Query API: a real HTTP server on
 * 127.0.0.1 that @aws-sdk/client-auto-scaling talks to through `endpoint`, with the wire format
 * of the real service and a simulation of what the service does between calls (instances
 * launching, warm pool instances entering service, scale-in honouring protection, the warmpool
 * worker on each instance).
 *
 * Protocol (AWS Query, API version 2011-01-01; Amazon EC2 Auto Scaling API Reference, "Making
 * API requests" and each action's page): POST / with a form-encoded body `Action=…&Version=…`,
 * lists as `Name.member.N`, booleans as `true`/`false`; a SigV4 `Authorization` header; answers
 * `<{Action}Response xmlns="http://autoscaling.amazonaws.com/doc/2011-01-01/"><{Action}Result>…`
 * with lists as `<member>` elements, and errors as HTTP 400/403 `<ErrorResponse><Error><Type>
 * <Code><Message></Error><RequestId>`.
 *
 * Actions: DescribeAutoScalingGroups (warm pool instances are not in `Instances`: the reference
 * says to call DescribeWarmPool for them), SetDesiredCapacity (ValidationError outside
 * [MinSize, MaxSize]), SetInstanceProtection (only for InService instances; never warm pool
 * ones), TerminateInstanceInAutoScalingGroup (ShouldDecrementDesiredCapacity required; refuses to
 * go below MinSize when decrementing; not for warm pool instances), DescribeWarmPool, PutWarmPool.
 *
 * Behaviour, one step per `tick()` (Auto Scaling User Guide, "Warm pools" and "Instance
 * scale-in protection"):
 * - desired > instances: take a prepared warm pool instance first (Warmed:Stopped/Running/
 *   Hibernated → Pending → InService), else launch a new one (Pending → InService); a new or
 *   warm-pool instance inherits the group's NewInstancesProtectedFromScaleIn;
 * - desired < instances: terminate unprotected instances only; with every one protected the
 *   desired capacity stays lowered and nothing is terminated;
 * - the warm pool is refilled to max(MinSize, MaxGroupPreparedCapacity − desired), with
 *   MaxGroupPreparedCapacity defaulting to the group's MaxSize (Warmed:Pending → PoolState);
 * - Terminating → Terminated → gone from the listing.
 * The worker on an instance boots when it enters service (launching → … → standby, or the state
 * it was told while warming; a warm pool instance has its weights on disk already and starts at
 * loading); told to drain it goes draining → stopped and stays stopped (a clean exit is not
 * restarted). Its host name is EC2's resource-based one, `<instance id>.ec2.internal`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { type ControlCommand, stateFor } from '../../infra/fleet/worker-control.ts';
import type { HeartbeatPayload } from '../../infra/fleet/worker-states.ts';

const XMLNS = 'http://autoscaling.amazonaws.com/doc/2011-01-01/';
const WARM_UP: readonly WorkerState[] = ['launching', 'downloading', 'loading', 'warming'];
const PREPARED = ['Warmed:Stopped', 'Warmed:Running', 'Warmed:Hibernated'];

export interface RecordedCall {
  action: string;
  params: Record<string, string>;
}

export interface RecordedControl {
  workerId: string;
  instanceId: string;
  command: string;
}

interface SimWorker {
  id: string;
  state: WorkerState;
  afterWarm?: 'active' | 'standby';
  startedAt: number;
}

interface SimInstance {
  id: string;
  az: string;
  lifecycle: string;
  protected: boolean;
  fromWarmPool: boolean;
  worker?: SimWorker;
}

interface SimGroup {
  name: string;
  arn: string;
  min: number;
  max: number;
  desired: number;
  newInstancesProtected: boolean;
  createdAt: number;
  instances: SimInstance[];
  warmPool?: { minSize: number; maxPrepared: number; poolState: string; reuseOnScaleIn: boolean; instances: SimInstance[] };
}

export interface GroupSpec {
  name: string;
  min?: number;
  max: number;
  desired?: number;
  newInstancesProtectedFromScaleIn?: boolean;
  /** Prepared instances are created at once (Warmed:Stopped), as if the pool had filled long ago. */
  warmPool?: { minSize?: number; maxGroupPreparedCapacity?: number; poolState?: 'Stopped' | 'Running' | 'Hibernated' };
}

class QueryError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly httpStatus = 400,
  ) {
    super(message);
  }
}

export class FakeAutoScaling {
  readonly calls: RecordedCall[] = [];
  readonly controls: RecordedControl[] = [];
  readonly credentials = { accessKeyId: 'AKIAFAKE', secretAccessKey: randomBytes(12).toString('hex') };
  readonly region = 'us-east-1';
  private readonly groups = new Map<string, SimGroup>();
  private now = Date.UTC(2025, 0, 1);
  private timer: NodeJS.Timeout | undefined;
  private closed: Promise<void> | undefined;

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<FakeAutoScaling> {
    const server = http.createServer();
    const fake = new FakeAutoScaling(server);
    server.on('request', (req, res) => void fake.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  addGroup(spec: GroupSpec): void {
    const group: SimGroup = {
      name: spec.name,
      arn: `arn:aws:autoscaling:${this.region}:123456789012:autoScalingGroup:${randomUUID()}:autoScalingGroupName/${spec.name}`,
      min: spec.min ?? 0,
      max: spec.max,
      desired: spec.desired ?? spec.min ?? 0,
      newInstancesProtected: spec.newInstancesProtectedFromScaleIn ?? false,
      createdAt: this.now,
      instances: [],
    };
    if (spec.warmPool)
      this.putWarmPool(group, spec.warmPool.minSize ?? 0, spec.warmPool.maxGroupPreparedCapacity ?? -1, spec.warmPool.poolState);
    this.groups.set(spec.name, group);
    for (const i of group.warmPool?.instances ?? []) i.lifecycle = `Warmed:${group.warmPool?.poolState}`;
  }

  /** The group as the service holds it, for assertions. */
  group(name: string): { desired: number; instances: Array<{ id: string; lifecycle: string; protected: boolean }>; warm: string[] } {
    const g = this.groups.get(name);
    if (!g) throw new Error(`no group ${name}`);
    return {
      desired: g.desired,
      instances: g.instances.map((i) => ({ id: i.id, lifecycle: i.lifecycle, protected: i.protected })),
      warm: (g.warmPool?.instances ?? []).map((i) => i.lifecycle),
    };
  }

  /** What the workers' heartbeats in Redis would say (a shared pool's workers name their pool and no model). */
  heartbeats(model: string, version: string, pool?: string): HeartbeatPayload[] {
    return [...this.groups.values()].flatMap((g) =>
      g.instances.flatMap((i) =>
        i.worker
          ? [
              {
                id: i.worker.id,
                model: pool === undefined ? model : '',
                version: pool === undefined ? version : '',
                ...(pool === undefined ? {} : { pool, models: [] }),
                state: i.worker.state,
                pid: 4242,
                host: `${i.id}.ec2.internal`,
                startedAt: i.worker.startedAt,
                updatedAt: this.now,
                rowsPerS: 0,
                jobsInFlight: 0,
                memory: { rssBytes: 0, heapUsedBytes: 0 },
              },
            ]
          : [],
      ),
    );
  }

  /** The worker control channel as a worker sees it. */
  async control(workerId: string, command: ControlCommand): Promise<void> {
    const instance = [...this.groups.values()].flatMap((g) => g.instances).find((i) => i.worker?.id === workerId);
    this.controls.push({ workerId, instanceId: instance?.id ?? '', command });
    const w = instance?.worker;
    if (!w) return;
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

  tick(): void {
    this.now += 1000;
    for (const g of this.groups.values()) {
      g.instances = g.instances.filter((i) => i.lifecycle !== 'Terminated');
      for (const i of g.instances) this.progress(i);
      for (const i of g.warmPool?.instances ?? []) if (i.lifecycle === 'Warmed:Pending') i.lifecycle = `Warmed:${g.warmPool?.poolState}`;
      this.scale(g);
      this.refillWarmPool(g);
    }
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

  // ── the service ──────────────────────────────────────────────────────────

  private progress(i: SimInstance): void {
    if (i.lifecycle === 'Terminating') {
      i.lifecycle = 'Terminated';
      i.worker = undefined;
    } else if (i.lifecycle === 'Pending') {
      i.lifecycle = 'InService';
      const state = i.fromWarmPool ? 'loading' : 'launching';
      i.worker = { id: `${i.id}.ec2.internal-4242-${randomBytes(3).toString('hex')}`, state, startedAt: this.now };
    } else if (i.worker) {
      const w = i.worker;
      const at = WARM_UP.indexOf(w.state);
      if (at >= 0) w.state = WARM_UP[at + 1] ?? w.afterWarm ?? 'standby';
      else if (w.state === 'draining') w.state = 'stopped';
    }
  }

  private scale(g: SimGroup): void {
    const serving = g.instances.filter((i) => i.lifecycle === 'Pending' || i.lifecycle === 'InService');
    for (let n = serving.length; n < g.desired; n++) {
      const warm = g.warmPool?.instances.find((i) => PREPARED.includes(i.lifecycle));
      if (g.warmPool && warm) g.warmPool.instances = g.warmPool.instances.filter((i) => i !== warm);
      const instance = warm ?? this.newInstance('Pending');
      instance.lifecycle = 'Pending';
      instance.fromWarmPool = warm !== undefined;
      instance.protected = g.newInstancesProtected;
      g.instances.push(instance);
    }
    const victims = serving.filter((i) => !i.protected).slice(0, Math.max(0, serving.length - g.desired));
    for (const v of victims) v.lifecycle = 'Terminating';
  }

  private refillWarmPool(g: SimGroup): void {
    const pool = g.warmPool;
    if (!pool) return;
    const maxPrepared = pool.maxPrepared < 0 ? g.max : pool.maxPrepared;
    const size = Math.max(pool.minSize, maxPrepared - g.desired);
    while (pool.instances.length < size) pool.instances.push(this.newInstance('Warmed:Pending'));
    pool.instances = pool.instances.slice(0, size);
  }

  private newInstance(lifecycle: string): SimInstance {
    return {
      id: `i-${randomBytes(9).toString('hex').slice(0, 17)}`,
      az: `${this.region}a`,
      lifecycle,
      protected: false,
      fromWarmPool: false,
    };
  }

  private putWarmPool(g: SimGroup, minSize: number, maxPrepared: number, poolState = 'Stopped'): void {
    const instances = g.warmPool?.instances ?? [];
    g.warmPool = { minSize, maxPrepared, poolState, reuseOnScaleIn: false, instances };
    this.refillWarmPool(g);
  }

  // ── HTTP ─────────────────────────────────────────────────────────────────

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const params = Object.fromEntries(new URLSearchParams(await readBody(req)));
    const action = params.Action ?? '';
    this.calls.push({ action, params });
    const requestId = randomUUID();
    const send = (code: number, body: string) => {
      res.writeHead(code, { 'content-type': 'text/xml', 'x-amzn-requestid': requestId });
      res.end(`<?xml version="1.0" encoding="UTF-8"?>\n${body}`);
    };
    try {
      const auth = req.headers.authorization ?? '';
      if (!auth.startsWith(`AWS4-HMAC-SHA256 Credential=${this.credentials.accessKeyId}/`)) {
        throw new QueryError('InvalidClientTokenId', 'The security token included in the request is invalid.', 403);
      }
      if (req.method !== 'POST' || params.Version !== '2011-01-01') throw new QueryError('InvalidAction', 'Could not find operation');
      const result = this.dispatch(action, params);
      send(
        200,
        tag(`${action}Response`, `${tag(`${action}Result`, result)}${tag('ResponseMetadata', tag('RequestId', requestId))}`, XMLNS),
      );
    } catch (err) {
      const e = err instanceof QueryError ? err : new QueryError('InternalFailure', String(err), 500);
      const type = e.httpStatus >= 500 ? 'Receiver' : 'Sender';
      const error = tag('Error', tag('Type', type) + tag('Code', e.code) + tag('Message', escapeXml(e.message)));
      send(e.httpStatus, tag('ErrorResponse', error + tag('RequestId', requestId), XMLNS));
    }
  }

  private dispatch(action: string, p: Record<string, string>): string {
    switch (action) {
      case 'DescribeAutoScalingGroups': {
        const names = members(p, 'AutoScalingGroupNames');
        const groups = [...this.groups.values()].filter((g) => names.length === 0 || names.includes(g.name));
        return tag('AutoScalingGroups', groups.map((g) => tag('member', this.groupXml(g))).join(''));
      }
      case 'SetDesiredCapacity': {
        const g = this.need(p.AutoScalingGroupName);
        const desired = Number(p.DesiredCapacity);
        if (desired > g.max)
          throw new QueryError(
            'ValidationError',
            `New SetDesiredCapacity value ${desired} is above max value ${g.max} for the AutoScalingGroup.`,
          );
        if (desired < g.min)
          throw new QueryError(
            'ValidationError',
            `New SetDesiredCapacity value ${desired} is below min value ${g.min} for the AutoScalingGroup.`,
          );
        g.desired = desired;
        return '';
      }
      case 'SetInstanceProtection': {
        const g = this.need(p.AutoScalingGroupName);
        const ids = members(p, 'InstanceIds');
        const found = ids.map((id) => this.member(g, id));
        for (const i of found) {
          if (i.lifecycle !== 'InService')
            throw new QueryError('ValidationError', `The instance ${i.id} is not in InService or EnteringStandby or Standby.`);
        }
        for (const i of found) i.protected = p.ProtectedFromScaleIn === 'true';
        return '';
      }
      case 'TerminateInstanceInAutoScalingGroup':
        return this.terminate(p.InstanceId ?? '', p.ShouldDecrementDesiredCapacity);
      case 'DescribeWarmPool': {
        const g = this.need(p.AutoScalingGroupName);
        const pool = g.warmPool;
        if (!pool) return '';
        return this.warmPoolXml(g) + tag('Instances', pool.instances.map((i) => tag('member', this.instanceXml(i, false))).join(''));
      }
      case 'PutWarmPool': {
        const g = this.need(p.AutoScalingGroupName);
        this.putWarmPool(g, Number(p.MinSize ?? 0), Number(p.MaxGroupPreparedCapacity ?? -1), p.PoolState ?? 'Stopped');
        return '';
      }
      default:
        throw new QueryError('InvalidAction', `The action ${action} is not valid for this web service.`);
    }
  }

  private terminate(id: string, decrement: string | undefined): string {
    if (decrement !== 'true' && decrement !== 'false') {
      throw new QueryError(
        'ValidationError',
        "1 validation error detected: Value null at 'shouldDecrementDesiredCapacity' failed to satisfy constraint: Member must not be null",
      );
    }
    const g = [...this.groups.values()].find((x) => x.instances.some((i) => i.id === id));
    if (!g) {
      const warm = [...this.groups.values()].some((x) => x.warmPool?.instances.some((i) => i.id === id));
      if (warm) throw new QueryError('ValidationError', 'This operation cannot be called on instances in a warm pool.');
      throw new QueryError('ValidationError', `Instance Id not found - No managed instance found for instance ID: ${id}`);
    }
    const instance = this.member(g, id);
    if (instance.lifecycle !== 'InService' && instance.lifecycle !== 'Pending') {
      throw new QueryError('ValidationError', `The instance ${id} is in ${instance.lifecycle} and cannot be terminated.`);
    }
    if (decrement === 'true' && g.desired - 1 < g.min) {
      throw new QueryError(
        'ValidationError',
        `Currently, desiredSize equals minSize (${g.min}). Terminating instance without replacement will violate group's min size constraint. Either set shouldDecrementDesiredCapacity flag to false or lower group's min size.`,
      );
    }
    const from = g.desired;
    if (decrement === 'true') g.desired -= 1;
    instance.lifecycle = 'Terminating';
    const activity =
      tag('ActivityId', randomUUID()) +
      tag('AutoScalingGroupName', g.name) +
      tag('Description', escapeXml(`Terminating EC2 instance: ${id}`)) +
      tag(
        'Cause',
        escapeXml(
          `At ${iso(this.now)} instance ${id} was taken out of service in response to a user request, shrinking the capacity from ${from} to ${g.desired}.`,
        ),
      ) +
      tag('StartTime', iso(this.now)) +
      tag('StatusCode', 'InProgress') +
      tag('Progress', '0') +
      tag('Details', escapeXml(JSON.stringify({ 'Availability Zone': instance.az })));
    return tag('Activity', activity);
  }

  private need(name: string | undefined): SimGroup {
    const g = this.groups.get(name ?? '');
    if (!g) throw new QueryError('ValidationError', `AutoScalingGroup name not found - AutoScalingGroup '${name}' not found`);
    return g;
  }

  private member(g: SimGroup, id: string): SimInstance {
    const i = g.instances.find((x) => x.id === id);
    if (i) return i;
    if (g.warmPool?.instances.some((x) => x.id === id))
      throw new QueryError('ValidationError', 'This operation cannot be called on instances in a warm pool.');
    throw new QueryError('ValidationError', `The instance ${id} is not part of Auto Scaling group ${g.name}.`);
  }

  private groupXml(g: SimGroup): string {
    return (
      tag('AutoScalingGroupName', g.name) +
      tag('AutoScalingGroupARN', g.arn) +
      tag(
        'LaunchTemplate',
        tag('LaunchTemplateId', 'lt-0123456789abcdef0') + tag('LaunchTemplateName', 'warmpool-worker') + tag('Version', '$Latest'),
      ) +
      tag('MinSize', String(g.min)) +
      tag('MaxSize', String(g.max)) +
      tag('DesiredCapacity', String(g.desired)) +
      tag('DefaultCooldown', '300') +
      tag('AvailabilityZones', tag('member', `${this.region}a`)) +
      tag('HealthCheckType', 'EC2') +
      tag('HealthCheckGracePeriod', '300') +
      tag('Instances', g.instances.map((i) => tag('member', this.instanceXml(i, true))).join('')) +
      tag('CreatedTime', iso(g.createdAt)) +
      tag('TerminationPolicies', tag('member', 'Default')) +
      tag('NewInstancesProtectedFromScaleIn', String(g.newInstancesProtected)) +
      (g.warmPool ? this.warmPoolXml(g) + tag('WarmPoolSize', String(g.warmPool.instances.length)) : '')
    );
  }

  private warmPoolXml(g: SimGroup): string {
    const pool = g.warmPool;
    if (!pool) return '';
    const max = pool.maxPrepared < 0 ? '' : tag('MaxGroupPreparedCapacity', String(pool.maxPrepared));
    return tag(
      'WarmPoolConfiguration',
      max +
        tag('MinSize', String(pool.minSize)) +
        tag('PoolState', pool.poolState) +
        tag('InstanceReusePolicy', tag('ReuseOnScaleIn', 'false')),
    );
  }

  private instanceXml(i: SimInstance, withProtection: boolean): string {
    return (
      tag('InstanceId', i.id) +
      tag('InstanceType', 'g5.xlarge') +
      tag('AvailabilityZone', i.az) +
      tag('LifecycleState', i.lifecycle) +
      tag('HealthStatus', 'Healthy') +
      tag(
        'LaunchTemplate',
        tag('LaunchTemplateId', 'lt-0123456789abcdef0') + tag('LaunchTemplateName', 'warmpool-worker') + tag('Version', '1'),
      ) +
      (withProtection ? tag('ProtectedFromScaleIn', String(i.protected)) : '')
    );
  }
}

/** `Name.member.1`, `Name.member.2`, … in order. */
function members(params: Record<string, string>, name: string): string[] {
  const out: string[] = [];
  for (let n = 1; params[`${name}.member.${n}`] !== undefined; n++) out.push(params[`${name}.member.${n}`] as string);
  return out;
}

function tag(name: string, inner: string, xmlns?: string): string {
  return `<${name}${xmlns ? ` xmlns="${xmlns}"` : ''}>${inner}</${name}>`;
}

/** Text nodes are escaped; `tag` nests already-built XML. */
function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
