/**
 * The local pool keeps max(min, 1) worker processes per deployment, splits them across the
 * versions that take traffic, restarts crashed ones, rolls to a new version only once the old
 * version's queue is empty, retires removed deployments, and leaves no process behind on close(). The "worker" here is a tiny real
 * process that records its argv and obeys SIGTERM, so the test is about the pool alone.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { systemClock } from '../infra/clock.ts';
import type { VersionWeight } from '../infra/deployments.ts';
import { createLogger } from '../infra/log.ts';
import { createLocalPool, workersFor, type LocalPool, type PoolDeployment } from '../infra/pool/local-pool.ts';
import { testServices } from './support/services.ts';

const dir = mkdtempSync(path.join(testServices().tmpDir, 'pool-'));
const fakeWorker = path.join(dir, 'fake-worker.mjs');
writeFileSync(fakeWorker, "process.on('SIGTERM', () => process.exit(0)); setInterval(() => {}, 1000);\n");

let pool: LocalPool | undefined;
afterEach(async () => {
  await pool?.close();
});

function deployment(model: string, version: string, min: number): PoolDeployment {
  return split(model, [{ version, weight: 100 }], min);
}

function split(model: string, versions: VersionWeight[], min: number): PoolDeployment {
  return { model, versions, min };
}

function versionsOf(model: string): string[] {
  return pool!
    .snapshot()
    .filter((c) => c.model === model)
    .map((c) => c.version)
    .sort();
}

function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

it('keeps min workers per deployment, restarts crashes, rolls versions after the old queue drains', async () => {
  let deployments = [deployment('a', '1', 2), deployment('b', '1', 0)];
  const depth = new Map<string, number>([['a@1', 3]]);
  pool = createLocalPool({
    command: [process.execPath, fakeWorker],
    env: process.env,
    deployments: { list: async () => deployments },
    queueDepth: async (m, v) => depth.get(`${m}@${v}`) ?? 0,
    clock: systemClock,
    log: createLogger('silent'),
    stdio: 'ignore',
  });

  await pool.reconcile();
  const first = pool.snapshot();
  expect(first.filter((c) => c.model === 'a')).toHaveLength(2);
  expect(first.filter((c) => c.model === 'b')).toHaveLength(1); // min 0 still gets one in dev

  // A crashed worker is replaced.
  const victim = first.find((c) => c.model === 'a')!;
  process.kill(victim.pid!, 'SIGKILL');
  await until(() => !pool!.snapshot().some((c) => c.pid === victim.pid));
  await until(() => !alive(victim.pid));
  await new Promise((r) => setTimeout(r, 600)); // past the first crash back-off
  await pool.reconcile();
  expect(pool.snapshot().filter((c) => c.model === 'a')).toHaveLength(2);

  // New version: new workers start, old ones stay while their queue still holds jobs.
  deployments = [deployment('a', '2', 2), deployment('b', '1', 0)];
  await pool.reconcile();
  const oldPids = pool
    .snapshot()
    .filter((c) => c.model === 'a' && c.version === '1')
    .map((c) => c.pid);
  expect(oldPids).toHaveLength(2);
  expect(pool.snapshot().filter((c) => c.model === 'a' && c.version === '2')).toHaveLength(2);

  depth.set('a@1', 0);
  await pool.reconcile();
  expect(
    pool
      .snapshot()
      .filter((c) => c.model === 'a')
      .map((c) => c.version),
  ).toEqual(['2', '2']);
  await until(() => oldPids.every((pid) => !alive(pid)));

  // A removed deployment's workers are retired.
  deployments = [deployment('a', '2', 2)];
  await pool.reconcile();
  expect(pool.snapshot().some((c) => c.model === 'b')).toBe(false);

  const pids = pool.snapshot().map((c) => c.pid);
  await pool.close();
  await pool.close();
  expect(pids.every((pid) => !alive(pid))).toBe(true);
  expect(pool.snapshot()).toEqual([]);
});

it('keeps workers for every version with traffic, and for a version at 0% while its queue holds jobs', async () => {
  let deployments = [
    split(
      'c',
      [
        { version: '1', weight: 90 },
        { version: '2', weight: 10 },
      ],
      2,
    ),
  ];
  const depth = new Map<string, number>();
  pool = createLocalPool({
    command: [process.execPath, fakeWorker],
    env: process.env,
    deployments: { list: async () => deployments },
    queueDepth: async (m, v) => depth.get(`${m}@${v}`) ?? 0,
    clock: systemClock,
    log: createLogger('silent'),
    stdio: 'ignore',
  });

  await pool.reconcile();
  expect(versionsOf('c')).toEqual(['1', '1', '2']); // 90% of min 2 → 2, 10% → at least 1

  // The canary's share goes to 0 while jobs wait for it: its worker stays until they are done.
  depth.set('c@2', 4);
  deployments = [
    split(
      'c',
      [
        { version: '1', weight: 100 },
        { version: '2', weight: 0 },
      ],
      2,
    ),
  ];
  await pool.reconcile();
  expect(versionsOf('c')).toEqual(['1', '1', '2']);
  depth.set('c@2', 0);
  await pool.reconcile();
  expect(versionsOf('c')).toEqual(['1', '1']);

  // Jobs queued for a 0% version with no worker (say, accepted just before the change) get one.
  depth.set('c@2', 1);
  await pool.reconcile();
  expect(versionsOf('c')).toEqual(['1', '1', '2']);
  depth.set('c@2', 0);
  await pool.reconcile();
  expect(versionsOf('c')).toEqual(['1', '1']);
});

it('gives each version its share of min, rounded up, at least one', () => {
  expect(workersFor(0, 100)).toBe(1);
  expect(workersFor(3, 100)).toBe(3);
  expect(workersFor(4, 50)).toBe(2);
  expect(workersFor(5, 50)).toBe(3);
  expect(workersFor(10, 1)).toBe(1);
});
