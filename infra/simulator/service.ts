/**
 * Batch service time of a simulated worker. `linearService`: time(b) = fixed + b / rate, with
 * `workerRps` the throughput at a full batch and a fixed share (default 10 %) of a full batch's
 * time paid by every batch (session call overhead, I/O), so small batches are less efficient
 * per row, as on a real worker. `profileService` interpolates measured (batch, ms) points, e.g.
 * the batch profile a worker's warm-up records (calibration is a later step).
 */
export type ServiceTime = (batch: number) => number;

export function linearService(workerRps: number, maxBatch: number, fixedShare = 0.1): ServiceTime {
  const fullMs = (maxBatch / workerRps) * 1000;
  const fixedMs = fullMs * fixedShare;
  const perRowMs = (fullMs - fixedMs) / maxBatch;
  return (batch) => fixedMs + batch * perRowMs;
}

export function profileService(points: ReadonlyArray<{ batch: number; ms: number }>): ServiceTime {
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
