/**
 * Within-minute burstiness from per-tick arrival counts (issue 28 §2): the index of dispersion
 * (variance over mean) of a tick's arrivals around its minute's own mean, 1 for Poisson arrivals
 * and more for clumped ones. The arrival history keeps minutes only, which hides sub-minute
 * bursts; the controller sees every tick's count, so it measures them, and the self-tuning
 * replays place a minute's arrivals with the burstiness measured here.
 *
 * Sums decay by DECAY_PER_MINUTE (a half-life of about twelve hours): long enough that a quiet
 * hour does not erase what a busy day showed, short enough to follow a change of character
 * within a day. Pure: the state is a plain object the caller keeps.
 */

export interface TickDispersionState {
  minute: number;
  /** This minute's per-tick counts so far. */
  ticks: number[];
  /** Decayed Σ (count − minute mean)² and Σ minute mean over ticks, of finished minutes. */
  squares: number;
  means: number;
}

export const DECAY_PER_MINUTE = 0.999;

export function emptyTickDispersion(): TickDispersionState {
  return { minute: Number.NEGATIVE_INFINITY, ticks: [], squares: 0, means: 0 };
}

/** Adds one tick's arrivals (counted at `now`, epoch ms); returns the new state. */
export function noteTick(state: TickDispersionState, now: number, arrivals: number): TickDispersionState {
  const minute = Math.floor(now / 60_000);
  const count = Number.isFinite(arrivals) && arrivals > 0 ? arrivals : 0;
  if (minute === state.minute) return { ...state, ticks: [...state.ticks, count] };
  let { squares, means } = state;
  const n = state.ticks.length;
  // A minute with one tick (or none) says nothing about the spread within it.
  // The sums are valued at the start of state.minute: the finished minute joins them, then all
  // decay by the minutes passed, so a gap weighs on everything before it (the finished one too).
  if (minute > state.minute) {
    if (n >= 2) {
      const mean = state.ticks.reduce((t, x) => t + x, 0) / n;
      squares += state.ticks.reduce((t, x) => t + (x - mean) ** 2, 0) * (n / (n - 1));
      means += mean * n;
    }
    const decay = Number.isFinite(state.minute) ? DECAY_PER_MINUTE ** Math.min(100_000, minute - state.minute) : 1;
    squares *= decay;
    means *= decay;
  }
  return { minute, ticks: [count], squares, means };
}

/** Variance over mean of a tick's arrivals; undefined until some arrivals were seen. */
export function tickDispersion(state: TickDispersionState): number | undefined {
  return state.means > 0 ? state.squares / state.means : undefined;
}
