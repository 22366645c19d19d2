/**
 * Bearer keys checked at the edge against the region's `tenant:key` list (a Workers secret), as
 * the region checks them (api/http/auth.ts): SHA-256 digests compared in constant time against
 * every key, so timing says nothing about which key matched. Web Crypto only: no node:crypto.
 */
import type { ApiKey } from '../../infra/kernel/api-keys.ts';

const encoder = new TextEncoder();

async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', encoder.encode(text)));
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < a.length && i < b.length; i++) diff |= (a[i] as number) ^ (b[i] as number);
  return diff === 0;
}

export type KeyLookup = (key: string) => Promise<string | undefined>;

/** Key → tenant (undefined for an unknown key), checking every configured key. */
export async function edgeKeyLookup(apiKeys: readonly ApiKey[]): Promise<KeyLookup> {
  const digests = await Promise.all(apiKeys.map(async (k) => ({ tenant: k.tenant, digest: await sha256(k.key) })));
  return async (key) => {
    const candidate = await sha256(key);
    let found: string | undefined;
    for (const k of digests) if (sameBytes(k.digest, candidate) && found === undefined) found = k.tenant;
    return found;
  };
}
