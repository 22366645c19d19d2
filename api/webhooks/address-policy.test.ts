import { describe, expect, it } from 'vitest';
import { blockedAddressReason, blockedHostReason, isAllowedHost, urlHost } from './address-policy.ts';

/** Hosts as WHATWG URL parsing leaves them, the way submit and delivery both see them. */
const hostOf = (url: string) => urlHost(new URL(url));

describe('blockedAddressReason', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.10.10', 'link_local'],
    ['169.254.169.254', 'metadata'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.255', 'cgnat'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'reserved'],
    ['255.255.255.255', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['fe80::1', 'link_local'],
    ['febf:ffff::1', 'link_local'],
    ['fc00::1', 'unique_local'],
    ['fdff:1234::5', 'unique_local'],
    ['fd00:ec2::254', 'metadata'],
    ['ff02::1', 'multicast'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:a9fe:a9fe', 'metadata'],
    ['::127.0.0.1', 'loopback'],
    ['64:ff9b::192.168.0.1', 'private'],
    // Issue 20: IPv6 forms that carry IPv4 are refused whatever they embed; the embedded address
    // gives the sharper reason when it is itself blocked.
    ['::ffff:8.8.8.8', 'ipv4_mapped'],
    ['::ffff:808:808', 'ipv4_mapped'],
    ['::ffff:0:0', 'unspecified'],
    ['::ffff:0:8.8.8.8', 'ipv4_mapped'], // IPv4-translated (SIIT)
    ['::ffff:0:127.0.0.1', 'loopback'],
    ['::8.8.8.8', 'ipv4_compatible'],
    ['::0.0.1.1', 'ipv4_compatible'],
    ['64:ff9b:1::808:808', 'nat64_local'],
    ['64:ff9b:1:ffff::1', 'nat64_local'],
    ['64:ff9b:1:a00::1', 'nat64_local'],
    ['2002:808:808::1', '6to4'],
    ['2002:7f00:1::1', 'loopback'],
    ['2002:a9fe:a9fe::', 'metadata'],
    ['2002:c0a8:101::5', 'private'],
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'teredo'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['[::1]', 'loopback'],
    ['fe80::1%eth0', 'link_local'],
  ])('%s is blocked (%s)', (ip, reason) => {
    expect(blockedAddressReason(ip)).toBe(reason);
  });

  it.each([
    '8.8.8.8',
    '1.1.1.1',
    '172.15.255.255',
    '172.32.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '169.253.255.255',
    '192.169.0.1',
    '223.255.255.255',
    '2001:4860:4860::8888',
    '2606:4700::1111',
    // The well-known NAT64 prefix maps only public IPv4 (RFC 6052): judged by the embedded address.
    '64:ff9b::808:808',
    '64:ff9b::1.1.1.1',
    '2001:db8::1', // documentation, not Teredo (2001::/32)
    '2003::1',
    '64:ff9c::1',
    'fec0::1'.replace('fec0', '2a00'),
  ])('%s is public', (ip) => {
    expect(blockedAddressReason(ip)).toBeUndefined();
  });

  it('does not treat names as addresses', () => {
    expect(blockedAddressReason('example.com')).toBeUndefined();
    expect(blockedAddressReason('')).toBeUndefined();
  });
});

describe('blockedHostReason on URL hosts (WHATWG-normalised notations)', () => {
  it.each([
    ['http://2130706433/', 'loopback'],
    ['http://0x7f.1/', 'loopback'],
    ['http://0177.0.0.1/', 'loopback'],
    ['http://127.1/', 'loopback'],
    ['http://0/', 'unspecified'],
    ['http://0x0a.0.0.1/', 'private'],
    ['http://3232235777/', 'private'],
    ['http://0xa9.0xfe.0xa9.0xfe/', 'metadata'],
    ['http://[::ffff:127.0.0.1]/', 'loopback'],
    ['http://[::ffff:169.254.169.254]/latest', 'metadata'],
    ['http://[::ffff:8.8.8.8]/', 'ipv4_mapped'],
    ['http://[2002:a00:1::]/', 'private'],
    ['http://[64:ff9b:1::a00:1]/', 'nat64_local'],
    ['http://[fd00:ec2::254]/', 'metadata'],
    ['http://[::]/', 'unspecified'],
    ['http://[0:0:0:0:0:0:0:1]/', 'loopback'],
    ['http://localhost:8080/', 'localhost'],
    ['http://LOCALHOST./', 'localhost'],
    ['http://api.localhost/', 'localhost'],
  ])('%s → %s', (url, reason) => {
    expect(blockedHostReason(hostOf(url))).toBe(reason);
  });

  it.each(['https://example.com/hook', 'http://8.8.8.8/', 'http://localhost.example.com/', 'http://[2001:db8::1]/'])(
    '%s is not blocked on sight',
    (url) => {
      expect(blockedHostReason(hostOf(url))).toBeUndefined();
    },
  );
});

describe('isAllowedHost', () => {
  it('matches names and literals case-insensitively, with or without brackets or a trailing dot', () => {
    expect(isAllowedHost(hostOf('http://LocalHost./x'), ['localhost'])).toBe(true);
    expect(isAllowedHost(hostOf('http://127.0.0.1:9/'), ['127.0.0.1'])).toBe(true);
    expect(isAllowedHost(hostOf('http://[::1]/'), ['[::1]'])).toBe(true);
    expect(isAllowedHost(hostOf('http://127.0.0.2/'), ['127.0.0.1'])).toBe(false);
    expect(isAllowedHost(hostOf('http://evil-localhost/'), ['localhost'])).toBe(false);
  });
});
