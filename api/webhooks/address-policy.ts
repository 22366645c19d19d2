/**
 * Which addresses a webhook may never reach (SSRF defence, issue 3 §4): loopback, private,
 * link-local, CGNAT, multicast, unspecified, unique-local, reserved and cloud-metadata
 * addresses, in IPv4, IPv6 and every IPv6 form that embeds an IPv4 address. Pure: the same
 * rules run on a URL's literal host at submit and on every address DNS returns at delivery.
 *
 * IPv6 forms that carry an IPv4 address (issue 20): the embedded address is judged first, for
 * the sharper reason (`::ffff:127.0.0.1` is `loopback`). Then every such form is refused as a
 * whole, whatever it embeds, except the well-known NAT64 prefix: IPv4-mapped (::ffff:0:0/96)
 * and IPv4-translated (::ffff:0:0:0/96) addresses are IPv4 sockets in disguise that no public
 * receiver publishes in DNS; IPv4-compatible (::/96) is deprecated; 6to4 (2002::/16) and Teredo
 * (2001::/32) are tunnels whose relays decide where the packet lands; the local-use NAT64
 * prefix (64:ff9b:1::/48) translates into whatever IPv4 network its operator chose, private
 * ones included. The well-known NAT64 prefix (64:ff9b::/96) only ever maps to public IPv4
 * (RFC 6052 forbids private addresses behind it), so it is judged by its embedded address.
 *
 * Odd IPv4 notations (`2130706433`, `0x7f.1`, `0177.0.0.1`) are not parsed here: WHATWG `new URL()`
 * already rewrites them to dotted decimal, so hosts must come from `URL.hostname`
 * (see `urlHost`), never from the raw string.
 */
import { isIPv4, isIPv6 } from 'node:net';

export type BlockReason =
  | 'localhost'
  | 'loopback'
  | 'private'
  | 'link_local'
  | 'cgnat'
  | 'multicast'
  | 'unspecified'
  | 'unique_local'
  | 'metadata'
  | 'reserved'
  | 'ipv4_mapped'
  | 'ipv4_compatible'
  | 'nat64_local'
  | '6to4'
  | 'teredo';

interface Range {
  base: number[];
  bits: number;
  reason: BlockReason;
}

/** Metadata first: 169.254.169.254 is link-local too, but the sharper reason helps operators. */
const V4_RANGES: Range[] = [
  { base: [169, 254, 169, 254], bits: 32, reason: 'metadata' },
  { base: [0, 0, 0, 0], bits: 32, reason: 'unspecified' },
  { base: [0, 0, 0, 0], bits: 8, reason: 'reserved' }, // "this network"
  { base: [127, 0, 0, 0], bits: 8, reason: 'loopback' },
  { base: [10, 0, 0, 0], bits: 8, reason: 'private' },
  { base: [172, 16, 0, 0], bits: 12, reason: 'private' },
  { base: [192, 168, 0, 0], bits: 16, reason: 'private' },
  { base: [169, 254, 0, 0], bits: 16, reason: 'link_local' },
  { base: [100, 64, 0, 0], bits: 10, reason: 'cgnat' },
  { base: [192, 0, 0, 0], bits: 24, reason: 'reserved' }, // IETF protocol assignments
  { base: [198, 18, 0, 0], bits: 15, reason: 'reserved' }, // benchmarking
  { base: [224, 0, 0, 0], bits: 4, reason: 'multicast' },
  { base: [240, 0, 0, 0], bits: 4, reason: 'reserved' }, // includes 255.255.255.255
];

const V6_RANGES: Range[] = [
  { base: bytesOf6('fd00:ec2::254'), bits: 128, reason: 'metadata' },
  { base: bytesOf6('::'), bits: 128, reason: 'unspecified' },
  { base: bytesOf6('::1'), bits: 128, reason: 'loopback' },
  { base: bytesOf6('fe80::'), bits: 10, reason: 'link_local' },
  { base: bytesOf6('fc00::'), bits: 7, reason: 'unique_local' },
  { base: bytesOf6('ff00::'), bits: 8, reason: 'multicast' },
  { base: bytesOf6('fec0::'), bits: 10, reason: 'reserved' }, // deprecated site-local
  { base: bytesOf6('100::'), bits: 64, reason: 'reserved' }, // discard-only
  { base: bytesOf6('::ffff:0:0'), bits: 96, reason: 'ipv4_mapped' },
  { base: bytesOf6('::ffff:0:0:0'), bits: 96, reason: 'ipv4_mapped' }, // IPv4-translated (SIIT)
  { base: bytesOf6('::'), bits: 96, reason: 'ipv4_compatible' },
  { base: bytesOf6('64:ff9b:1::'), bits: 48, reason: 'nat64_local' },
  { base: bytesOf6('2002::'), bits: 16, reason: '6to4' },
  { base: bytesOf6('2001::'), bits: 32, reason: 'teredo' },
];

/** Why `ip` (an IPv4 or IPv6 literal, no brackets) is blocked; undefined when it is public. */
export function blockedAddressReason(ip: string): BlockReason | undefined {
  const bare = ip.replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  if (isIPv4(bare)) return matchRanges(bare.split('.').map(Number), V4_RANGES);
  if (!isIPv6(bare)) return undefined;
  const bytes = bytesOf6(bare);
  const embedded = embeddedIPv4(bytes);
  return (embedded && matchRanges(embedded, V4_RANGES)) ?? matchRanges(bytes, V6_RANGES);
}

export function isBlockedAddress(ip: string): boolean {
  return blockedAddressReason(ip) !== undefined;
}

/**
 * Why a URL host is blocked on sight, before any DNS: `localhost` names, or a literal blocked
 * address. A public-looking name returns undefined; its addresses are checked at delivery.
 */
export function blockedHostReason(host: string): BlockReason | undefined {
  const h = normaliseHost(host);
  if (h === 'localhost' || h.endsWith('.localhost')) return 'localhost';
  return blockedAddressReason(h);
}

/** A URL's host as compared against policy: lower case, no IPv6 brackets, no trailing dot. */
export function urlHost(url: URL): string {
  return normaliseHost(url.hostname);
}

/** Whether `host` is one the operator opened (WEBHOOK_ALLOWED_PRIVATE_HOSTS). */
export function isAllowedHost(host: string, allowed: readonly string[]): boolean {
  const h = normaliseHost(host);
  return allowed.some((a) => normaliseHost(a) === h);
}

function normaliseHost(host: string): string {
  return host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
}

function matchRanges(bytes: number[], ranges: Range[]): BlockReason | undefined {
  return ranges.find((r) => inPrefix(bytes, r.base, r.bits))?.reason;
}

function inPrefix(bytes: number[], base: number[], bits: number): boolean {
  for (let i = 0; i < base.length && bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((base[i] ?? 0) & mask)) return false;
  }
  return true;
}

/**
 * The IPv4 address inside IPv4-mapped (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96),
 * IPv4-compatible (::/96, deprecated but still routed to the IPv4 stack by some systems),
 * well-known NAT64 (64:ff9b::/96) and 6to4 (2002::/16, address in bits 16–47) addresses. A
 * local-use NAT64 address (64:ff9b:1::/48) places its IPv4 address by the operator's prefix
 * length, so it is refused by prefix alone. `::` and `::1` are left to the IPv6 rules.
 */
function embeddedIPv4(bytes: number[]): number[] | undefined {
  const head = bytes.slice(0, 12);
  const tail = bytes.slice(12);
  const zeros = (from: number, to: number) => head.slice(from, to).every((b) => b === 0);
  const mapped = zeros(0, 10) && head[10] === 0xff && head[11] === 0xff;
  const translated = zeros(0, 8) && head[8] === 0xff && head[9] === 0xff && zeros(10, 12);
  const compatible = zeros(0, 12) && (tail[0] !== 0 || tail[1] !== 0);
  const nat64 = head[0] === 0 && head[1] === 0x64 && head[2] === 0xff && head[3] === 0x9b && zeros(4, 12);
  if (mapped || translated || compatible || nat64) return tail;
  if (head[0] === 0x20 && head[1] === 0x02) return bytes.slice(2, 6);
  return undefined;
}

/** 16 bytes of a valid IPv6 literal (validated by the caller or a constant). */
function bytesOf6(ip: string): number[] {
  let text = ip;
  const groups: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const [a = 0, b = 0, c = 0, d = 0] = v4[1].split('.').map(Number);
    text = `${text.slice(0, -v4[1].length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [left = '', right] = text.split('::');
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const l = parse(left);
  const r = right === undefined ? [] : parse(right);
  groups.push(...l, ...new Array<number>(8 - l.length - r.length).fill(0), ...r);
  return groups.flatMap((g) => [(g >> 8) & 0xff, g & 0xff]);
}
