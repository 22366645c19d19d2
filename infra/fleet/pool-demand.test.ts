/** The demand doorbell's throttle and its message, on a fake clock and a recording publisher. */
import { describe, expect, it } from 'vitest';
import { createDemandBell, parseRing } from './pool-demand.ts';

function bell(minIntervalMs?: number) {
  const sent: Array<{ channel: string; ring: unknown }> = [];
  let now = 10_000;
  const publish = async (channel: string, message: string) => {
    sent.push({ channel, ring: JSON.parse(message) });
  };
  const b = createDemandBell({ publish }, 'wp', { now: () => now }, minIntervalMs === undefined ? {} : { minIntervalMs });
  return { sent, b, at: (ms: number) => (now = ms) };
}

describe('demand bell', () => {
  it('rings once per model version per second, on its pool channel', () => {
    const { sent, b, at } = bell();
    for (let i = 0; i < 50; i++) b.ring('tail', 'm', '1');
    b.ring('tail', 'm', '2');
    b.ring('other', 'm', '1');
    at(10_999);
    b.ring('tail', 'm', '1');
    at(11_000);
    b.ring('tail', 'm', '1');
    expect(sent).toEqual([
      { channel: 'wp:pool-demand:tail', ring: { pool: 'tail', model: 'm', version: '1', at: 10_000 } },
      { channel: 'wp:pool-demand:tail', ring: { pool: 'tail', model: 'm', version: '2', at: 10_000 } },
      { channel: 'wp:pool-demand:other', ring: { pool: 'other', model: 'm', version: '1', at: 10_000 } },
      { channel: 'wp:pool-demand:tail', ring: { pool: 'tail', model: 'm', version: '1', at: 11_000 } },
    ]);
  });

  it('rings again when the clock goes back rather than falling silent', () => {
    const { sent, b, at } = bell();
    b.ring('tail', 'm', '1');
    at(5_000);
    b.ring('tail', 'm', '1');
    expect(sent).toHaveLength(2);
  });

  it('never throws when the publish fails', async () => {
    const errors: unknown[] = [];
    const b = createDemandBell(
      { publish: async () => Promise.reject(new Error('down')) },
      'wp',
      { now: () => 0 },
      { onError: (e) => errors.push(e) },
    );
    expect(() => b.ring('tail', 'm', '1')).not.toThrow();
    await new Promise((r) => setImmediate(r));
    expect(errors).toHaveLength(1);
  });

  it('reads only well-formed rings', () => {
    expect(parseRing('{"pool":"tail","model":"m","version":"1","at":5}')).toEqual({ pool: 'tail', model: 'm', version: '1', at: 5 });
    for (const bad of ['nope', '{}', '{"pool":"","model":"m","version":"1"}', '{"pool":"tail","model":3,"version":"1"}'])
      expect(parseRing(bad)).toBeUndefined();
  });
});
