/**
 * Local leases over a shared token bucket. Each API process keeps, per key, tokens it has already
 * taken from the bucket (api/http/rate-limiter.ts, in Redis); a take spends those, and only when
 * they run out does the process ask the bucket again, for a lease of several. The bucket is asked
 * about once per lease, not once per request: the check that almost always says yes becomes a
 * subtraction, where it was a round trip and 30–50 µs of Redis CPU per request.
 *
 * A lease asks for `want`: what this process spent on the key since its last lease, scaled to
 * 100 ms of that pace (LEASE_HORIZON_MS); at least what the take needs; at most the cap, a tenth
 * of a second of the key's rate and a tenth of its burst. The bucket grants `want` when it holds
 * that many, else exactly what the take needs when it holds that (so a nearly empty bucket still
 * serves single requests, in turn, whichever process asks), else refuses with the wait for it —
 * one script, one round trip. Sizing by pace rather than a fixed share keeps a process that sees
 * a request now and then (a Lambda instance, one of many processes behind a balancer) at one call
 * per request with nothing held to expire unspent, while a busy process's leases grow up to
 * tenfold each (pace is measured over at least 10 ms) until they reach the cap.
 *
 * Unspent tokens expire `ttlMs` (1 s) after their lease, or when the clock goes back before it,
 * and are dropped (the bucket refills them in time): a process that goes idle holds nothing for
 * long. One lease per key is in flight at a time: concurrent takes wait for it, then spend from
 * it. A refusal is remembered until its wait is over — tokens are only ever taken from a bucket,
 * never put back, so it cannot hold them sooner — and a key over its limit costs one round trip
 * per wait, not one per request.
 *
 * Bound on over-admission: every token spent here was first taken from the bucket, so over any
 * span a key's processes together admit at most what the bucket alone admits (burst + rate ×
 * span) plus what they held unspent when the span began, at most one lease each: burst + rate ×
 * span + P × cap for P processes, and nothing more over the long run. At the defaults (50/s,
 * bursts of 100; cap 5) and 4 API processes that is 20 requests at most, once, beyond 100 + 50 ×
 * span. It is acceptable because the limit bounds a tenant's share of the API, Redis and the
 * workers (docs/SECURITY.md), and a tenth of a second of the tenant's own rate per process moves
 * none of those; the tenant cannot grow it (leases are per process, not per connection, and
 * capped), only the operator's process count does. The converse: tokens one process holds are
 * not there for another, so a request may be refused while up to P × cap tokens sit in other
 * processes' leases, for at most `ttlMs`.
 *
 * States of a key's stock, and what a take does in each:
 *   holding   — tokens ≥ cost, lease not expired: spend locally.
 *   short     — a remembered refusal covers this need: 429 with the rest of the wait, no call.
 *   leasing   — a lease is in flight: wait for it, then look again.
 *   empty     — anything else: this take leases (→ holding, or a remembered refusal).
 */

/** One lease request: take `want` when the bucket holds it, else `need`, else refuse. */
export interface LeaseRequest {
  /** Epoch milliseconds (the caller's injected Clock). */
  now: number;
  rps: number;
  burst: number;
  /** Tokens this take cannot do without (≥ 1). */
  need: number;
  /** Tokens to lease when the bucket holds them (≥ `need`, ≤ `burst`). */
  want: number;
}

export interface LeaseGrant {
  /** `want`, `need`, or 0 when refused. */
  granted: number;
  /** When refused: how long until `need` tokens are there; 0 otherwise. */
  retryAfterMs: number;
}

/** The shared bucket, as the leases see it: one atomic take-up-to per call. */
export interface SharedBucket {
  lease(key: string, request: LeaseRequest): Promise<LeaseGrant>;
}

export interface LeaseTake {
  now: number;
  rps: number;
  burst: number;
  /** Tokens this take spends, 1 to `burst`. */
  cost: number;
}

export interface LeaseAnswer {
  allowed: boolean;
  retryAfterMs: number;
}

/** A process's leases: one stock of tokens per key. */
export interface Leases {
  take(key: string, take: LeaseTake): Promise<LeaseAnswer>;
}

export interface LeaseOptions {
  /** How long leased tokens may be spent after their lease; default 1000. */
  ttlMs?: number;
}

/** A lease covers this much of the process's recent pace, and at most this much of the key's rate. */
export const LEASE_HORIZON_MS = 100;
const DEFAULT_TTL_MS = 1000;
/** Pace is measured over at least this long, so one quick pair of requests grows a lease ×10, not more. */
const MIN_PACE_SPAN_MS = 10;
/** Stocks are swept for expired keys when there are this many, and then at twice what is left. */
const SWEEP_AT = 1024;

interface Stock {
  /** Taken from the bucket, not yet spent; valid from `leasedAt` until `leasedAt + ttlMs`. */
  tokens: number;
  leasedAt: number;
  /** Spent since `leasedAt`: this process's pace on the key. */
  spent: number;
  /** The bucket held fewer than `need` tokens at `at`, and will not before `until`. */
  refusal?: { at: number; until: number; need: number };
  inFlight?: Promise<void>;
}

const ALLOWED: LeaseAnswer = { allowed: true, retryAfterMs: 0 };

/** The largest lease for a key: a tenth of a second of its rate and a tenth of its burst, at least 1. */
export function leaseCap(rps: number, burst: number): number {
  return Math.max(1, Math.floor(Math.min((rps * LEASE_HORIZON_MS) / 1000, burst / 10)));
}

export function createLeases(bucket: SharedBucket, options: LeaseOptions = {}): Leases {
  const ttlMs = options.ttlMs ?? DEFAULT_TTL_MS;
  const stocks = new Map<string, Stock>();
  let sweepAt = SWEEP_AT;

  const fresh = (s: Stock, now: number) => now >= s.leasedAt && now < s.leasedAt + ttlMs;

  /** The rest of the wait when a remembered refusal covers `need` now; undefined otherwise. */
  function knownShort(s: Stock, now: number, need: number, rps: number): number | undefined {
    const r = s.refusal;
    if (!r || now < r.at || now >= r.until || need < r.need) return undefined;
    return r.until - now + Math.ceil(((need - r.need) * 1000) / rps);
  }

  function sweep(now: number): void {
    if (stocks.size < sweepAt) return;
    for (const [key, s] of stocks) {
      if (!s.inFlight && !fresh(s, now) && !(s.refusal && now < s.refusal.until)) stocks.delete(key);
    }
    sweepAt = Math.max(SWEEP_AT, stocks.size * 2);
  }

  /** Leases for `cost`, the held tokens counted; on a grant this take's cost is spent from it. */
  async function lease(key: string, s: Stock, held: number, { now, rps, burst, cost }: LeaseTake): Promise<LeaseAnswer> {
    const need = Math.ceil(cost - held);
    const pace = fresh(s, now) ? Math.ceil((s.spent * LEASE_HORIZON_MS) / Math.max(MIN_PACE_SPAN_MS, now - s.leasedAt)) : 0;
    const want = Math.min(burst, Math.max(need, Math.min(leaseCap(rps, burst), pace)));
    // The held tokens ride with this lease: nothing else may spend them meanwhile.
    s.tokens = 0;
    let answer: LeaseAnswer = ALLOWED;
    const flight = bucket.lease(key, { now, rps, burst, need, want }).then(
      ({ granted, retryAfterMs }) => {
        if (granted > 0) {
          s.tokens = held + granted - cost;
          s.leasedAt = now;
          s.spent = cost;
          s.refusal = undefined;
        } else {
          s.tokens = held;
          s.refusal = { at: now, until: now + retryAfterMs, need };
          answer = { allowed: false, retryAfterMs };
        }
      },
      (error: unknown) => {
        s.tokens = held;
        throw error;
      },
    );
    s.inFlight = flight.finally(() => {
      s.inFlight = undefined;
    });
    sweep(now);
    await s.inFlight;
    return answer;
  }

  return {
    async take(key, take) {
      const { now, rps, cost } = take;
      for (;;) {
        let s = stocks.get(key);
        if (!s) {
          s = { tokens: 0, leasedAt: now, spent: 0 };
          stocks.set(key, s);
        }
        const held = fresh(s, now) ? s.tokens : 0;
        if (held >= cost) {
          s.tokens -= cost;
          s.spent += cost;
          return ALLOWED;
        }
        const wait = knownShort(s, now, cost - held, rps);
        if (wait !== undefined) return { allowed: false, retryAfterMs: wait };
        // A failed lease fails those waiting on it too: they would only ask a failing Redis again.
        if (s.inFlight) await s.inFlight;
        else return lease(key, s, held, take);
      }
    },
  };
}
