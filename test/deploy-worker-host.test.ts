/**
 * The GPU host's lifecycle agent (deploy/aws/worker-host.sh, installed by the launch template's
 * user data), run as bash runs it on EC2. What it talks to cannot exist here, so each is the
 * smallest honest stand-in at its boundary: the instance metadata service (IMDSv2, tokens
 * required) as an HTTP server in this test, the `aws` and `docker` commands as scripts that record
 * their arguments, and `warmpool` as a process that answers its health port's /ready once
 * "warmed" and exits 0 on SIGTERM like the real worker's drain. Shown: a host launched into the
 * warm pool prepares the worker in standby, stops it and completes the launch hook; a host in
 * service completes the launch hook once ready, restarts a worker that crashed, and on scale-in
 * drains before completing the drain hook.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { testServices } from './support/services.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const INSTANCE = 'i-0123456789abcdef0';
const dir = mkdtempSync(path.join(testServices().tmpDir, 'worker-host-'));
const events = path.join(dir, 'events.log');
let target = 'InService';
let imds: http.Server;
let imdsUrl: string;
let agent: ChildProcess | undefined;

const FAKE_WARMPOOL = `#!/usr/bin/env node
import fs from 'node:fs';
import http from 'node:http';
const log = (line) => fs.appendFileSync(process.env.EVENTS, line + '\\n');
log('start ' + process.env.WARMPOOL_START_AS + ' ' + process.argv.slice(2).join(' '));
let ready = false;
setTimeout(() => { ready = true; }, 150);
const server = http.createServer((req, res) => { res.writeHead(req.url === '/ready' && ready ? 200 : 503); res.end(); });
server.listen(Number(process.env.WORKER_HEALTH_PORT), '127.0.0.1');
// CRASH_ONCE: once in service (the launch hook completed), die the way a lost engine does: exit 1.
if (process.env.CRASH_ONCE && !fs.existsSync(process.env.EVENTS + '.crashed')) {
  setInterval(() => {
    if (!fs.readFileSync(process.env.EVENTS, 'utf8').includes('warmpool-launch')) return;
    fs.writeFileSync(process.env.EVENTS + '.crashed', '');
    log('crashed');
    process.exit(1);
  }, 50);
}
process.on('SIGTERM', () => { log('drained'); server.close(); process.exit(0); });
`;

function script(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  chmodSync(file, 0o755);
  return file;
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

beforeAll(async () => {
  imds = http.createServer((req, res) => {
    if (req.method === 'PUT' && req.url === '/latest/api/token') return void res.end('token-1');
    if (req.headers['x-aws-ec2-metadata-token'] !== 'token-1') return void res.writeHead(401).end();
    if (req.url === '/latest/meta-data/instance-id') return void res.end(INSTANCE);
    if (req.url === '/latest/meta-data/autoscaling/target-lifecycle-state') return void res.end(target);
    res.writeHead(404).end();
  });
  await new Promise<void>((r) => imds.listen(0, '127.0.0.1', r));
  imdsUrl = `http://127.0.0.1:${(imds.address() as AddressInfo).port}`;
  script('aws', '#!/bin/bash\necho "aws $*" >> "$EVENTS"\n');
  // `docker image inspect` finds the image; `docker stop` fails, so the agent signals the worker itself.
  script('docker', '#!/bin/bash\n[ "$1 $2" = "image inspect" ] && exit 0\nexit 1\n');
  script('warmpool.mjs', FAKE_WARMPOOL);
});

afterEach(() => {
  if (agent && agent.exitCode === null) agent.kill('SIGKILL');
  rmSync(events, { force: true });
  rmSync(`${events}.crashed`, { force: true });
});

afterAll(async () => {
  await new Promise((r) => imds.close(r));
  rmSync(dir, { recursive: true, force: true });
});

async function startAgent(extra: Record<string, string> = {}): Promise<ChildProcess> {
  const port = await freePort();
  const hostEnv = path.join(dir, 'host.env');
  writeFileSync(
    hostEnv,
    [
      'WARMPOOL_GROUP=warmpool-m-1',
      'WARMPOOL_MODEL=m',
      'WARMPOOL_VERSION=1',
      'WARMPOOL_IMAGE=123456789012.dkr.ecr.us-east-1.amazonaws.com/warmpool:0.1.0-gpu',
      'LAUNCH_HOOK=warmpool-launch',
      'DRAIN_HOOK=warmpool-drain',
      'DRAIN_TIMEOUT_S=30',
      `HEALTH_PORT=${port}`,
      'AWS_REGION=us-east-1',
      '',
    ].join('\n'),
  );
  writeFileSync(events, '');
  agent = spawn('bash', [path.join(ROOT, 'deploy/aws/worker-host.sh')], {
    env: {
      PATH: `${dir}:${process.env.PATH}`,
      EVENTS: events,
      WARMPOOL_HOST_ENV: hostEnv,
      IMDS_URL: imdsUrl,
      POLL_S: '0.2',
      WARMPOOL_BIN: path.join(dir, 'warmpool.mjs'),
      // What /etc/warmpool/worker.env gives the real worker through `docker run --env-file`.
      WORKER_HEALTH_PORT: String(port),
      ...extra,
    },
    stdio: 'ignore',
  });
  return agent;
}

const lines = () => (existsSync(events) ? readFileSync(events, 'utf8').trim().split('\n').filter(Boolean) : []);
const complete = (hook: string) =>
  `aws autoscaling complete-lifecycle-action --region us-east-1 --auto-scaling-group-name warmpool-m-1 --lifecycle-hook-name ${hook} --instance-id ${INSTANCE} --lifecycle-action-result CONTINUE`;

async function until(what: string, check: () => boolean): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}; events: ${JSON.stringify(lines())}`);
}

const exited = (p: ChildProcess) =>
  new Promise<number | null>((resolve) => (p.exitCode !== null ? resolve(p.exitCode) : p.once('exit', (code) => resolve(code))));

it('prepares a host launched into the warm pool: warm in standby, stop, complete the launch hook', async () => {
  target = 'Warmed:Pending:Wait';
  const p = await startAgent();
  expect(await exited(p)).toBe(0);
  expect(lines()).toEqual(['start standby worker --model m --version 1', 'drained', complete('warmpool-launch')]);
});

it('serves in service: launch hook once ready, a crashed worker restarted, drain before the drain hook on scale-in', async () => {
  target = 'InService';
  const p = await startAgent({ CRASH_ONCE: '1' });
  await until('the launch hook', () => lines().includes(complete('warmpool-launch')));
  await until('the restart after a crash', () => lines().filter((l) => l.startsWith('start active')).length === 2);
  target = 'Terminated';
  expect(await exited(p)).toBe(0);
  expect(lines()).toEqual([
    'start active worker --model m --version 1',
    complete('warmpool-launch'),
    'crashed',
    'start active worker --model m --version 1',
    'drained',
    complete('warmpool-drain'),
  ]);
});
