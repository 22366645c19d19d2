/**
 * Slots for long-lived responses (job event streams) in one API process: at most `perTenant`
 * held by one tenant and `total` by all. Each open stream holds a socket, a file descriptor, a
 * watch on the job's queue events and about 120 KB of memory until its job ends or its client
 * leaves; without a cap one tenant could open thousands. In memory, per process: a stream's cost
 * is this process's, and a slot must be given back even if Redis is unreachable.
 */

export interface StreamLimits {
  /** MAX_SSE_STREAMS_PER_TENANT */
  perTenant: number;
  /** MAX_SSE_STREAMS */
  total: number;
}

/** A held slot; `release()` gives it back, once however often it is called. */
export interface StreamSlot {
  release(): void;
}

export interface StreamSlots {
  /** A slot, or which cap is full: the tenant's own, or the process's. */
  acquire(tenant: string): StreamSlot | 'tenant' | 'process';
  /** Slots held by `tenant`, or by everyone when none is named. */
  held(tenant?: string): number;
}

export function createStreamSlots(limits: StreamLimits): StreamSlots {
  const byTenant = new Map<string, number>();
  let total = 0;
  return {
    acquire(tenant) {
      const mine = byTenant.get(tenant) ?? 0;
      if (mine >= limits.perTenant) return 'tenant';
      if (total >= limits.total) return 'process';
      byTenant.set(tenant, mine + 1);
      total++;
      let released = false;
      return {
        release() {
          if (released) return;
          released = true;
          total--;
          const left = (byTenant.get(tenant) ?? 1) - 1;
          if (left > 0) byTenant.set(tenant, left);
          else byTenant.delete(tenant);
        },
      };
    },
    held: (tenant) => (tenant === undefined ? total : (byTenant.get(tenant) ?? 0)),
  };
}
