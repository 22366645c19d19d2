/**
 * Issue 20: a tenant cannot force a canary rollback with failures it causes itself. On a real
 * stack (API, Redis, S3, one real worker process per version, ONNX Runtime on a Gather model) a
 * non-admin tenant pins jobs to the canary version that fail by its own doing — `timeoutMs: 1`
 * (expired before a worker takes them) and indices out of the model's range — beside honest
 * traffic on both versions. The canary guard (real, ticking on a ManualClock through the whole
 * sustain period) counts none of them: the canary's error rate stays 0 and its share stays.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CanaryGuard, createCanaryGuard, createOutcomeStore } from '../infra/canary/index.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { buildGatherModel } from '../scripts/fixtures/onnx-models.ts';
import { testServices } from './support/services.ts';
import { KEY_A, KEY_B, startStack, type TestStack } from './support/stack.ts';

const MODEL = 'lookup';
const HONEST = 60;
const ATTACK = 60;
const TICK_MS = 10_000;
/** Latency is left out of it (both versions' jobs waited for their workers to start): errors only. */
const policy = { windowMs: 120_000, minRequests: 50, sustainMs: 60_000, maxErrorRateDelta: 0.05, maxLatencyRatio: 1e6 };

let stack: TestStack;
const redis = createRedis(testServices().redisUrl);
let guard: CanaryGuard | undefined;

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300' });
  for (const version of ['1', '2']) await stack.registry.publish({ name: MODEL, version, bytes: buildGatherModel(), maxBatch: 16 });
  await stack.deployments.put({ model: MODEL, version: '1', min: 1, max: 2, standby: 0 });
  await stack.deployments.put({
    model: MODEL,
    min: 1,
    max: 2,
    standby: 0,
    versions: [
      { version: '1', weight: 50 },
      { version: '2', weight: 50 },
    ],
  });
}, 120_000);

afterAll(async () => {
  await guard?.close();
  await stack?.close();
  await closeRedis(redis);
});

async function submit(key: string, body: Record<string, unknown>): Promise<string> {
  const res = await stack.call(`/v1/models/${MODEL}/jobs`, { method: 'POST', body: JSON.stringify(body), key });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

const lookup = (index: number, extra: Record<string, unknown> = {}) => ({
  inputs: [{ name: 'idx', shape: [1, 1], datatype: 'INT64', data: [index] }],
  ...extra,
});

/**
 * Each request's final status and error code, by GET /v1/jobs/{id} with the key that submitted
 * it, polled in turn (the first waits for the workers; by then most others have ended). Counted
 * per request, not per BullMQ job: concurrent requests share queue entries.
 */
async function ended(ids: readonly string[], key: string): Promise<Array<{ status: string; code?: string }>> {
  const out: Array<{ status: string; code?: string }> = [];
  for (const id of ids) {
    for (;;) {
      const body = (await (await stack.call(`/v1/jobs/${id}`, { key })).json()) as { status: string; error?: { code: string } };
      if (['succeeded', 'failed', 'canceled'].includes(body.status)) {
        out.push(body.error ? { status: body.status, code: body.error.code } : { status: body.status });
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
  return out;
}

describe('canary fairness', () => {
  it('counts neither deadline expiries the caller chose nor indices out of range against the canary', async () => {
    // Queued before any worker runs, and not read until they ended: each timeoutMs: 1 job is
    // taken by the worker past its deadline and failed there (deadline_exceeded), as in the attack.
    const late = await Promise.all(Array.from({ length: ATTACK }, (_, i) => submit(KEY_B, lookup(i % 8, { version: '2', timeoutMs: 1 }))));
    const outOfRange = await Promise.all(Array.from({ length: ATTACK }, (_, i) => submit(KEY_B, lookup(100 + i, { version: '2' }))));
    const honest = (version: string) => Promise.all(Array.from({ length: HONEST }, (_, i) => submit(KEY_A, lookup(i % 8, { version }))));
    const honest1 = await honest('1');
    const honest2 = await honest('2');
    await stack.startWorker(MODEL, '1');
    await stack.startWorker(MODEL, '2');
    const succeeded = Array<{ status: string }>(HONEST).fill({ status: 'succeeded' });
    expect(await ended(honest1, KEY_A)).toEqual(succeeded);
    expect(await ended(honest2, KEY_A)).toEqual(succeeded);
    expect(await ended(late, KEY_B)).toEqual(Array(ATTACK).fill({ status: 'failed', code: 'deadline_exceeded' }));
    expect(await ended(outOfRange, KEY_B)).toEqual(Array(ATTACK).fill({ status: 'failed', code: 'invalid_input' }));

    const clock = new ManualClock(Date.now());
    guard = createCanaryGuard({
      redis,
      prefix: stack.config.queuePrefix,
      deployments: stack.deployments,
      clock,
      log: silentLog,
      policy,
      tickMs: TICK_MS,
    });
    // Every tick through the sustain period and past it: a counted breach would have rolled back.
    for (let t = 0; t <= policy.sustainMs + 2 * TICK_MS; t += TICK_MS) {
      if (t > 0) await clock.advance(TICK_MS);
      await guard.tick();
    }
    const outcomes = createOutcomeStore({ redis, prefix: stack.config.queuePrefix, windowMs: policy.windowMs });
    expect(await outcomes.window(MODEL, '2', clock.now())).toMatchObject({ requests: HONEST, failures: 0, errorRate: 0 });
    expect(await outcomes.window(MODEL, '1', clock.now())).toMatchObject({ requests: HONEST, failures: 0, errorRate: 0 });
    expect((await stack.deployments.get(MODEL))?.versions).toEqual([
      { version: '1', weight: 50 },
      { version: '2', weight: 50 },
    ]);
  }, 180_000);
});
