/**
 * IntakeSupervisor on a real Redis and real BullMQ: an intake that cannot take jobs (its
 * connection points at a port nothing listens on, standing in for BullMQ wedged in a reconnect)
 * is replaced once jobs wait beside it, and the replacement drains the queue; standby and
 * activate stop and restart taking jobs.
 */
import { Queue, Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { queueName } from '../infra/contracts/job.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import type { QueueJobData, QueueJobResult } from '../infra/contracts/queue-job.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, deleteMany, type RedisClient, scanKeys } from '../infra/redis/client.ts';
import { freePort } from '../scripts/dev/free-port.ts';
import { gated, type IntakeGate } from '../worker/intake.ts';
import { IntakeSupervisor } from '../worker/intake-supervisor.ts';
import { testServices, uniqueId } from './support/services.ts';

const manifest = { name: 'sup', version: '1' } as ModelManifest;
const NAME = queueName(manifest.name, manifest.version);

let redis: RedisClient;
const prefixes: string[] = [];
const closers: Array<() => Promise<unknown>> = [];

beforeAll(() => {
  redis = createRedis(testServices().redisUrl);
});

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
  for (const p of prefixes.splice(0)) for await (const keys of scanKeys(redis, `${p}:*`)) await deleteMany(redis, keys);
});

afterAll(async () => {
  await closeRedis(redis);
});

async function fill(prefix: string, count: number): Promise<void> {
  const queue = new Queue(NAME, { connection: redis, prefix });
  await queue.addBulk(Array.from({ length: count }, (_, i) => ({ name: 'entry', data: { i } as unknown as QueueJobData })));
  await queue.close();
}

/** A supervisor over `build`'s intakes for the queue under `prefix`, closed after the test. */
function supervise(
  prefix: string,
  concurrency: number,
  build: (connection: RedisClient, gate: IntakeGate) => Worker<QueueJobData, QueueJobResult>,
): IntakeSupervisor {
  const supervisor = new IntakeSupervisor({
    redis,
    clock: systemClock,
    log: silentLog,
    prefix,
    manifest,
    concurrency,
    stallMs: 600,
    serving: () => true,
    build,
  });
  closers.push(() => supervisor.close());
  return supervisor;
}

async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('IntakeSupervisor', () => {
  it('replaces an intake that takes no job while jobs wait, and the replacement drains the queue', async () => {
    const prefix = uniqueId('sup');
    prefixes.push(prefix);
    await fill(prefix, 20);
    const dead = createRedis(`redis://127.0.0.1:${await freePort()}`);
    closers.push(async () => dead.disconnect());
    let done = 0;
    const connections: RedisClient[] = [];
    const supervisor = supervise(prefix, 4, (connection) => {
      connections.push(connection);
      // The first intake gets a connection that never connects: it can take nothing.
      return new Worker<QueueJobData, QueueJobResult>(
        NAME,
        async () => {
          done++;
          return {} as QueueJobResult;
        },
        { connection: connections.length === 1 ? dead : connection, prefix, autorun: false, concurrency: 4 },
      );
    });
    await supervisor.activate();
    await until('the queue drained by a replacement intake', () => done === 20);
    const d = await supervisor.diagnostics();
    expect(d.replacements).toBeGreaterThanOrEqual(1);
    // Each build got a connection of its own, never the shared client (BullMQ's scripts stay off it).
    expect(connections[0]).not.toBe(redis);
    expect(connections[1]).not.toBe(redis);
    expect(connections[1]).not.toBe(connections[0]);
  }, 60_000);

  it('takes no job in standby, and takes them again once activated; a healthy idle intake is left alone', async () => {
    const prefix = uniqueId('sup');
    prefixes.push(prefix);
    let done = 0;
    const supervisor = supervise(
      prefix,
      2,
      (connection, gate) =>
        new Worker<QueueJobData, QueueJobResult>(
          NAME,
          gated(gate, systemClock, async () => {
            done++;
            return {} as QueueJobResult;
          }),
          { connection, prefix, autorun: false, concurrency: 2 },
        ),
    );
    await supervisor.activate();
    await fill(prefix, 5);
    await until('the first jobs', () => done === 5);
    await supervisor.standby();
    await fill(prefix, 5);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(done).toBe(5);
    await supervisor.activate();
    await until('the jobs sent during standby', () => done === 10);
    // Idle beside an empty queue for longer than stallMs: nothing to replace.
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await supervisor.diagnostics()).replacements).toBe(0);
    expect(supervisor.jobsHeld).toBe(0);
  }, 60_000);

  it('a job whose lock was lost while it ran holds nothing after its processor ends: standby still ends', async () => {
    // Under load a job's lock can expire while it runs (another worker takes it again). BullMQ then
    // emits neither completed nor failed for it, only error; the count must not keep it forever.
    const prefix = uniqueId('sup');
    prefixes.push(prefix);
    let ran = 0;
    const errors: unknown[] = [];
    const supervisor = supervise(prefix, 2, (connection, gate) => {
      const worker = new Worker<QueueJobData, QueueJobResult>(
        NAME,
        gated(gate, systemClock, async (job) => {
          await redis.del(`${prefix}:${NAME}:${job.id}:lock`);
          ran++;
          return {} as QueueJobResult;
        }),
        { connection, prefix, autorun: false, concurrency: 2 },
      );
      worker.on('error', (err) => errors.push(err));
      return worker;
    });
    await supervisor.activate();
    await fill(prefix, 3);
    await until('the jobs ran and BullMQ reported their lost locks', () => ran === 3 && errors.length >= 3);
    expect(supervisor.jobsHeld).toBe(0);
    await supervisor.standby();
    expect((await supervisor.diagnostics()).jobsHeld).toBe(0);
  }, 60_000);
});
