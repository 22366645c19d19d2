/**
 * How a long simulator run tells its caller how far it has got (issue 29: `warmpool simulate`
 * was silent for minutes). The caller plans the replays a run will make — each run says how many
 * beside its code (`sweepReplays`, `AT_SLO_REPLAYS`, `walkForwardReplays`; compare() makes one
 * per policy) — and the run reports each replay as its result comes back, from this thread or
 * from a sweep thread. A search that may stop early (at-slo.ts) is planned at its most and gives
 * back what it did not use, as a negative plan. The CLI draws a progress line from it
 * (scripts/commands/simulate-progress.ts); other callers pass nothing.
 */
export interface ReplayCounter {
  /** `replays` more are coming (negative: fewer than planned). */
  plan(replays: number): void;
  /** `replays` (default 1) have finished. */
  done(replays?: number): void;
}

/** The counter of a run nobody watches. */
export const NO_COUNT: ReplayCounter = { plan: () => undefined, done: () => undefined };
