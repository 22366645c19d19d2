/**
 * The Kubernetes manifests (deploy/k8s), checked the way kubeconform checks them, offline: every
 * object against the published Kubernetes OpenAPI schemas (the kubernetes-models package ships
 * them compiled), plus a strict pass that refuses fields the API does not know (a misspelt
 * `readinesProbe` is silently dropped by the schema check; here it fails), using the types of
 * the Kubernetes client the scaler itself uses. Then what the design asks of them: workers ready
 * only once warmed and drained by their preStop hook, on the health port the worker listens on;
 * the worker Deployment named as the scaler scales it, without `replicas`; the scaler's RBAC
 * exactly what infra/pool/k8s-provider.ts calls, on those Deployments, in one namespace; every
 * environment variable one warmpool reads; every pod non-root.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { CONFIG_VARIABLES } from '../infra/kernel/config.ts';
import { defaultDeploymentName } from '../infra/pool/k8s-provider.ts';

type Obj = Record<string, unknown>;
interface Manifest {
  file: string;
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [key: string]: unknown;
}
interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: Obj }>;
  ports?: Array<{ name?: string; containerPort: number }>;
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  startupProbe?: { httpGet?: { path: string; port: string | number }; periodSeconds?: number; failureThreshold?: number };
  lifecycle?: { preStop?: { httpGet?: { path: string; port: string | number }; exec?: { command: string[] } } };
  securityContext?: Obj;
  resources?: { limits?: Record<string, string> };
}
interface PodSpec {
  containers: Container[];
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  terminationGracePeriodSeconds?: number;
  securityContext?: Obj;
}
interface Workload extends Manifest {
  spec: { replicas?: number; template: { spec: PodSpec } };
}

const ROOT = path.resolve(import.meta.dirname, '..');
const DIR = path.join(ROOT, 'deploy/k8s');
const require = createRequire(import.meta.url);

const files = readdirSync(DIR).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml');
const manifests: Manifest[] = files.flatMap((file) =>
  parseAllDocuments(readFileSync(path.join(DIR, file), 'utf8')).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]?.message}`);
    return { ...(doc.toJS() as Manifest), file };
  }),
);
const workloads = manifests.filter((m): m is Workload => m.kind === 'Deployment' || m.kind === 'StatefulSet');
const byComponent = (c: string) => workloads.filter((w) => w.metadata.labels?.['app.kubernetes.io/component'] === c);
const only = <T>(xs: T[], what: string): T => {
  expect(xs, what).toHaveLength(1);
  return xs[0] as T;
};

/** `kubernetes-models/<group>/<version>/<Kind>`: the class whose validate() applies the OpenAPI schema. */
function schemaValidate(m: Manifest): void {
  const { file: _file, ...object } = m;
  const mod = require(`kubernetes-models/${m.apiVersion}/${m.kind}`) as Record<string, new (o: unknown) => { validate(): void }>;
  const Model = mod[m.kind];
  if (!Model) throw new Error(`no schema for ${m.apiVersion} ${m.kind}`);
  new Model(object).validate();
}

/** Fields the API does not know, by the client library's type of each object (kubeconform -strict). */
function unknownFields(value: unknown, type: string, at: string): string[] {
  if (value === null || value === undefined) return [];
  const list = /^Array<(.+)>$/.exec(type);
  if (list) return (value as unknown[]).flatMap((v, i) => unknownFields(v, list[1] as string, `${at}[${i}]`));
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) return Object.entries(value as Obj).flatMap(([k, v]) => unknownFields(v, map[1] as string, `${at}.${k}`));
  const model = (k8s as unknown as Record<string, { getAttributeTypeMap?: () => Array<{ baseName: string; type: string }> }>)[type];
  if (!model?.getAttributeTypeMap) return []; // a primitive, IntOrString, or a free-form object
  const attributes = new Map(model.getAttributeTypeMap().map((a) => [a.baseName, a.type]));
  return Object.entries(value as Obj).flatMap(([k, v]) => {
    const t = attributes.get(k);
    return t === undefined ? [`${at}.${k}`] : unknownFields(v, t, `${at}.${k}`);
  });
}

/** The variables infra/kernel/config.ts reads (its sections' schemas), and the few read elsewhere by name. */
function knownVariables(): Set<string> {
  const names = CONFIG_VARIABLES;
  expect(names.length).toBeGreaterThan(30);
  // Read by name outside config.ts: the worker's start state and health port, the image's
  // HEALTHCHECK, the AWS SDK's own warning switch.
  return new Set([
    ...names,
    'WARMPOOL_START_AS',
    'WORKER_HEALTH_PORT',
    'WARMPOOL_HEALTH_URL',
    'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED',
  ]);
}

const portOf = (c: Container, port: string | number | undefined) =>
  typeof port === 'number' ? port : c.ports?.find((p) => p.name === port)?.containerPort;
const envOf = (c: Container, name: string) => c.env?.find((e) => e.name === name)?.value;

describe('schema', () => {
  it('every manifest file is in the kustomization, and nothing else is', () => {
    const kustomization = parseAllDocuments(readFileSync(path.join(DIR, 'kustomization.yaml'), 'utf8'))[0]?.toJS() as {
      resources: string[];
    };
    expect([...kustomization.resources].sort()).toEqual([...files].sort());
  });

  it.each(manifests.map((m) => [`${m.file} ${m.kind}/${m.metadata.name}`, m] as const))(
    '%s validates against the Kubernetes schema',
    (_, m) => {
      expect(() => schemaValidate(m)).not.toThrow();
      const { file: _file, ...object } = m;
      expect((k8s as Record<string, unknown>)[`V1${m.kind}`], `a client type for ${m.kind}`).toBeDefined();
      expect(unknownFields(object, `V1${m.kind}`, m.kind)).toEqual([]);
    },
  );

  it('the checks fail on a broken manifest (a wrong type, a misspelt field)', () => {
    const worker = only(byComponent('worker'), 'worker Deployment');
    const wrongType = structuredClone(worker);
    (wrongType.spec.template.spec.containers[0] as Container).ports = [{ name: 'health', containerPort: 'ninety' as unknown as number }];
    expect(() => schemaValidate(wrongType)).toThrow(/containerPort/);
    const { file: _file, ...misspelt } = structuredClone(worker);
    (misspelt.spec.template.spec.containers[0] as unknown as Obj).readinesProbe = {};
    expect(unknownFields(misspelt, 'V1Deployment', 'Deployment')).toEqual(['Deployment.spec.template.spec.containers[0].readinesProbe']);
  });
});

describe('workers', () => {
  const worker = only(byComponent('worker'), 'worker Deployment');
  const pod = worker.spec.template.spec;
  const container = only(pod.containers, 'worker container');

  it('is the Deployment the scaler scales, and leaves its replica count to the scaler', () => {
    const args = container.args ?? [];
    const model = args[args.indexOf('--model') + 1] as string;
    const version = args[args.indexOf('--version') + 1] as string;
    expect(args[0]).toBe('worker');
    expect(worker.metadata.name).toBe(defaultDeploymentName({ model, version }));
    expect(worker.spec.replicas).toBeUndefined();
  });

  it('is ready only once warmed, and drains in its preStop hook, on the port the health server listens on', () => {
    const healthPort = Number(envOf(container, 'WORKER_HEALTH_PORT'));
    expect(healthPort).toBeGreaterThan(0);
    expect(container.readinessProbe?.httpGet?.path).toBe('/ready');
    expect(portOf(container, container.readinessProbe?.httpGet?.port)).toBe(healthPort);
    expect(container.lifecycle?.preStop?.httpGet?.path).toBe('/drain');
    expect(portOf(container, container.lifecycle?.preStop?.httpGet?.port)).toBe(healthPort);
    expect(container.livenessProbe?.httpGet?.path).toBe('/live');
    // A cold start (download, load, warm-up) gets minutes before liveness applies.
    const startup = container.startupProbe;
    expect((startup?.periodSeconds ?? 10) * (startup?.failureThreshold ?? 3)).toBeGreaterThanOrEqual(300);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(60);
    expect(envOf(container, 'EXECUTION_PROVIDERS')).toBe('cuda,cpu');
    expect(container.resources?.limits?.['nvidia.com/gpu']).toBe('1');
  });
});

describe('the scaler’s RBAC', () => {
  const roles = manifests.filter((m) => m.kind === 'Role');
  const role = only(roles, 'Role') as Manifest & {
    rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }>;
  };
  const scaler = only(byComponent('scaler'), 'scaler Deployment');

  it('grants exactly what the Kubernetes provider calls, on the worker Deployments only', () => {
    const source = readFileSync(path.join(ROOT, 'infra/pool/k8s-provider.ts'), 'utf8');
    const calls = new Set([...source.matchAll(/\b(?:apps|core)\.(\w+)\(/g)].map((m) => m[1] as string));
    // Each client method the provider calls → the RBAC it needs (a new call fails here until mapped).
    const NEEDS: Record<string, string> = {
      readNamespacedDeploymentScale: 'apps deployments/scale get',
      patchNamespacedDeploymentScale: 'apps deployments/scale patch',
      listNamespacedPod: ' pods list',
      patchNamespacedPod: ' pods patch',
    };
    for (const call of calls) expect(NEEDS[call], `RBAC for ${call}`).toBeDefined();
    const needed = [...calls].map((c) => NEEDS[c]).sort();
    const granted = role.rules
      .flatMap((r) => r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g} ${res} ${v}`))))
      .sort();
    expect(granted).toEqual(needed);
    const workers = byComponent('worker').map((w) => w.metadata.name);
    expect(role.rules.find((r) => r.resources.includes('deployments/scale'))?.resourceNames).toEqual(workers);
  });

  it('is bound to the scaler’s own service account in one namespace, and no other pod gets a token', () => {
    expect(manifests.filter((m) => /^Cluster/.test(m.kind))).toEqual([]);
    const binding = only(
      manifests.filter((m) => m.kind === 'RoleBinding'),
      'RoleBinding',
    ) as Manifest & { roleRef: Obj; subjects: Obj[] };
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role.metadata.name });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: scaler.spec.template.spec.serviceAccountName }]);
    for (const w of workloads.filter((x) => x !== scaler))
      expect(w.spec.template.spec.automountServiceAccountToken, w.metadata.name).toBe(false);
    const container = only(scaler.spec.template.spec.containers, 'scaler container');
    expect(envOf(container, 'POOL_PROVIDER')).toBe('kubernetes');
    expect(container.env?.find((e) => e.name === 'K8S_NAMESPACE')?.valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.namespace' } });
  });
});

describe('every pod', () => {
  const containers = workloads.flatMap((w) => w.spec.template.spec.containers.map((c) => [w, c] as const));

  it('runs as non-root without privilege escalation, dropping every capability', () => {
    for (const [w, c] of containers) {
      expect(w.spec.template.spec.securityContext?.runAsNonRoot, w.metadata.name).toBe(true);
      expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    }
  });

  it('sets only environment variables warmpool reads', () => {
    const known = knownVariables();
    const config = only(
      manifests.filter((m) => m.kind === 'ConfigMap'),
      'ConfigMap',
    ) as Manifest & { data: Record<string, string> };
    const names = [...Object.keys(config.data), ...containers.flatMap(([, c]) => (c.env ?? []).map((e) => e.name))];
    expect(names.filter((n) => !known.has(n))).toEqual([]);
  });

  it('runs the warmpool images with a role the CLI knows, the API on the port it is probed on', () => {
    const roles = containers.filter(([, c]) => c.image.startsWith('warmpool')).map(([, c]) => c.args?.[0]);
    expect(roles.sort()).toEqual(['api', 'dispatcher', 'scaler', 'worker']);
    const [, api] = containers.find(([, c]) => c.args?.[0] === 'api') ?? [];
    expect(portOf(api as Container, (api as Container).readinessProbe?.httpGet?.port)).toBe(Number(envOf(api as Container, 'PORT')));
    expect((api as Container).readinessProbe?.httpGet?.path).toBe('/v2/health/ready');
  });
});
