import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { addressBucket, clientAddress } from './client-address.ts';

/** Answers the address the route sees, with the socket peer given as the node server gives it. */
async function seen(trustedHops: number, peer: string | undefined, forwardedFor?: string): Promise<string> {
  const app = new Hono();
  app.get('/', (c) => c.text(clientAddress(c, trustedHops) ?? '(none)'));
  const headers: Record<string, string> = forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor };
  const env = peer === undefined ? undefined : { incoming: { socket: { remoteAddress: peer } } };
  return (await app.request('/', { headers }, env)).text();
}

describe('clientAddress', () => {
  it('is the socket peer by default, whatever X-Forwarded-For says', async () => {
    expect(await seen(0, '203.0.113.7', '198.51.100.1')).toBe('203.0.113.7');
    expect(await seen(0, '203.0.113.7')).toBe('203.0.113.7');
  });

  it('behind n trusted proxies, is the entry the outermost one appended; a forged prefix changes nothing', async () => {
    expect(await seen(1, '10.0.0.2', '198.51.100.1')).toBe('198.51.100.1');
    expect(await seen(1, '10.0.0.2', '6.6.6.6, 198.51.100.1')).toBe('198.51.100.1');
    expect(await seen(2, '10.0.0.2', '6.6.6.6, 198.51.100.1, 10.0.0.9')).toBe('198.51.100.1');
    // Fewer entries than trusted hops: the leftmost is all there is.
    expect(await seen(2, '10.0.0.2', '198.51.100.1')).toBe('198.51.100.1');
    expect(await seen(1, '10.0.0.2')).toBe('10.0.0.2');
  });

  it("reads API Gateway's source IP on Lambda, and is undefined where the runtime says nothing", async () => {
    const app = new Hono();
    app.get('/', (c) => c.text(clientAddress(c) ?? '(none)'));
    expect(await (await app.request('/', {}, { requestContext: { http: { sourceIp: '192.0.2.4' } } })).text()).toBe('192.0.2.4');
    expect(await (await app.request('/', {}, { requestContext: { identity: { sourceIp: '192.0.2.5' } } })).text()).toBe('192.0.2.5');
    expect(await seen(0, undefined)).toBe('(none)');
  });

  it("reads the peer from Bun's server, which Bun.serve passes as the bindings", async () => {
    const app = new Hono();
    app.get('/', (c) => c.text(clientAddress(c, 1) ?? '(none)'));
    const server = { requestIP: (req: Request) => (new URL(req.url).pathname === '/' ? { address: '10.0.0.2' } : null) };
    expect(await (await app.request('/', { headers: { 'x-forwarded-for': '198.51.100.1' } }, server)).text()).toBe('198.51.100.1');
    expect(await (await app.request('/', {}, server)).text()).toBe('10.0.0.2');
  });
});

describe('addressBucket', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:DB8:0001:0002:ffff::1', '2001:db8:1:2::/64'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    [undefined, 'unknown'],
    ['not an address', 'unknown'],
  ])('%s → %s', (address, bucket) => {
    expect(addressBucket(address)).toBe(bucket);
  });
});
