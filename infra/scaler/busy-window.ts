/**
 * A shared pool worker's busy share over the SLO's own time scale, which the planner's hand-over
 * reads (pool-plan.ts rule 4, PoolWorkerView.busyFraction): the mean of the shares seen on the
 * ticks of the last SLO, at least the newest one. The SLO is the scale on which a busy worker makes
 * a job late; one interval alone is noise (a beat right after a state change covers a few ms).
 *
 * One sample a tick per worker: live, the worker's heartbeat `busyFraction` (its last interval;
 * pool-controller.ts), in the simulator the world's engine-busy ms of the tick over the tick
 * (many-model-policies.ts). A worker not in a tick's samples is forgotten. Kept in process: a new
 * leader measures again within one SLO. Pure apart from its own state; time comes in with each note.
 */
export interface BusyWindow {
  /** This tick's share per worker, each in [0, 1]; `windowMs` is the SLO (the window, at least this sample). */
  note(now: number, windowMs: number, shares: Iterable<readonly [string, number]>): void;
  /** The mean share over the window; undefined for a worker never noted or forgotten. */
  share(id: string): number | undefined;
}

export function createBusyWindow(): BusyWindow {
  const samples = new Map<string, Array<{ at: number; share: number }>>();
  return {
    note(now, windowMs, shares) {
      const seen = new Set<string>();
      for (const [id, share] of shares) {
        if (!Number.isFinite(share)) continue;
        seen.add(id);
        // Samples from the future (the clock went back) and past the window go.
        const kept = (samples.get(id) ?? []).filter((s) => s.at < now && s.at > now - windowMs);
        kept.push({ at: now, share: Math.min(1, Math.max(0, share)) });
        samples.set(id, kept);
      }
      for (const id of [...samples.keys()]) if (!seen.has(id)) samples.delete(id);
    },
    share(id) {
      const kept = samples.get(id);
      return kept && kept.length > 0 ? kept.reduce((t, s) => t + s.share, 0) / kept.length : undefined;
    },
  };
}
