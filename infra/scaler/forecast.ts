/**
 * The arrival forecaster (DESIGN §8, issue 4): a pure function from a per-minute arrival history
 * to the expected rate over the next lead-time window W (a cold start plus margin: `horizonS`).
 *
 * Model:
 * 1. Recent level: an EWMA of the complete minutes before now (half-life `levelHalfLifeMin`, by
 *    default a quarter of the horizon, 2–30 min: looking further ahead, average over more of the
 *    past; never less than two minutes, because a level that is mostly the last minute passes
 *    that minute's count noise straight into the policy, and at a pool of a few workers each
 *    noise crossing of a worker boundary launched a worker held for its lifetime — on the NASA
 *    trace a 1-minute floor made twice the cold starts for no better SLO; the upper quantile
 *    (step 6) is read from this level's own errors, so it widens to cover the extra lag). On the shared traces the level wanders like a random walk, so the newest minutes say
 *    most; much shorter half-lives only pass Poisson noise through (tuned on the traces: 15 min
 *    for a one-hour horizon, 1.25 min for five minutes on the Azure trace's bursts).
 * 2. Analogues: the same moment 1–6 days back and 1–4 weeks back, each also shifted by
 *    `analogueShiftsMin` (±15, ±30 min, weighing less: 1 / (1 + |shift| / 5 min)) to average
 *    away one day's noise without blurring a ramp that starts at the same minute every day.
 *    An analogue's growth g = (mean of its W + c) / (its level at its "now" + c) says how
 *    traffic moved from the level to the horizon at this time of day (or of week). c (`ratioFloorPerMin`, 1/min) keeps
 *    quiet nights from dividing by ~0. Weights: `decay` per day or week back, and same-weekday
 *    analogues `weeklyWeight` times more (weekend mornings do not ramp like Mondays).
 * 3. Seasonal growth: the weighted interquartile mean of log g (robust: an incident or a holiday
 *    in the history is trimmed away), shrunk toward 1 by its own noise: trust = m² / (m² + se²),
 *    m the mean log growth, se² its squared robust spread (1.4826 × median absolute deviation)
 *    over the effective number of analogues. A trace with a weak daily cycle then stays near
 *    "the level persists" instead of chasing noise.
 *    Clamped to `growthClamp`.
 * 4. rate = (level + c) × growth − c. Anchoring on today's level is the ratio correction
 *    "recent observed / what the profile predicted for the recent past": each analogue's growth
 *    is taken relative to its own level, so a day running 30% above usual stays 30% above.
 *    When the recent window has no data (an outage just ended) the analogues' own horizon
 *    means stand in for it (a seasonal-naive forecast).
 * 5. Burst: rate × the recent peak-to-mean (the `burstQuantile` of the last `burstWindowMin`
 *    minutes' rates over their mean), never below rate: what a warm standby should absorb, by
 *    how long the burst lasts. `burstsBySpan` gives it for rates averaged over sliding windows of
 *    1, 2, 4, … minutes up to the horizon; `burstRatePerSec` is the horizon's. A short burst is
 *    higher but the queue absorbs more of it (the policy weighs each span against the SLO); the
 *    old single figure was the one-minute peak sized as if it lasted a whole cold start, which
 *    held a standby worker for every one-minute spike of the last hour.
 * 6. Upper quantile: upperRatePerSec, the `upperQuantile` (default 0.9) of the rate a horizon
 *    ahead, what the policy sizes active workers for. Its spread is read from this series' own
 *    recent forecast errors: over the last `errorWindowMin` complete minutes, the log error of
 *    the recent level (step 1) read a horizon before each minute against that minute's count,
 *    e = log((n + c) / (level + c)). A minute's count is noisy around its rate by itself
 *    (variance ≈ dispersion × level, so ≈ dispersion × level / (level + c)² in e), and that
 *    noise is the queueing model's to absorb (the policy's dispersion term), not the rate's
 *    uncertainty; so the rate's log spread is σ = √(robust var(e) − that), robust meaning
 *    (1.4826 × median absolute deviation)², and upper = (rate + c) × e^(z_q σ) − c. It holds the
 *    level's drift over the lead time and whatever else this trace does, without a parameter
 *    fitted to a trace. With fewer than MIN_ERRORS errors (a new deployment) it is the rate.
 *    Dispersion: half the mean squared minute-to-minute change over the mean count (1 for
 *    Poisson counts on a steady level; differencing removes the slow drift), at least 1.
 *
 * Honest when history is short: with fewer than 3 usable analogues (the same time yesterday
 * and its shifts need about 24 h 15 min of history) the method is 'reactive': the recent level
 * alone, plus the burst term. From there on, more analogues join as history grows (7 days for
 * all the daily ones, 4 weeks for the weekly ones); the trace tests start after 7 days.
 *
 * Gaps. The minute containing `now` is partial (its count is still growing), so only complete
 * minutes are read; entries at or after that minute (a series that ends early, or a clock that
 * went back) and minutes flagged in `missing` (an outage: no data, not no demand) are skipped.
 * A window with less than half its weight observed is not used.
 *
 * Cost: about 50 analogues × (2 h + the horizon) of minutes read per call, whatever the
 * history's length; no allocation proportional to the history.
 */
import type { ArrivalSeries, Forecast } from '../contracts/pool.ts';

const MINUTE_MS = 60_000;
const DAY_MIN = 1440;
const WEEK_MIN = 7 * DAY_MIN;
/** A shifted analogue weighs 1 / (1 + |shift| / this): ±15 min → 0.25, ±30 min → 0.14. */
const SHIFT_SCALE_MIN = 5;
/** Fewer usable analogues than this and the forecast is 'reactive': one shifted window is not a season. */
const MIN_ANALOGUES = 3;
/** Fewer recent forecast errors than this and the upper quantile is the Poisson bound alone. */
const MIN_ERRORS = 30;
/** The shortest default level half-life, in minutes (step 1). */
const MIN_LEVEL_HALF_LIFE_MIN = 2;
/** Dispersion is capped here: a trace with a gap reads as one huge change. */
const MAX_DISPERSION = 50;

export interface ForecastOptions {
  /** Half-life of the recent level's EWMA, in minutes (default a quarter of the horizon, 1–30). */
  levelHalfLifeMin?: number;
  /** Daily analogues 1..n days back; multiples of 7 are weekly ones (default 6). */
  seasonalDays?: number;
  /** Weekly analogues 1..n weeks back (default 4). */
  seasonalWeeks?: number;
  /** Shifts applied to every analogue, in minutes (default [-30, -15, 0, 15, 30]). */
  analogueShiftsMin?: number[];
  /** Weight kept per day (or week) further back (default 0.95). */
  decay?: number;
  /** How much more a same-weekday analogue counts than a daily one (default 2). */
  weeklyWeight?: number;
  /** Bounds on the seasonal growth from the level to the horizon (default [0.25, 4]). */
  growthClamp?: [number, number];
  /** Arrivals per minute added to both sides of a growth ratio (default 1). */
  ratioFloorPerMin?: number;
  /** Complete minutes the burst term looks at (default 60). */
  burstWindowMin?: number;
  /** Quantile of recent horizon-long mean rates for the burst term (default 0.95). */
  burstQuantile?: number;
  /** The quantile upperRatePerSec is (default 0.9). */
  upperQuantile?: number;
  /** Complete minutes whose forecast errors set the upper quantile's spread (default 360). */
  errorWindowMin?: number;
  /** Per minute, parallel to series.perMinute: true where there is no data (an outage). */
  missing?: boolean[];
}

export interface ForecastInput {
  series: ArrivalSeries;
  /** Epoch ms; may fall mid-minute. */
  now: number;
  horizonS: number;
  options?: ForecastOptions;
}

const DEFAULTS = {
  seasonalDays: 6,
  seasonalWeeks: 4,
  analogueShiftsMin: [-30, -15, 0, 15, 30],
  decay: 0.95,
  weeklyWeight: 2,
  growthClamp: [0.25, 4] as [number, number],
  ratioFloorPerMin: 1,
  burstWindowMin: 60,
  burstQuantile: 0.95,
  upperQuantile: 0.9,
  errorWindowMin: 360,
};

type Settings = typeof DEFAULTS & { levelHalfLifeMin: number };

/** Reads minutes [0, end) of the series; everything at or past `end`, or flagged, is unknown. */
class History {
  constructor(
    private readonly counts: number[],
    private readonly missing: boolean[] | undefined,
    readonly end: number,
  ) {}

  at(i: number): number | undefined {
    if (i < 0 || i >= this.end || this.missing?.[i] === true) return undefined;
    return this.counts[i];
  }

  /** Mean over [from, to), or undefined when fewer than half its minutes are observed. */
  mean(from: number, to: number): number | undefined {
    let sum = 0;
    let seen = 0;
    for (let i = Math.max(0, from); i < Math.min(to, this.end); i++) {
      const v = this.at(i);
      if (v === undefined) continue;
      sum += v;
      seen++;
    }
    return seen > 0 && seen * 2 >= to - from ? sum / seen : undefined;
  }

  /** EWMA of the minutes before `end`, or undefined when under half its weight is observed. */
  level(end: number, halfLifeMin: number): number | undefined {
    const keep = 2 ** (-1 / halfLifeMin);
    let weight = 1;
    let sum = 0;
    let seen = 0;
    let all = 0;
    // Eight half-lives back leave under 0.4% of the weight unread.
    for (let i = end - 1; i >= end - 8 * halfLifeMin; i--) {
      const v = this.at(i);
      if (v !== undefined) {
        sum += weight * v;
        seen += weight;
      }
      all += weight;
      weight *= keep;
    }
    return seen > 0 && seen * 2 >= all ? sum / seen : undefined;
  }

  /** Observed counts in [from, to). */
  values(from: number, to: number): number[] {
    const out: number[] = [];
    for (let i = Math.max(0, from); i < Math.min(to, this.end); i++) {
      const v = this.at(i);
      if (v !== undefined) out.push(v);
    }
    return out;
  }
}

interface Analogue {
  weight: number;
  /** Mean per minute over the analogue's horizon window. */
  after: number;
  /** Its level at its "now"; undefined when that window had no data. */
  before: number | undefined;
}

export function forecastArrivals(input: ForecastInput): Forecast {
  const horizonMin = Math.max(1, Math.round(input.horizonS / 60));
  const s: Settings = {
    ...DEFAULTS,
    levelHalfLifeMin: Math.min(30, Math.max(MIN_LEVEL_HALF_LIFE_MIN, horizonMin / 4)),
    ...definedOnly(input.options ?? {}),
  };
  const nowIdx = Math.floor((input.now - input.series.startMs) / MINUTE_MS);
  // Only complete minutes: the one containing `now` is still filling up.
  const end = Math.max(0, Math.min(nowIdx, input.series.perMinute.length));
  const history = new History(input.series.perMinute, input.options?.missing, end);
  const recent = history.values(nowIdx - s.burstWindowMin, nowIdx);
  const spans = burstSpansMin(horizonMin);
  const factors = spans.map((span) => burstFactor(slidingMeans(recent, span), s.burstQuantile));
  const peakToMean = factors[factors.length - 1] ?? 1;
  const estimate = estimateRate(history, nowIdx, horizonMin, s);
  const perMin = Math.max(0, estimate.perMin);
  const ratePerSec = perMin / 60;
  const noise = upperBound(history, nowIdx, horizonMin, perMin, s);
  return {
    ratePerSec,
    burstRatePerSec: ratePerSec * peakToMean,
    burstsBySpan: spans.map((span, i) => ({ spanS: span * 60, ratePerSec: ratePerSec * (factors[i] ?? 1) })),
    upperRatePerSec: noise.upperPerMin / 60,
    upperQuantile: s.upperQuantile,
    dispersion: noise.dispersion,
    horizonS: input.horizonS,
    method: estimate.method,
    components: { ...estimate.components, peakToMean, errorSpread: noise.spread, errors: noise.errors, dispersion: noise.dispersion },
  };
}

interface Noise {
  upperPerMin: number;
  /** Log spread of the recent errors (0 when too few). */
  spread: number;
  errors: number;
  dispersion: number;
}

/** The upper quantile of the rate a horizon ahead (step 6 of the header). */
function upperBound(history: History, nowIdx: number, horizonMin: number, perMin: number, s: Settings): Noise {
  const c = s.ratioFloorPerMin;
  const from = nowIdx - s.errorWindowMin;
  const errors = levelErrors(history, from, nowIdx, horizonMin, s.levelHalfLifeMin, c);
  const window = history.values(from, nowIdx);
  const dispersion = minuteDispersion(window);
  if (errors.length < MIN_ERRORS) return { upperPerMin: perMin, spread: 0, errors: errors.length, dispersion };
  // The errors' robust variance, less what the minutes' own noise puts into a log count.
  const logs = errors.map((e) => e.log);
  const centre = median(logs);
  const mad = 1.4826 * median(logs.map((x) => Math.abs(x - centre)));
  const noise = errors.reduce((t, e) => t + (dispersion * e.level) / (e.level + c) ** 2, 0) / errors.length;
  const spread = Math.min(normalQuantile(s.upperQuantile) * Math.sqrt(Math.max(0, mad * mad - noise)), peakSpread(window, horizonMin, c));
  return { upperPerMin: Math.max(perMin, (perMin + c) * Math.exp(spread) - c), spread, errors: errors.length, dispersion };
}

/**
 * The most a horizon-long window of the error window ran above the window's mean, as a log
 * ratio: the cap on the upper quantile's spread. The normal reading of the errors' MAD assumes
 * one mode; traffic that switches on and off has two (its idle minutes' errors are log(c / level),
 * far below), and read as one spread they put the upper quantile at 40× the mean, far above any
 * rate the traffic reached. What a horizon-long window actually reached caps it.
 */
function peakSpread(window: number[], horizonMin: number, c: number): number {
  if (window.length === 0) return 0;
  const mean = window.reduce((a, b) => a + b, 0) / window.length;
  const peak = slidingMeans(window, horizonMin).reduce((m, x) => Math.max(m, x), 0);
  return Math.max(0, Math.log((peak + c) / (mean + c)));
}

/**
 * log((n_i + c) / (level + c)) for each observed minute i in [from, to), the level being the EWMA
 * of the minutes before i − lag + 1 (what step 1 said a horizon earlier). One pass, O(window).
 */
function levelErrors(
  history: History,
  from: number,
  to: number,
  lag: number,
  halfLifeMin: number,
  c: number,
): Array<{ log: number; level: number }> {
  const keep = 2 ** (-1 / halfLifeMin);
  const start = from - lag - Math.ceil(8 * halfLifeMin);
  const levels = new Float64Array(Math.max(0, to - start));
  let sum = 0;
  let weight = 0;
  for (let i = start; i < to; i++) {
    levels[i - start] = weight > 0 ? sum / weight : Number.NaN;
    const v = history.at(i);
    sum *= keep;
    weight *= keep;
    if (v !== undefined) {
      sum += v;
      weight += 1;
    }
  }
  const out: Array<{ log: number; level: number }> = [];
  for (let i = Math.max(from, 0); i < to; i++) {
    const v = history.at(i);
    const level = levels[i - lag + 1 - start];
    if (v === undefined || level === undefined || Number.isNaN(level)) continue;
    out.push({ log: Math.log((v + c) / (level + c)), level });
  }
  return out;
}

/** Half the mean squared minute-to-minute change over the mean count, at least 1 (see the header). */
function minuteDispersion(counts: number[]): number {
  if (counts.length < 2) return 1;
  let squares = 0;
  for (let i = 1; i < counts.length; i++) squares += ((counts[i] as number) - (counts[i - 1] as number)) ** 2;
  const mean = counts.reduce((a, b) => a + b, 0) / counts.length;
  if (mean <= 0) return 1;
  return Math.min(MAX_DISPERSION, Math.max(1, squares / (2 * (counts.length - 1)) / mean));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** The standard normal's q-quantile (Abramowitz & Stegun 26.2.23, error < 5e-4), for q in (0, 1). */
export function normalQuantile(q: number): number {
  if (!(q > 0 && q < 1)) return q >= 1 ? Infinity : -Infinity;
  if (q < 0.5) return -normalQuantile(1 - q);
  const t = Math.sqrt(-2 * Math.log(1 - q));
  return t - (2.515517 + 0.802853 * t + 0.010328 * t * t) / (1 + 1.432788 * t + 0.189269 * t * t + 0.001308 * t * t * t);
}

interface Estimate {
  method: Forecast['method'];
  perMin: number;
  components: Record<string, number>;
}

function estimateRate(history: History, nowIdx: number, horizonMin: number, s: Settings): Estimate {
  const level = history.level(nowIdx, s.levelHalfLifeMin);
  const analogues = findAnalogues(history, nowIdx, horizonMin, s);
  const c = s.ratioFloorPerMin;
  if (analogues.length < MIN_ANALOGUES) {
    // Too little history. With the level window itself unobserved, the newest minute is all there is.
    const perMin = level ?? latestObserved(history);
    return { method: 'reactive', perMin, components: { recentLevelPerMin: perMin, analogues: analogues.length } };
  }
  if (level === undefined) {
    const profile = Math.exp(robustMean(analogues.map((a) => ({ value: Math.log(a.after + c), weight: a.weight })))) - c;
    return { method: 'seasonal', perMin: profile, components: { profilePerMin: profile, analogues: analogues.length } };
  }
  const growth = seasonalGrowth(analogues, s);
  if (growth === undefined)
    return { method: 'reactive', perMin: level, components: { recentLevelPerMin: level, analogues: analogues.length } };
  return {
    method: 'seasonal',
    perMin: (level + c) * growth.growth - c,
    components: {
      recentLevelPerMin: level,
      seasonalGrowth: growth.growth,
      rawGrowth: growth.raw,
      growthTrust: growth.trust,
      analogues: growth.used,
    },
  };
}

function findAnalogues(history: History, nowIdx: number, horizonMin: number, s: Settings): Analogue[] {
  const lags: Array<{ lagMin: number; weight: number }> = [];
  for (let d = 1; d <= s.seasonalDays; d++) {
    if (d % 7 !== 0) lags.push({ lagMin: d * DAY_MIN, weight: s.decay ** (d - 1) });
  }
  for (let w = 1; w <= s.seasonalWeeks; w++) lags.push({ lagMin: w * WEEK_MIN, weight: s.weeklyWeight * s.decay ** (w - 1) });
  const out: Analogue[] = [];
  for (const { lagMin, weight } of lags) {
    for (const shift of s.analogueShiftsMin) {
      const past = nowIdx - lagMin + shift;
      const after = history.mean(past, past + horizonMin);
      if (after === undefined) continue;
      // Shifted analogues weigh less, so a step at the same minute every day stays sharp.
      const shiftWeight = 1 / (1 + Math.abs(shift) / SHIFT_SCALE_MIN);
      out.push({ weight: weight * shiftWeight, after, before: history.level(past, s.levelHalfLifeMin) });
    }
  }
  return out;
}

interface Growth {
  growth: number;
  raw: number;
  trust: number;
  used: number;
}

/** Robust mean log growth over analogues with both windows, shrunk toward 1 by its noise. */
function seasonalGrowth(analogues: Analogue[], s: Settings): Growth | undefined {
  const c = s.ratioFloorPerMin;
  const logs = analogues.flatMap((a) =>
    a.before === undefined ? [] : [{ value: Math.log((a.after + c) / (a.before + c)), weight: a.weight }],
  );
  if (logs.length < MIN_ANALOGUES) return undefined;
  const m = robustMean(logs);
  const total = logs.reduce((t, a) => t + a.weight, 0);
  const nEff = total ** 2 / logs.reduce((t, a) => t + a.weight ** 2, 0);
  // A robust spread (1.4826 × the weighted median absolute deviation ≈ σ for normal noise), so
  // the outlier the mean trimmed away does not come back as doubt.
  const spread = 1.4826 * weightedMedian(logs.map((a) => ({ value: Math.abs(a.value - m), weight: a.weight })));
  const variance = spread * spread;
  const trust = m === 0 ? 1 : (m * m) / (m * m + variance / nEff);
  const [lo, hi] = s.growthClamp;
  return { growth: Math.min(hi, Math.max(lo, Math.exp(trust * m))), raw: Math.exp(m), trust, used: logs.length };
}

/** Weighted interquartile mean: the middle half of the weight, so outliers on either side drop out. */
function robustMean(items: Array<{ value: number; weight: number }>): number {
  const sorted = [...items].sort((a, b) => a.value - b.value);
  const total = sorted.reduce((t, a) => t + a.weight, 0);
  let below = 0;
  let sum = 0;
  let kept = 0;
  for (const item of sorted) {
    const share = Math.max(0, Math.min(below + item.weight, total * 0.75) - Math.max(below, total * 0.25));
    sum += share * item.value;
    kept += share;
    below += item.weight;
  }
  return kept > 0 ? sum / kept : 0;
}

function weightedMedian(items: Array<{ value: number; weight: number }>): number {
  const sorted = [...items].sort((a, b) => a.value - b.value);
  const half = sorted.reduce((t, a) => t + a.weight, 0) / 2;
  let below = 0;
  for (const item of sorted) {
    below += item.weight;
    if (below >= half) return item.value;
  }
  return 0;
}

/** Burst spans in minutes: 1, 2, 4, … below the horizon, then the horizon itself. */
function burstSpansMin(horizonMin: number): number[] {
  const spans: number[] = [];
  for (let span = 1; span < horizonMin; span *= 2) spans.push(span);
  spans.push(horizonMin);
  return spans;
}

/** Means of every `span` consecutive values; all of them as one mean when there are fewer. */
function slidingMeans(values: number[], span: number): number[] {
  if (span <= 1 || values.length === 0) return values;
  if (values.length < span) return [values.reduce((a, b) => a + b, 0) / values.length];
  const out = new Array<number>(values.length - span + 1);
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    sum += values[i] ?? 0;
    if (i >= span) sum -= values[i - span] ?? 0;
    if (i >= span - 1) out[i - span + 1] = sum / span;
  }
  return out;
}

function burstFactor(recent: number[], q: number): number {
  if (recent.length === 0) return 1;
  const mean = recent.reduce((a, b) => a + b, 0) / recent.length;
  if (mean <= 0) return 1;
  const sorted = [...recent].sort((a, b) => a - b);
  const high = sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? mean;
  return Math.max(1, high / mean);
}

/** The newest observed minute, for a reactive forecast whose level window is mostly missing. */
function latestObserved(history: History): number {
  for (let i = history.end - 1; i >= 0; i--) {
    const v = history.at(i);
    if (v !== undefined) return v;
  }
  return 0;
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
