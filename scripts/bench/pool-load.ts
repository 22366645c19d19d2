/**
 * The shared pool's rows (issue 31), the arithmetic and the router; pool-load-run.ts measures them
 * on real processes:
 *
 *   pool_load_cold_p50_ms / _p99_ms   a model this host never saw, onto a standby pool worker:
 *                                     download + sha256 + load + warm-up from an empty profile
 *   pool_load_seen_p50_ms / _p99_ms   a model it held before: disk cache + kept profile, one pass
 *   pool_load_seen_vs_cold_p50        the two p50s' ratio
 *   pool_hit_ratio_zipf               jobs whose model was resident when queued ÷ all, Zipf traffic
 *                                     over more models than the worker's budget holds
 *
 * A load row's value is the worker's own `loadMs` (its heartbeat's `models[]`: download start →
 * intake fetching); the detail adds the same load seen from outside (askLoad → the heartbeat's
 * model state `active`), which also counts the doorbell, the manifest read and the beat.
 */
import { seededRandom } from '../../infra/kernel/seeded-random.ts';
import type { BenchRow } from './report.ts';
import { summarizeMs } from './stats.ts';

export interface PoolLoadPlan {
  /** Loads of each kind (never seen, seen before), one model each. */
  loads: number;
  /** Distinct models the Zipf traffic spreads over, and how many of them the worker's budget fits. */
  models: number;
  fits: number;
  /** Poisson arrivals: jobs per second, for this long. */
  ratePerS: number;
  durationS: number;
  /** Jobs whose outputs are checked against ONNX Runtime in the bench's own process. */
  checked: number;
  seed: number;
}

export interface LoadSample {
  kind: 'cold' | 'seen';
  /** The worker's own loadMs. */
  workerMs: number;
  /** askLoad → the heartbeat shows the model `active`. */
  outsideMs: number;
  cacheHit: boolean;
  /** Warm-up reused the kept profile. */
  reused: boolean;
}

const ms = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a');
const r2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');

export const LOAD_ROW_NAMES = ['pool_load_cold_p50_ms', 'pool_load_cold_p99_ms', 'pool_load_seen_p50_ms', 'pool_load_seen_p99_ms'];

/** A sample that is not what its kind says (a "cold" load that hit the cache, a "seen" one that measured). */
function misfit(s: LoadSample): boolean {
  return s.kind === 'cold' ? s.cacheHit || s.reused : !s.cacheHit || !s.reused;
}

/** The load rows from every sample (see the header); n/a for a kind with none. */
export function loadRows(samples: readonly LoadSample[], pollMs: number): BenchRow[] {
  const p50s: Record<string, number> = {};
  const rows: BenchRow[] = [];
  for (const kind of ['cold', 'seen'] as const) {
    const of = samples.filter((s) => s.kind === kind);
    const worker = summarizeMs(of.map((s) => s.workerMs));
    const outside = summarizeMs(of.map((s) => s.outsideMs));
    p50s[kind] = worker.p50;
    const wrong = of.filter(misfit).length;
    const what =
      kind === 'cold'
        ? 'a model never seen on this host: download + sha256 + load + warm-up measuring from an empty profile'
        : 'a model seen before: disk cache + kept profile, one warm-up pass';
    for (const p of ['p50', 'p99'] as const) {
      rows.push({
        name: `pool_load_${kind}_${p}_ms`,
        value: worker[p],
        unit: 'ms',
        detail:
          `${what}, onto a standby pool worker; the worker's own loadMs (download start → intake fetching), ${of.length} loads; ` +
          `from outside (askLoad → heartbeat model state active, polled every ${pollMs} ms) ${p} ${ms(outside[p])} ms` +
          (wrong > 0 ? `; ${wrong} loads were NOT ${kind} (cache or profile)` : ''),
      });
    }
  }
  rows.push({
    name: 'pool_load_seen_vs_cold_p50',
    value: (p50s.seen ?? NaN) / (p50s.cold ?? NaN),
    unit: 'ratio',
    detail: `worker loadMs p50, seen before ${ms(p50s.seen ?? NaN)} ms ÷ never seen ${ms(p50s.cold ?? NaN)} ms`,
  });
  return rows;
}

/** Draws model indices 0…n−1 with P(k) ∝ 1/(k+1)^s (0 the busiest), from `rand`. */
export function zipfPicker(n: number, s: number, rand: () => number): () => number {
  const weights = Array.from({ length: n }, (_, k) => 1 / (k + 1) ** s);
  const total = weights.reduce((a, b) => a + b, 0);
  let acc = 0;
  const cdf = weights.map((w) => (acc += w / total));
  return () => {
    const u = rand();
    const k = cdf.findIndex((c) => u < c);
    return k < 0 ? n - 1 : k;
  };
}

/** Poisson arrival times in ms from 0, `ratePerS` on average, until `durationS`. */
export function arrivalTimesMs(ratePerS: number, durationS: number, rand: () => number): number[] {
  const times: number[] = [];
  for (let t = 0; ; ) {
    t += (-Math.log(1 - rand()) / ratePerS) * 1000;
    if (t >= durationS * 1000) return times;
    times.push(t);
  }
}

/** The traffic a plan draws: arrival times and the model index of each job, the same for the same seed. */
export function zipfTraffic(plan: Pick<PoolLoadPlan, 'models' | 'ratePerS' | 'durationS' | 'seed'>): { atMs: number; model: number }[] {
  const rand = seededRandom(plan.seed);
  const pick = zipfPicker(plan.models, 1, rand);
  return arrivalTimesMs(plan.ratePerS, plan.durationS, rand).map((atMs) => ({ atMs, model: pick() }));
}

/** The hit ratio of an LRU cache of `capacity` over `sequence` with loads taking no time: a reference, not a target. */
export function lruHitRatio(sequence: readonly number[], capacity: number): number {
  const held: number[] = [];
  let hits = 0;
  for (const k of sequence) {
    const at = held.indexOf(k);
    if (at >= 0) {
      hits++;
      held.splice(at, 1);
    } else if (held.length >= capacity) held.shift();
    held.push(k);
  }
  return sequence.length > 0 ? hits / sequence.length : NaN;
}

/** `warmpool_pool_jobs_total` summed over its series by `resident` (Prometheus text). */
export function poolJobCounts(text: string): { hit: number; miss: number } {
  const counts = { hit: 0, miss: 0 };
  for (const m of text.matchAll(/^warmpool_pool_jobs_total\{([^}]*)\} ([\d.e+]+)$/gm)) {
    const resident = /resident="(hit|miss)"/.exec(m[1] ?? '')?.[1] as 'hit' | 'miss' | undefined;
    if (resident) counts[resident] += Number(m[2]);
  }
  return counts;
}

/** A model in a pool worker's heartbeat, as the router reads it. */
export interface ModelStateView {
  model: string;
  state: string;
}

const LOADING = new Set(['downloading', 'loading', 'warming']);

/**
 * The bench's plain router (`--placement bench`; the default is the pool controller): from the worker's
 * latest heartbeat, a job whose model is `active` there is the bench's own hit; for any other,
 * `ask` (an askLoad) is called once, unless the model is loading or was asked for and the worker
 * has not yet shown it (for `askTtlMs` at most: an ask lost with a restart is made again).
 */
export class MissRouter {
  private held = new Set<string>();
  private loading = new Set<string>();
  private readonly asked = new Map<string, number>();

  constructor(
    private readonly ask: (model: string) => void,
    private readonly now: () => number,
    private readonly askTtlMs = 30_000,
  ) {}

  /** The heartbeat's `models`. */
  observe(models: readonly ModelStateView[]): void {
    this.held = new Set(models.filter((m) => m.state === 'active').map((m) => m.model));
    this.loading = new Set(models.filter((m) => LOADING.has(m.state)).map((m) => m.model));
    const now = this.now();
    for (const [model, at] of this.asked) {
      if (this.held.has(model) || this.loading.has(model) || now - at > this.askTtlMs) this.asked.delete(model);
    }
  }

  /** True when `model` was active in the last heartbeat read; otherwise asks for its load (once) and says false. */
  route(model: string): boolean {
    if (this.held.has(model)) return true;
    if (!this.loading.has(model) && !this.asked.has(model)) {
      this.asked.set(model, this.now());
      this.ask(model);
    }
    return false;
  }

  /** Models the last heartbeat showed active. */
  get resident(): number {
    return this.held.size;
  }
}

export interface ZipfFigures {
  jobs: number;
  /** warmpool_pool_jobs_total by resident, over this run. */
  metric: { hit: number; miss: number };
  /** Jobs whose model the router saw active when it routed them. */
  benchHits: number;
  /** lruHitRatio over the same sequence, capacity `fits`. */
  lru: number;
  plan: PoolLoadPlan;
  memoryMb: number;
  /** Models active per heartbeat read: the most, and the mean. */
  heldMax: number;
  heldMean: number;
  /** Loads the worker made (warmpool_pool_model_loads_total{outcome="loaded"}). */
  loads: number;
  checked: number;
  /** Checked outputs that differ from ONNX Runtime's, or jobs that did not succeed among those checked. */
  wrong: number;
  router: string;
}

export const HIT_ROW = 'pool_hit_ratio_zipf';

/** The hit-ratio row: n/a when a checked output was wrong (a ratio of wrong answers is no figure). */
export function hitRow(f: ZipfFigures): BenchRow {
  const counted = f.metric.hit + f.metric.miss;
  const ratio = counted > 0 ? f.metric.hit / counted : NaN;
  const countNote = counted === f.jobs ? `all ${f.jobs} jobs counted` : `${counted} counted of ${f.jobs} jobs submitted: COUNTS DIFFER`;
  const outputs =
    f.wrong > 0 ? `${f.wrong} of ${f.checked} checked outputs WRONG` : `${f.checked} sampled outputs equal ONNX Runtime's for their model`;
  return {
    name: HIT_ROW,
    value: f.wrong > 0 ? NaN : ratio,
    unit: 'ratio',
    detail:
      `warmpool_pool_jobs_total{resident}: ${f.metric.hit} hit / ${f.metric.miss} miss, ${countNote}; ` +
      `the bench's own count (model active in the last heartbeat when routed) ${r2(f.benchHits / f.jobs)}; ` +
      `an LRU of ${f.plan.fits} with instant loads over the same sequence ${r2(f.lru)}; ` +
      `Zipf s=1 (seed ${f.plan.seed}) over ${f.plan.models} models, Poisson ${f.plan.ratePerS} jobs/s for ${f.plan.durationS} s, ` +
      `one pool worker from empty, --memory-mb ${f.memoryMb} (sized for ${f.plan.fits}): held ≤ ${f.heldMax} (mean ${f.heldMean.toFixed(1)}), ` +
      `${f.loads} loads; ${f.router}; ${outputs}`,
  };
}
