/**
 * Synthetic many-model worlds (issue 31 §5) to develop on: `models` models whose popularity is
 * Zipf (ZIPF_EXPONENT), each with its own diurnal cycle (amplitude and phase drawn per model:
 * tenants in other time zones and products peak at other hours), and bursts (a Poisson number a
 * day per model, each a few minutes at several times the model's rate: a batch job, a demo, a
 * retry storm). Counts per minute are Poisson draws of the rate. Each model also draws its
 * resident memory and load time around the given means (×0.5 … ×2, log-uniform: model sizes
 * spread over orders of magnitude, but a pool's members are of one kind). Seeded (kernel's
 * seededRandom): the same seed gives the same world.
 */
import { seededRandom } from '../kernel/seeded-random.ts';
import type { ManyModelTrace } from './many-model-trace.ts';
import { zipfShares } from './many-model-trace.ts';

const MINUTE_MS = 60_000;
const DAY_MIN = 1440;
/** Bursts a day per model, on average. */
const BURSTS_PER_DAY = 2;

export interface GeneratorOptions {
  models: number;
  days: number;
  seed: number;
  /** The pool's mean arrival rate, requests/s, over all models. */
  totalPerSec: number;
  /** Epoch ms of minute 0 (default 2026-01-05, a Monday, 00:00 UTC). */
  startMs?: number;
}

export interface GeneratedWorld {
  trace: ManyModelTrace;
  /** Per model, a factor on the mean memory and on the mean load time. */
  memoryFactor: number[];
  loadFactor: number[];
}

export function generateManyModelWorld(o: GeneratorOptions): GeneratedWorld {
  const random = seededRandom(o.seed >>> 0);
  const minutes = Math.round(o.days * DAY_MIN);
  const shares = zipfShares(o.models);
  const perMinute: number[][] = [];
  const memoryFactor: number[] = [];
  const loadFactor: number[] = [];
  for (let k = 0; k < o.models; k++) {
    const amplitude = 0.2 + 0.6 * random();
    const phase = 2 * Math.PI * random();
    const base = o.totalPerSec * 60 * (shares[k] as number);
    const boost = new Float64Array(minutes).fill(1);
    const bursts = poisson(BURSTS_PER_DAY * o.days, random);
    for (let b = 0; b < bursts; b++) {
      const at = Math.floor(random() * minutes);
      const lasts = 2 + Math.floor(random() * 14);
      const times = 3 + 7 * random();
      for (let i = at; i < Math.min(minutes, at + lasts); i++) boost[i] = times;
    }
    const series = new Array<number>(minutes);
    for (let i = 0; i < minutes; i++) {
      const day = 1 + amplitude * Math.sin((2 * Math.PI * i) / DAY_MIN + phase);
      series[i] = poisson(base * day * (boost[i] as number), random);
    }
    perMinute.push(series);
    memoryFactor.push(2 ** (2 * random() - 1));
    loadFactor.push(2 ** (2 * random() - 1));
  }
  const width = String(o.models).length;
  return {
    trace: {
      startMs: o.startMs ?? Date.UTC(2026, 0, 5),
      models: shares.map((_, k) => `g${String(k + 1).padStart(width, '0')}`),
      perMinute,
      missing: new Array<boolean>(minutes).fill(false),
      rows: perMinute.reduce((t, s) => t + s.reduce((a, b) => a + b, 0), 0),
    },
    memoryFactor,
    loadFactor,
  };
}

/** Poisson(mean): Knuth's product for small means, the normal approximation past 30. */
function poisson(mean: number, random: () => number): number {
  if (mean <= 0) return 0;
  if (mean > 30) {
    const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    return Math.max(0, Math.round(mean + z * Math.sqrt(mean)));
  }
  const limit = Math.exp(-mean);
  let k = 0;
  for (let p = random(); p > limit; p *= random()) k++;
  return k;
}

export { MINUTE_MS };
