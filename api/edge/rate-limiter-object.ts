/**
 * Per-tenant rate limits at the edge: one Durable Object per bucket name (a tenant, or a client
 * address for wrong keys), holding a token bucket (token-bucket.ts) in memory.
 *
 * Why a Durable Object and not the Workers rate limiting binding: the binding counts per
 * Cloudflare location and only over 10 s or 60 s periods, so a tenant spread over many locations
 * gets many times its limit and the region's RATE_LIMIT_RPS / BURST cannot be expressed; one
 * object per tenant is one count wherever the tenant's requests land, with the region's meaning.
 * Its cost is one subrequest per request to the object's location. An object evicted after idling
 * starts full again, which is what an idle tenant's bucket would be anyway.
 */
import { type Bucket, type BucketRule, take } from './token-bucket.ts';
import type { DurableObjectNamespace } from './workers-types.ts';

export interface RateVerdict {
  ok: boolean;
  retryAfterS?: number;
}

export class EdgeRateLimiter {
  private bucket: Bucket | undefined;

  async fetch(request: Request): Promise<Response> {
    const { rule, cost } = (await request.json()) as { rule: BucketRule; cost: number };
    const taken = take(this.bucket, rule, Date.now(), cost);
    this.bucket = taken.bucket;
    const verdict: RateVerdict = taken.ok ? { ok: true } : { ok: false, retryAfterS: taken.retryAfterS };
    return Response.json(verdict);
  }
}

/** Takes `cost` from bucket `name` under `rule`. */
export async function takeFrom(ns: DurableObjectNamespace, name: string, rule: BucketRule, cost = 1): Promise<RateVerdict> {
  const stub = ns.get(ns.idFromName(name));
  const res = await stub.fetch('https://rate-limiter/take', { method: 'POST', body: JSON.stringify({ rule, cost }) });
  return (await res.json()) as RateVerdict;
}
