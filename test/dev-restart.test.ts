/**
 * `warmpool dev` across restarts, against real `warmpool dev` processes (their own redis-server,
 * S3 server, scaler and workers, in a folder of their own): what a user made (a job, the webhook
 * signing secret, a deployment changed from the dashboard) is there after Ctrl-C and a restart,
 * and the demo's start-up deploy does not undo the change; `--fresh` starts clean. One stack per
 * folder: a second `warmpool dev` refuses, naming the running one, and leaves dev.env alone; a
 * stack killed without stopping is taken over, and what it left running is stopped.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isRunning } from '../scripts/dev/dev-lock.ts';
import { type DevChild, devEnv, devFolder, killDev, leftovers, processesInGroup, readLock, spawnDev } from './support/dev-child.ts';
import { until } from './support/until.ts';

const DEMO = 'demo-scorer';
const ROW = Array.from({ length: 64 }, (_, i) => Math.cos(i) / 2);

describe('warmpool dev across restarts', () => {
  let dev: DevChild | undefined;
  let redisPid: number | undefined;

  afterEach(() => {
    killDev(dev, redisPid);
    dev = undefined;
  });

  const start = async (cwd: string, env: NodeJS.ProcessEnv, args: string[] = []) => {
    dev = spawnDev(cwd, env, args);
    const [, url] = await dev.waitFor(/warmpool is up: (\S+)/);
    redisPid = readLock(cwd).redis?.pid;
    return { url: url as string, key: readFileSync(path.join(cwd, '.warmpool', 'dev-key'), 'utf8').trim() };
  };

  /** Ctrl-C, as the terminal sends it: SIGINT to the whole process group. */
  const stop = async () => {
    const running = dev as DevChild;
    process.kill(-running.pid, 'SIGINT');
    expect(await running.exited).toEqual({ code: 0, signal: null });
    expect(leftovers(running, redisPid)).toEqual([]);
    dev = undefined;
  };

  const client = (url: string, key: string) => async (method: string, route: string, body?: unknown) => {
    const res = await fetch(`${url}${route}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  it('finds the job, the same webhook secret and the deployment as changed after a restart; --fresh starts clean', async () => {
    const cwd = devFolder('dev-restart');
    // What a stack killed with SIGKILL leaves: a lock naming a process that is gone.
    mkdirSync(path.join(cwd, '.warmpool'));
    const gone = spawnSync(process.execPath, ['-e', '']).pid as number;
    writeFileSync(path.join(cwd, '.warmpool', 'dev.lock'), JSON.stringify({ pid: gone, startedAt: new Date().toISOString() }));
    const env = await devEnv();

    const first = await start(cwd, env);
    let api = client(first.url, first.key);
    const secret = (await api('GET', '/v1/webhooks/secret')).body.secret;
    expect(secret).toMatch(/^whsec_/);
    const submitted = await api('POST', `/v1/models/${DEMO}/jobs`, {
      inputs: [{ name: 'features', shape: [1, 64], datatype: 'FP32', data: ROW }],
    });
    expect(submitted.status).toBe(202);
    const jobId = submitted.body.id as string;
    const done = await until('the job to succeed', async () => {
      const job = await api('GET', `/v1/jobs/${jobId}`);
      return job.body.status === 'succeeded' ? job.body : undefined;
    });
    // What the dashboard's standby field does.
    const changed = await api('PUT', `/v1/deployments/${DEMO}`, { standby: 0, max: 2 });
    expect(changed.body).toMatchObject({ standby: 0, max: 2, revision: 2 });
    expect(dev?.output()).toContain(`dashboard: ${first.url}/dashboard`);
    const devEnvFile = path.join(cwd, '.warmpool', 'dev.env');
    const settings = readFileSync(devEnvFile, 'utf8');
    expect(settings).toContain(`WARMPOOL_URL=${first.url}\n`);
    expect(settings).toContain(`DASHBOARD_URL=${first.url}/dashboard\n`);
    expect(settings).toContain('WEBHOOK_ALLOWED_PRIVATE_HOSTS=127.0.0.1,localhost,::1\n');
    expect(settings).toMatch(/^REDIS_URL=redis:\/\/127\.0\.0\.1:\d+$/m);
    expect(settings).not.toMatch(/^PORT=/m);

    // A second stack in the same folder refuses at once, before it starts anything or writes dev.env.
    const second = spawnDev(cwd, await devEnv());
    expect(await second.exited).toEqual({ code: 2, signal: null });
    expect(second.output()).toContain(`a warmpool dev is running at ${first.url} (pid ${dev?.pid}) in this folder`);
    expect(second.output()).not.toMatch(/^redis /m);
    expect(readFileSync(devEnvFile, 'utf8')).toBe(settings);
    expect(readLock(cwd).pid).toBe(dev?.pid);

    await stop();
    const again = await start(cwd, env);
    expect(again.url).toBe(first.url);
    api = client(again.url, again.key);
    expect((await api('GET', '/v1/webhooks/secret')).body.secret).toBe(secret);
    expect((await api('GET', `/v1/jobs/${jobId}`)).body).toEqual(done);
    expect((await api('GET', `/v1/deployments/${DEMO}`)).body).toMatchObject({ standby: 0, max: 2, revision: 2 });
    expect(dev?.output()).not.toContain(`deployed ${DEMO}`);
    await stop();

    const fresh = await start(cwd, env, ['--fresh']);
    expect(dev?.output()).toContain('--fresh: removed');
    expect(fresh.key).toBe(first.key);
    api = client(fresh.url, fresh.key);
    expect((await api('GET', `/v1/jobs/${jobId}`)).status).toBe(404);
    expect((await api('GET', '/v1/webhooks/secret')).body.secret).not.toBe(secret);
    expect((await api('GET', `/v1/deployments/${DEMO}`)).body).toMatchObject({ standby: 1, max: 3, revision: 1 });
    await stop();
  }, 600_000);

  it('takes over from a stack killed without stopping, stopping the redis-server and workers it left running', async () => {
    const cwd = devFolder('dev-takeover');
    const env = await devEnv();
    await start(cwd, env);
    const killed = dev as DevChild;
    const orphanRedis = redisPid as number;
    const workers = processesInGroup(killed.pid).filter((p) => /\bworker\b/.test(p.command));
    expect(workers.length).toBeGreaterThan(0);
    process.kill(killed.pid, 'SIGKILL');
    await killed.exited;
    // What SIGKILL leaves: the server in its own group, the workers in the dead stack's.
    expect(isRunning(orphanRedis, /redis-server/)).toBe(true);
    expect(workers.every((w) => isRunning(w.pid, /worker/))).toBe(true);

    await start(cwd, env);
    expect(dev?.output()).toContain(
      `stopped what the previous warmpool dev (pid ${killed.pid}) left running: its redis-server (pid ${orphanRedis})`,
    );
    expect(isRunning(orphanRedis, /redis-server/)).toBe(false);
    expect(processesInGroup(killed.pid)).toEqual([]);
    expect(readLock(cwd).pid).toBe(dev?.pid);
    await stop();
  }, 300_000);
});
