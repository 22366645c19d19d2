import { afterAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../infra/kernel/clock.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../../infra/redis/client.ts';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { createWebhookSecrets } from './secrets.ts';

describe('createWebhookSecrets', () => {
  const redis = createRedis(testServices().redisUrl);
  const prefix = uniqueId('sec');

  afterAll(async () => {
    for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
    await closeRedis(redis);
  });

  it('creates one secret per tenant on first use, the same for concurrent first uses', async () => {
    const secrets = createWebhookSecrets(redis, prefix, new ManualClock(0));
    const [a, b] = await Promise.all([secrets.getOrCreate('t1'), secrets.getOrCreate('t1')]);
    expect(a?.secret).toMatch(/^whsec_/);
    expect(b).toEqual(a);
    expect((await secrets.getOrCreate('t2')).secret).not.toBe(a?.secret);
  });

  it('signs with both secrets during the overlap after a rotation, then with the new one only', async () => {
    const clock = new ManualClock(1_000);
    const secrets = createWebhookSecrets(redis, prefix, clock);
    const before = await secrets.getOrCreate('t3');
    const rotated = await secrets.rotate('t3', 60_000);
    expect(rotated.secret).not.toBe(before.secret);
    expect(rotated.previous).toEqual({ secret: before.secret, expiresAt: 61_000 });
    expect(await secrets.activeSecrets('t3', clock.now())).toEqual([rotated.secret, before.secret]);
    await clock.advance(60_000);
    expect(await secrets.activeSecrets('t3', clock.now())).toEqual([rotated.secret]);
    expect((await secrets.getOrCreate('t3')).previous).toBeUndefined();
  });

  it('revokes the previous secret at once: only the current one signs, and revoking again changes nothing', async () => {
    const clock = new ManualClock(1_000);
    const secrets = createWebhookSecrets(redis, prefix, clock);
    await secrets.getOrCreate('t5');
    const rotated = await secrets.rotate('t5', 86_400_000);
    expect(await secrets.activeSecrets('t5', clock.now())).toHaveLength(2);
    expect(await secrets.revokePrevious('t5')).toEqual({ secret: rotated.secret });
    expect(await secrets.activeSecrets('t5', clock.now())).toEqual([rotated.secret]);
    expect(await secrets.revokePrevious('t5')).toEqual({ secret: rotated.secret });
    expect(await secrets.revokePrevious('t6')).toEqual({ secret: expect.stringMatching(/^whsec_/) });
  });

  it('keeps the newest previous secret when rotated twice', async () => {
    const clock = new ManualClock(0);
    const secrets = createWebhookSecrets(redis, prefix, clock);
    await secrets.getOrCreate('t4');
    const first = await secrets.rotate('t4', 1_000);
    const second = await secrets.rotate('t4', 1_000);
    expect(second.previous?.secret).toBe(first.secret);
  });
});
