/**
 * `npm run package:aws` (scripts/package-aws.ts) packages serverless.yml offline — no AWS
 * credentials, no config files, a HOME of its own — and the CloudFormation it writes holds what
 * DESIGN §2/§8 promise: the API Lambda behind an HTTP API, the scaler's schedule, the GPU fleet
 * (launch template whose user data starts `warmpool worker`, the Auto Scaling group named as the
 * scaler looks for it, its warm pool of stopped hosts reused on scale-in, the launch and drain
 * lifecycle hooks the host agent completes), Redis, and IAM that grants each role only what its
 * code calls. The Lambda bundles are checked too: self-contained (they run from a folder with no
 * node_modules), without onnxruntime-node, and zipped alone.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultGroupName } from '../infra/pool/asg-provider.ts';
import { BUILD_DIR, packageService, RUNTIME_FILES, THREAD_ENTRIES } from '../scripts/package-aws.ts';
import { testServices } from './support/services.ts';

type Json = Record<string, unknown>;
interface Resource {
  Type: string;
  Condition?: string;
  Properties: Json;
}
interface Template {
  Parameters: Record<string, Json>;
  Conditions: Record<string, unknown>;
  Resources: Record<string, Resource>;
  Outputs: Record<string, Json>;
}
interface Statement {
  Sid?: string;
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: Json;
}

const ROOT = path.resolve(import.meta.dirname, '..');
const work = mkdtempSync(path.join(testServices().tmpDir, 'package-aws-'));
let plain: Template;
let bulk: Template;

/** An environment with no way to reach an AWS account: no credentials, no profiles, a fresh HOME. */
function offlineEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('AWS_')) env[k] = v;
  const home = mkdtempSync(path.join(work, 'home-'));
  return { ...env, HOME: home, AWS_CONFIG_FILE: path.join(home, 'none'), AWS_SHARED_CREDENTIALS_FILE: path.join(home, 'none') };
}

function readTemplate(dir: string): Template {
  return JSON.parse(readFileSync(path.join(dir, 'cloudformation-template-update-stack.json'), 'utf8')) as Template;
}

beforeAll(() => {
  // What CI runs: the npm script, no arguments but where to write.
  const out = path.join(work, 'plain');
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/package-aws.ts', '--', '--package', out], {
    cwd: ROOT,
    env: offlineEnv(),
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`package:aws failed:\n${run.stdout}\n${run.stderr}`);
  plain = readTemplate(out);
  // The same bundles, packaged with bulk buckets and an external Redis.
  const bulkOut = path.join(work, 'bulk');
  packageService(
    ['--package', bulkOut, '--stage', 'ci', '--param', 'bulkBuckets=bulk-in, bulk-out', '--param', 'redisUrl=redis://redis.internal:6379'],
    offlineEnv(),
  );
  bulk = readTemplate(bulkOut);
}, 180_000);

afterAll(() => rmSync(work, { recursive: true, force: true }));

const resource = (t: Template, id: string): Resource => {
  const r = t.Resources[id];
  if (!r) throw new Error(`no resource ${id} in the template`);
  return r;
};
const ofType = (t: Template, type: string) => Object.entries(t.Resources).filter(([, r]) => r.Type === type);
const asList = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

/** A condition's value with every parameter at its default (Fn::Equals, Fn::Not, Ref, literals). */
function evaluate(t: Template, expr: unknown): unknown {
  if (typeof expr !== 'object' || expr === null) return expr;
  const e = expr as Json;
  if ('Ref' in e) return t.Parameters[e.Ref as string]?.Default;
  if ('Fn::Equals' in e) {
    const [a, b] = e['Fn::Equals'] as [unknown, unknown];
    return evaluate(t, a) === evaluate(t, b);
  }
  if ('Fn::Not' in e) return !evaluate(t, (e['Fn::Not'] as unknown[])[0]);
  throw new Error(`cannot evaluate ${JSON.stringify(expr)}`);
}

/** The statements of a role's inline policies in effect with the parameters' defaults. */
function statements(t: Template, roleId: string): Statement[] {
  const role = resource(t, roleId);
  expect(role.Type).toBe('AWS::IAM::Role');
  const policies = (role.Properties.Policies ?? []) as Array<{ PolicyDocument: { Statement: unknown[] } }>;
  return policies.flatMap((p) =>
    p.PolicyDocument.Statement.flatMap((s) => {
      const branch = (s as Json)['Fn::If'] as [string, Statement, unknown] | undefined;
      if (!branch) return [s as Statement];
      return evaluate(t, t.Conditions[branch[0]]) ? [branch[1]] : [];
    }),
  );
}
const actionsOf = (t: Template, roleId: string) => new Set(statements(t, roleId).flatMap((s) => asList(s.Action)));
const statement = (t: Template, roleId: string, sid: string): Statement => {
  const s = statements(t, roleId).find((x) => x.Sid === sid);
  if (!s) throw new Error(`${roleId} has no statement ${sid}`);
  return s;
};

/** The user data script with CloudFormation's Fn::Sub variables replaced by sample values. */
function renderUserData(t: Template): string {
  const lt = resource(t, 'WorkerLaunchTemplate').Properties.LaunchTemplateData as Json;
  const join = ((lt.UserData as Json)['Fn::Base64'] as Json)['Fn::Join'] as [string, unknown[]];
  return join[1]
    .map((part) => {
      if (typeof part === 'string') return part;
      const [text] = (part as Json)['Fn::Sub'] as [string, Json];
      return text.replace(/\$\{([A-Za-z0-9:.]+)\}/g, (_, name: string) => `sample-${name.replace(/[:.]/g, '-')}`);
    })
    .join(join[0]);
}

/** File names in a zip archive, from its central directory (the end record says where it starts). */
function zipEntries(file: string): string[] {
  const buf = readFileSync(file);
  const end = buf.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  const count = buf.readUInt16LE(end + 10);
  const names: string[] = [];
  for (let n = 0, at = buf.readUInt32LE(end + 16); n < count; n++) {
    const nameLen = buf.readUInt16LE(at + 28);
    names.push(buf.toString('utf8', at + 46, at + 46 + nameLen));
    at += 46 + nameLen + buf.readUInt16LE(at + 30) + buf.readUInt16LE(at + 32);
  }
  return names;
}

describe('the API and the scaler on Lambda', () => {
  it('serves the API from one Lambda behind an HTTP API catch-all route', () => {
    const fn = resource(plain, 'ApiLambdaFunction').Properties;
    expect(fn.Handler).toBe('.build/aws/api/index.lambdaHandler');
    expect(fn.Runtime).toBe('nodejs20.x');
    expect(fn.Role).toEqual({ 'Fn::GetAtt': ['ApiRole', 'Arn'] });
    const vars = (fn.Environment as { Variables: Json }).Variables;
    expect(vars.API_KEYS).toBe('{{resolve:secretsmanager:warmpool/api-keys:SecretString}}');
    expect(ofType(plain, 'AWS::ApiGatewayV2::Api')).toHaveLength(1);
    const [, route] = ofType(plain, 'AWS::ApiGatewayV2::Route')[0] ?? [];
    expect(route?.Properties.RouteKey).toBe('$default');
    const [, integration] = ofType(plain, 'AWS::ApiGatewayV2::Integration')[0] ?? [];
    expect(JSON.stringify(integration?.Properties.IntegrationUri)).toContain('ApiLambdaFunction');
    expect(integration?.Properties.PayloadFormatVersion).toBe('2.0');
  });

  it('ticks the scaler on a schedule that agrees with SCALER_TICK_MS, one invocation at a time', () => {
    const fn = resource(plain, 'ScalerLambdaFunction').Properties;
    expect(fn.Handler).toBe('.build/aws/scaler/index.scalerLambdaHandler');
    expect(fn.ReservedConcurrentExecutions).toBe(1);
    const vars = (fn.Environment as { Variables: Json }).Variables;
    expect(vars.POOL_PROVIDER).toBe('aws');
    expect(vars.SCALER_TICK_MS).toBe('60000');
    const rules = ofType(plain, 'AWS::Events::Rule');
    expect(rules).toHaveLength(1);
    const rule = rules[0]?.[1].Properties ?? {};
    expect(rule.ScheduleExpression).toBe('rate(1 minute)');
    expect(JSON.stringify(rule.Targets)).toContain('ScalerLambdaFunction');
    const retry = ofType(plain, 'AWS::Lambda::EventInvokeConfig')[0]?.[1].Properties;
    expect(retry?.MaximumRetryAttempts).toBe(0);
  });

  it('zips each bundle alone, and the bundle runs from a folder with no node_modules', async () => {
    for (const fn of ['api', 'scaler']) {
      const besides = [
        ...(RUNTIME_FILES[fn] ?? []).map(([from, to]) => (from.endsWith('/assets') ? `.build/aws/${fn}/${to}/` : `.build/aws/${fn}/${to}`)),
        ...(THREAD_ENTRIES[fn] ?? []).map(([, file]) => `.build/aws/${fn}/${file}`),
      ];
      const entries = zipEntries(path.join(work, 'plain', `${fn}.zip`));
      expect(entries).toContain(`.build/aws/${fn}/index.mjs`);
      // The bundle, and the runtime files copied beside it: nothing else.
      expect(
        entries.filter((e) => e !== `.build/aws/${fn}/index.mjs` && !besides.some((b) => e === b || (b.endsWith('/') && e.startsWith(b)))),
      ).toEqual([]);
      const meta = JSON.parse(readFileSync(path.join(BUILD_DIR, `${fn}.meta.json`), 'utf8')) as { inputs: Json };
      const inputs = Object.keys(meta.inputs);
      expect(inputs).toContain(fn === 'api' ? 'api/lambda.ts' : 'infra/scaler/lambda.ts');
      expect(inputs.filter((i) => /onnxruntime|\.node$|@kubernetes\/client-node/.test(i))).toEqual([]);
    }
    // The function's folder as the zip holds it, somewhere no node_modules above can help.
    const alone = mkdtempSync(path.join(work, 'alone-'));
    cpSync(path.join(BUILD_DIR, 'api'), alone, { recursive: true });
    const { redisUrl, s3 } = testServices();
    const probe = [
      "const { lambdaHandler } = await import('./index.mjs');",
      'const event = (path) => ({',
      "  version: '2.0', routeKey: '$default', rawPath: path, rawQueryString: '', isBase64Encoded: false,",
      "  headers: { host: 'x', authorization: 'Bearer key-aaaaaaaaaaaaaaaa' },",
      "  requestContext: { http: { method: 'GET', path, protocol: 'HTTP/1.1', sourceIp: '203.0.113.1', userAgent: 't' },",
      "    stage: '$default', requestId: 'r', routeKey: '$default', accountId: '1', apiId: 'a', domainName: 'x', domainPrefix: 'x', time: '', timeEpoch: 0 },",
      '});',
      // The API's Redis connection fails fast while it connects: wait for readiness as a load balancer would.
      "for (let i = 0; i < 100 && (await lambdaHandler(event('/v2/health/ready'), {})).statusCode !== 200; i++) await new Promise((r) => setTimeout(r, 50));",
      "const res = await lambdaHandler(event('/v1/models'), {});",
      // The dashboard simulation's replay thread, bundled beside index.mjs, starts there alone.
      "const { Worker } = await import('node:worker_threads');",
      "const thread = new Worker(new URL('./sweep-thread.mjs', import.meta.url), { workerData: { trace: { series: { startMs: 0, perMinute: [] }, missing: [], rows: 0 } } });",
      "const ready = await new Promise((resolve, reject) => { thread.once('message', resolve); thread.once('error', reject); });",
      'await thread.terminate();',
      'process.stdout.write(JSON.stringify({ status: res.statusCode, body: JSON.parse(res.body), thread: ready.ready }));',
      'process.exit(0);',
    ].join('\n');
    writeFileSync(path.join(alone, 'probe.mjs'), probe);
    const run = spawnSync(process.execPath, ['probe.mjs'], {
      cwd: alone,
      encoding: 'utf8',
      env: {
        PATH: process.env.PATH,
        REDIS_URL: redisUrl,
        QUEUE_PREFIX: `bundle-${process.pid}`,
        S3_ENDPOINT: s3.endpoint,
        S3_BUCKET: s3.bucket,
        S3_PREFIX: `bundle-${process.pid}`,
        AWS_REGION: s3.region,
        AWS_ACCESS_KEY_ID: s3.accessKeyId,
        AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
        API_KEYS: 'tenant-a:key-aaaaaaaaaaaaaaaa',
        LOG_LEVEL: 'silent',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      },
    });
    expect(run.stderr).toBe('');
    expect(JSON.parse(run.stdout)).toEqual({ status: 200, body: { models: [] }, thread: true });
  });
});

describe('the GPU worker fleet', () => {
  it('names the group as the scaler expects, leaves its desired capacity to the scaler, and tags it for the scaler role', () => {
    const group = resource(plain, 'WorkerGroup');
    expect(group.Properties.AutoScalingGroupName).toBe(defaultGroupName({ model: 'demo-scorer', version: '1' }));
    expect(group.Properties.MinSize).toBe('0');
    expect(group.Properties.DesiredCapacity).toBeUndefined();
    expect(group.Properties.LaunchTemplate).toEqual({
      LaunchTemplateId: { Ref: 'WorkerLaunchTemplate' },
      Version: { 'Fn::GetAtt': ['WorkerLaunchTemplate', 'LatestVersionNumber'] },
    });
    expect(group.Properties.Tags).toContainEqual({ Key: 'warmpool:stack', Value: { Ref: 'AWS::StackName' }, PropagateAtLaunch: true });
  });

  it('keeps a warm pool of stopped hosts that scale-in returns hosts to', () => {
    const pools = ofType(plain, 'AWS::AutoScaling::WarmPool');
    expect(pools).toHaveLength(1);
    const pool = pools[0]?.[1].Properties ?? {};
    expect(pool.AutoScalingGroupName).toEqual({ Ref: 'WorkerGroup' });
    expect(pool.PoolState).toBe('Stopped');
    expect(pool.InstanceReusePolicy).toEqual({ ReuseOnScaleIn: true });
    expect(pool.MinSize).toBe(1);
  });

  it('has a launch hook and a drain hook, and the host agent completes exactly those', () => {
    const hooks = resource(plain, 'WorkerGroup').Properties.LifecycleHookSpecificationList as Json[];
    const byTransition = Object.fromEntries(hooks.map((h) => [h.LifecycleTransition, h]));
    expect(byTransition['autoscaling:EC2_INSTANCE_LAUNCHING']).toMatchObject({
      LifecycleHookName: 'warmpool-launch',
      DefaultResult: 'CONTINUE',
    });
    expect(byTransition['autoscaling:EC2_INSTANCE_TERMINATING']).toMatchObject({
      LifecycleHookName: 'warmpool-drain',
      HeartbeatTimeout: 360,
    });
    const userData = renderUserData(plain);
    expect(userData).toContain('LAUNCH_HOOK=warmpool-launch');
    expect(userData).toContain('DRAIN_HOOK=warmpool-drain');
    expect(userData).toContain('complete_hook "$DRAIN_HOOK" CONTINUE');
  });

  it('launches hosts whose user data installs the agent that starts `warmpool worker`, and is valid bash', () => {
    const lt = resource(plain, 'WorkerLaunchTemplate').Properties.LaunchTemplateData as Json;
    expect(lt.MetadataOptions).toMatchObject({ HttpTokens: 'required' });
    // The scaler joins heartbeats to instances through EC2's resource-based host names.
    expect(lt.PrivateDnsNameOptions).toEqual({ HostnameType: 'resource-name' });
    expect(lt.ImageId).toMatch(/^\{\{resolve:ssm:\/aws\/service\/deeplearning\/ami\/x86_64\//);
    expect(lt.IamInstanceProfile).toEqual({ Arn: { 'Fn::GetAtt': ['WorkerInstanceProfile', 'Arn'] } });
    const userData = renderUserData(plain);
    expect(userData.startsWith('#!/bin/bash\n')).toBe(true);
    // The agent runs `warmpool worker` through /usr/local/bin/warmpool, which runs the GPU image.
    expect(userData).toContain('"$WARMPOOL_BIN" worker --model "$WARMPOOL_MODEL" --version "$WARMPOOL_VERSION"');
    expect(userData).toContain('WARMPOOL_BIN=/usr/local/bin/warmpool');
    expect(userData).toMatch(/cat > \/usr\/local\/bin\/warmpool <<'EOF'\n[\s\S]*docker run [\s\S]*"\$WARMPOOL_IMAGE" "\$@"\nEOF\n/);
    expect(userData).toContain('WARMPOOL_MODEL=demo-scorer');
    expect(userData).toContain('EXECUTION_PROVIDERS=cuda,cpu');
    expect(userData).toContain('WARMPOOL_IMAGE=sample-ImageBase:0.1.0-gpu');
    expect(userData).toContain('systemctl enable --now warmpool-host.service');
    const file = path.join(work, 'user-data.sh');
    writeFileSync(file, userData);
    const check = spawnSync('bash', ['-n', file], { encoding: 'utf8' });
    expect(check.stderr).toBe('');
    expect(check.status).toBe(0);
  });
});

describe('least privilege', () => {
  const roles = (t: Template) => ofType(t, 'AWS::IAM::Role').map(([id]) => id);

  it('gives no role a wildcard action or a managed policy beyond Lambda’s VPC execution role', () => {
    for (const t of [plain, bulk]) {
      for (const id of roles(t)) {
        for (const s of statements(t, id)) {
          for (const a of asList(s.Action)) expect(a, `${id} ${s.Sid}`).not.toMatch(/\*/);
          expect(s.Effect).toBe('Allow');
        }
        const managed = (resource(t, id).Properties.ManagedPolicyArns ?? []) as unknown[];
        for (const arn of managed) expect(JSON.stringify(arn)).toContain('service-role/AWSLambdaVPCAccessExecutionRole');
      }
    }
  });

  it('lets "*" stand as a resource only for the actions that have no resource-level permissions', () => {
    for (const t of [plain, bulk]) {
      for (const id of roles(t)) {
        for (const s of statements(t, id).filter((x) => x.Resource === '*')) {
          expect(asList(s.Action)).toEqual([expect.stringMatching(/^(autoscaling:DescribeAutoScalingGroups|ecr:GetAuthorizationToken)$/)]);
        }
      }
    }
  });

  it('gives the workers S3 read on the model prefix, their image, their own lifecycle actions — and nothing else', () => {
    expect([...actionsOf(plain, 'WorkerRole')].sort()).toEqual([
      'autoscaling:CompleteLifecycleAction',
      'ecr:BatchCheckLayerAvailability',
      'ecr:BatchGetImage',
      'ecr:GetAuthorizationToken',
      'ecr:GetDownloadUrlForLayer',
      's3:GetObject',
      's3:ListBucket',
    ]);
    expect(statement(plain, 'WorkerRole', 'ReadModels').Resource).toEqual({
      // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation's ${…}, not JavaScript's
      'Fn::Sub': ['arn:${AWS::Partition}:s3:::${ModelBucket}/${Models}*', { Models: 'models/' }],
    });
    expect(statement(plain, 'WorkerRole', 'ListModels').Condition).toEqual({ StringLike: { 's3:prefix': ['models/*'] } });
    expect(JSON.stringify(statement(plain, 'WorkerRole', 'CompleteOwnLifecycleActions').Resource)).toContain(
      'autoScalingGroupName/warmpool-demo-scorer-1',
    );
    // With bulk buckets, the one addition is writing parts into them.
    const added = [...actionsOf(bulk, 'WorkerRole')].filter((a) => !actionsOf(plain, 'WorkerRole').has(a));
    expect(added).toEqual(['s3:PutObject']);
    expect(statement(bulk, 'WorkerRole', 'WriteBulkParts').Resource).toEqual([
      // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation's ${…}, not JavaScript's
      { 'Fn::Sub': 'arn:${AWS::Partition}:s3:::bulk-in/*' },
      // biome-ignore lint/suspicious/noTemplateCurlyInString: CloudFormation's ${…}, not JavaScript's
      { 'Fn::Sub': 'arn:${AWS::Partition}:s3:::bulk-out/*' },
    ]);
  });

  it('gives the scaler exactly the Auto Scaling calls its provider makes, on this stack’s groups only', () => {
    const source = readFileSync(path.join(ROOT, 'infra/pool/asg-provider.ts'), 'utf8');
    const sent = new Set([...source.matchAll(/client\.send\(\s*new (\w+)Command\(/g)].map((m) => `autoscaling:${m[1]}`));
    // The warm pool's own API serves the pool view (warmPool/configureWarmPool), not the controller.
    const notForTheController = ['autoscaling:DescribeWarmPool', 'autoscaling:PutWarmPool'];
    const expected = [...sent].filter((a) => !notForTheController.includes(a)).sort();
    expect(expected).toHaveLength(4);
    expect([...actionsOf(plain, 'ScalerRole')].sort()).toEqual(expected);
    const scale = statement(plain, 'ScalerRole', 'ScaleOwnGroups');
    expect(JSON.stringify(scale.Resource)).toContain(':autoScalingGroup:*:autoScalingGroupName/warmpool-*');
    expect(scale.Condition).toEqual({ StringEquals: { 'autoscaling:ResourceTag/warmpool:stack': { Ref: 'AWS::StackName' } } });
  });

  it('gives the API and the dispatcher no Auto Scaling and no writes outside the bulk buckets', () => {
    expect([...actionsOf(plain, 'ApiRole')].sort()).toEqual(['s3:GetObject', 's3:ListBucket']);
    expect([...actionsOf(bulk, 'ApiRole')].sort()).toEqual(['s3:GetObject', 's3:ListBucket']);
    expect([...actionsOf(plain, 'DispatcherTaskRole')].sort()).toEqual(['s3:GetObject', 's3:ListBucket']);
    const rw = statement(bulk, 'DispatcherTaskRole', 'ReadWriteBulkObjects');
    expect(asList(rw.Action).sort()).toEqual(['s3:GetObject', 's3:PutObject']);
    expect(rw.Resource).toEqual(statement(bulk, 'WorkerRole', 'WriteBulkParts').Resource);
  });
});

describe('Redis and the stack’s parameters', () => {
  it('creates ElastiCache with noeviction unless a REDIS_URL is given, and every role reads the same URL', () => {
    expect(plain.Conditions.CreateRedis).toEqual({ 'Fn::Equals': [{ Ref: 'RedisUrl' }, ''] });
    const cluster = resource(plain, 'RedisCluster');
    expect(cluster.Condition).toBe('CreateRedis');
    expect(resource(plain, 'RedisParameterGroup').Properties.Properties).toEqual({ 'maxmemory-policy': 'noeviction' });
    expect(plain.Parameters.RedisUrl).toMatchObject({ Default: '', NoEcho: true });
    expect(bulk.Parameters.RedisUrl?.Default).toBe('redis://redis.internal:6379');
    const url = (resource(plain, 'ApiLambdaFunction').Properties.Environment as { Variables: Json }).Variables.REDIS_URL;
    expect((url as Json)['Fn::If']).toBeDefined();
    const dispatcher = resource(plain, 'DispatcherTaskDefinition').Properties.ContainerDefinitions as Array<{ Environment: Json[] }>;
    expect(dispatcher[0]?.Environment).toContainEqual({ Name: 'REDIS_URL', Value: url });
  });

  it('makes the account-specific settings typed parameters, so a deploy without them fails naming them', () => {
    expect(plain.Parameters.VpcId).toMatchObject({ Type: 'AWS::EC2::VPC::Id' });
    expect(plain.Parameters.SubnetIds).toMatchObject({ Type: 'List<AWS::EC2::Subnet::Id>' });
    const bucket = plain.Parameters.ModelBucket as { AllowedPattern: string; Default: string };
    expect(new RegExp(bucket.AllowedPattern).test(bucket.Default)).toBe(false);
    expect(new RegExp(bucket.AllowedPattern).test('my-models')).toBe(true);
  });

  it('runs the dispatcher as one Fargate task from the CPU image', () => {
    const service = resource(plain, 'DispatcherService').Properties;
    expect(service).toMatchObject({ LaunchType: 'FARGATE', DesiredCount: 1 });
    const [container] = resource(plain, 'DispatcherTaskDefinition').Properties.ContainerDefinitions as Json[];
    expect(container?.Command).toEqual(['dispatcher']);
    expect(JSON.stringify(container?.Image)).toContain(':0.1.0');
  });
});
