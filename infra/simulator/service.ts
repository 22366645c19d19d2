/**
 * Batch service time of a simulated worker. `linearService`: time(b) = fixed + b / rate, with
 * `workerRps` the throughput at a full batch and a fixed share (default 10 %) of a full batch's
 * time paid by every batch (session call overhead, I/O), so small batches are less efficient
 * per row, as on a real worker. `profileService` interpolates measured (batch, ms) points, e.g.
 * the batch profile a worker's warm-up records (batchPointsFrom reads it from a heartbeat).
 */
export type ServiceTime = (batch: number) => number;

/** One measured batch size and its latency. */
export interface BatchPoint {
  batch: number;
  ms: number;
}

export function linearService(workerRps: number, maxBatch: number, fixedShare = 0.1): ServiceTime {
  const fullMs = (maxBatch / workerRps) * 1000;
  const fixedMs = fullMs * fixedShare;
  const perRowMs = (fullMs - fixedMs) / maxBatch;
  return (batch) => fixedMs + batch * perRowMs;
}

export function profileService(points: readonly BatchPoint[]): ServiceTime {
  const sorted = [...points].sort((a, b) => a.batch - b.batch);
  if (sorted.length === 0) throw new Error('a batch profile needs at least one point');
  return (batch) => {
    const hi = sorted.findIndex((p) => p.batch >= batch);
    if (hi === 0) return ((sorted[0]?.ms ?? 0) * batch) / (sorted[0]?.batch ?? 1);
    const a = sorted[hi < 0 ? sorted.length - 2 : hi - 1] ?? sorted[0];
    const b = sorted[hi < 0 ? sorted.length - 1 : hi] ?? sorted[0];
    if (!a || !b || a.batch === b.batch) return ((b?.ms ?? 0) * batch) / (b?.batch ?? 1);
    return a.ms + ((b.ms - a.ms) * (batch - a.batch)) / (b.batch - a.batch);
  };
}

/** Rows per second at a full batch: what the policy is told one worker sustains. */
export function fullBatchRate(service: ServiceTime, maxBatch: number): number {
  return (maxBatch / service(maxBatch)) * 1000;
}

/**
 * Batch points from what a worker publishes: a heartbeat (`{batchProfile: …}`), its batchProfile
 * (`{entries: [{batch, p50Ms}], chosenBatch}`), or a plain `[{batch, ms}]` list. Undefined when
 * `json` is none of these.
 */
export function batchPointsFrom(json: unknown): { points: BatchPoint[]; chosenBatch?: number } | undefined {
  const o = (Array.isArray(json) ? null : json) as { batchProfile?: unknown; entries?: unknown; chosenBatch?: unknown } | null;
  if (o && typeof o === 'object' && o.batchProfile !== undefined) return batchPointsFrom(o.batchProfile);
  const list = Array.isArray(json) ? json : Array.isArray(o?.entries) ? (o.entries as unknown[]) : undefined;
  if (!list || list.length === 0) return undefined;
  const points: BatchPoint[] = [];
  for (const item of list) {
    const e = item as { batch?: unknown; ms?: unknown; p50Ms?: unknown };
    const ms = typeof e.ms === 'number' ? e.ms : e.p50Ms;
    if (typeof e.batch !== 'number' || !(e.batch > 0) || typeof ms !== 'number' || !(ms > 0)) return undefined;
    points.push({ batch: e.batch, ms });
  }
  const chosenBatch = o?.chosenBatch;
  const chosen = typeof chosenBatch === 'number' && chosenBatch > 0 ? chosenBatch : undefined;
  return chosen === undefined ? { points } : { points, chosenBatch: chosen };
}
