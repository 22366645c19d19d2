/**
 * Room for one more model within a pool worker's memory budget (issue 31): which resident models
 * to evict first, or that none can go. Pure: the pool worker passes what it measured and its clock.
 *
 * The budget counts each resident model's measured resident memory (the RSS its load and warm-up
 * added: ONNX Runtime keeps an arena per session beyond the weights), not its file size. Rules:
 * - a model with jobs in flight, or pinned (loading, or already draining out), never goes;
 * - least recently used first, but one used within `recentMs` only when no older one is left;
 * - all or nothing: if evicting every model that may go still leaves too little, nothing is
 *   evicted and the load does not happen (the worker reports it rather than exceed the budget).
 * A clock that went backwards makes a model look recently used (its age is negative), never old.
 */

export interface Resident {
  key: string;
  residentBytes: number;
  /** Epoch ms of its last job (or of becoming resident, before its first). */
  lastUsedAt: number;
  jobsInFlight: number;
  /** Loading, or already draining: not the eviction's to choose. */
  pinned?: boolean;
}

export interface RoomAsk {
  /** What the model to load is expected to take (measured before, else an estimate). */
  needBytes: number;
  budgetBytes: number;
  residents: readonly Resident[];
  now: number;
  /** Used within this long counts as recent. */
  recentMs: number;
}

export type RoomPlan =
  | { fits: true; evict: string[] }
  | { fits: false; evict: []; reason: 'larger-than-budget' | 'all-busy-or-recent'; shortBytes: number };

export function roomFor(ask: RoomAsk): RoomPlan {
  const used = ask.residents.reduce((sum, r) => sum + r.residentBytes, 0);
  let free = ask.budgetBytes - used;
  if (ask.needBytes <= free) return { fits: true, evict: [] };
  if (ask.needBytes > ask.budgetBytes) {
    return { fits: false, evict: [], reason: 'larger-than-budget', shortBytes: ask.needBytes - ask.budgetBytes };
  }
  const evict: string[] = [];
  for (const r of evictionOrder(ask.residents, ask.now, ask.recentMs)) {
    evict.push(r.key);
    free += r.residentBytes;
    if (ask.needBytes <= free) return { fits: true, evict };
  }
  return { fits: false, evict: [], reason: 'all-busy-or-recent', shortBytes: ask.needBytes - free };
}

/** The residents that may go, in the order they go: idle older ones by age, then recent ones by age. */
export function evictionOrder(residents: readonly Resident[], now: number, recentMs: number): Resident[] {
  const free = residents.filter((r) => r.jobsInFlight === 0 && !r.pinned);
  const byAge = (a: Resident, b: Resident) => a.lastUsedAt - b.lastUsedAt || a.key.localeCompare(b.key);
  const isOld = (r: Resident) => now - r.lastUsedAt >= recentMs;
  return [...free.filter(isOld).sort(byAge), ...free.filter((r) => !isOld(r)).sort(byAge)];
}

/**
 * Over budget after a load measured more than expected: the evictions (same rules) that bring it
 * back within the budget, or none when that cannot be done (then it stays over until jobs end).
 */
export function overBudget(residents: readonly Resident[], budgetBytes: number, now: number, recentMs: number): string[] {
  return roomFor({ needBytes: 0, budgetBytes, residents, now, recentMs }).evict;
}
