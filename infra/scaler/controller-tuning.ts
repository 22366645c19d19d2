/**
 * Self-tuning in the live controller (issue 28 §1): every `retuneIntervalMs` per deployment, the
 * recent window goes to the tuner (contracts/pool.ts Tuner: the simulator's portfolio on a worker
 * thread) with the world as measured — the arrival series, the per-worker rate, the batch, the
 * pool's own cold starts and the within-minute burstiness its per-tick counts showed — and the
 * candidate it adopts decides the following ticks (candidates.ts), as the simulator's
 * self-tuning replay does with the same functions.
 *
 * Retunes are spaced by `retuneSpacingMs`: the interval, and at least a sixth of the window the
 * last one replayed. The tick never waits for a retune: it starts one when due and goes on with the choice in force;
 * the result is stored in Redis when it arrives (so a restarted or new leader goes on with it) and
 * used from the next tick. A choice older than STALE_RETUNES spacings (the tuner stalled, or the
 * history stopped) lapses, and the deployment's own predictive policy decides again: a fixed fleet
 * chosen for yesterday's traffic must not hold today's.
 */
import type { ArrivalSeries, PolicySettings, Tuner, TuningChoice } from '../contracts/pool.ts';
import type { RedisClient } from '../redis/client.ts';
import { scalerTuningKey } from '../redis/keys.ts';
import { emptyTickDispersion, noteTick, type TickDispersionState, tickDispersion } from './tick-dispersion.ts';

/** Retune spacings a choice stays in force without a newer one. */
export const STALE_RETUNES = 3;
/** Retunes per window span at most: each then replays at least a sixth of new traffic. */
export const RETUNES_PER_WINDOW = 6;

/**
 * Time to the next retune after one that replayed `windowMs`: the configured interval, and at
 * least a sixth of the window, so that the work per hour of traffic is bounded (at most
 * RETUNES_PER_WINDOW replays of each candidate per window span) and a day-long window is not
 * replayed every five minutes for evidence that moved by a few per cent. The simulator's
 * self-tuning replay spaces its retunes with this same function.
 */
export function retuneSpacingMs(intervalMs: number, windowMs: number): number {
  return Math.max(intervalMs, windowMs / RETUNES_PER_WINDOW);
}

/** How long after it was made a choice is still in force: STALE_RETUNES of its own spacing. */
function lapseMs(choice: TuningChoice, intervalMs: number): number {
  return STALE_RETUNES * retuneSpacingMs(intervalMs, Math.max(0, choice.toMs - choice.fromMs));
}

export interface LiveTuningOptions {
  tuner: Tuner;
  redis: Pick<RedisClient, 'get' | 'set'>;
  prefix: string;
  shadow: boolean;
  retuneIntervalMs: number;
  cpuBudgetMs: number;
  tickMs: number;
  /** Told when a retune fails (the choice in force stays). */
  onError?: (model: string, err: unknown) => void;
}

export interface TuningTick {
  now: number;
  /** Rows that arrived since the last tick (absent on the first). */
  arrivedRows?: number;
  series: ArrivalSeries;
  settings: PolicySettings;
  sloTarget: number;
  perWorkerRatePerSec: number;
  maxBatch: number;
  coldStartsMs: readonly number[];
}

export function createLiveTuning(o: LiveTuningOptions) {
  const state = new Map<string, { dispersion: TickDispersionState; nextAt: number; inFlight?: Promise<void> }>();
  const key = (model: string) => scalerTuningKey(o.prefix, o.shadow, model);

  async function stored(model: string, now: number): Promise<TuningChoice | undefined> {
    const raw = await o.redis.get(key(model));
    if (!raw) return undefined;
    try {
      const choice = JSON.parse(raw) as TuningChoice;
      const fresh = choice.at <= now && now - choice.at <= lapseMs(choice, o.retuneIntervalMs);
      return fresh && choice.chosen && typeof choice.chosen.kind === 'string' ? choice : undefined;
    } catch {
      return undefined;
    }
  }

  return {
    /** Notes the tick's arrivals, starts a retune when one is due, and returns the choice in force (if any). */
    async tick(model: string, t: TuningTick): Promise<TuningChoice | undefined> {
      const s = state.get(model) ?? { dispersion: emptyTickDispersion(), nextAt: Number.NEGATIVE_INFINITY };
      state.set(model, s);
      if (t.arrivedRows !== undefined) s.dispersion = noteTick(s.dispersion, t.now, t.arrivedRows);
      const current = await stored(model, t.now);
      if (t.now >= s.nextAt && !s.inFlight && t.perWorkerRatePerSec > 0) {
        s.nextAt = t.now + o.retuneIntervalMs;
        const dispersion = tickDispersion(s.dispersion);
        const retune = o.tuner.retune(model, {
          series: t.series,
          now: t.now,
          settings: t.settings,
          sloTarget: t.sloTarget,
          perWorkerRatePerSec: t.perWorkerRatePerSec,
          maxBatch: t.maxBatch,
          tickMs: o.tickMs,
          coldStartsMs: t.coldStartsMs,
          ...(dispersion !== undefined ? { dispersion } : {}),
          ...(current ? { current: current.chosen.name } : {}),
          cpuBudgetMs: o.cpuBudgetMs,
        });
        s.inFlight = retune
          .then(async (choice) => {
            if (!choice) return;
            s.nextAt = Math.max(s.nextAt, choice.at + retuneSpacingMs(o.retuneIntervalMs, choice.toMs - choice.fromMs));
            await o.redis.set(key(model), JSON.stringify(choice), 'PX', lapseMs(choice, o.retuneIntervalMs) + o.retuneIntervalMs);
          })
          .catch((err: unknown) => o.onError?.(model, err))
          .finally(() => {
            s.inFlight = undefined;
          });
      }
      return current;
    },
    /** Waits for the retunes in flight (close, tests). */
    async settle(): Promise<void> {
      await Promise.all([...state.values()].map((s) => s.inFlight));
    },
  };
}

export type LiveTuning = ReturnType<typeof createLiveTuning>;
