/**
 * `warmpool simulate --shared-pool …` (issue 31 §5): many models on one shared pool, from one of
 * three worlds —
 *
 *   --trace F --model-col M [--time-col T] [--count-col C]   a trace with a model column
 *   --trace F --split-models N [--seed S]                    a single-model trace split by Zipf
 *   --generate-models N [--rate R] [--seed S]                a generated world (days: --history-days + --days)
 *
 * — replayed through shared, per-model, keep-alive and oracle, each at the --slo-target
 * (infra/simulator many-model-compare.ts), with a worker's memory (--memory-mb), a model's
 * resident memory (--model-memory-mb) and load time (--model-load-s), and at most
 * --models-per-worker resident. Writes report.json and report.md to --out and prints the table.
 */

import { SIMULATE_DEFAULTS } from '../../infra/kernel/config.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import {
  comparePool,
  defaultSettings,
  generateManyModelWorld,
  type ManyModelTrace,
  type ModelSpec,
  POOL_REPLAYS,
  type PoolWorldInfo,
  type PoolWorldInput,
  poolChecks,
  poolTable,
  readManyModelTraceFile,
  readTraceFile,
  realiseCounts,
  type SimulationSettings,
  splitIntoModels,
  writePoolReport,
} from '../../infra/simulator/index.ts';
import type { SimulateOut } from './simulate-out.ts';
import { withProgress } from './simulate-progress.ts';

export const SHARED_DEFAULTS = { memoryMb: 8192, modelMemoryMb: 256, modelLoadS: 3, rate: 20, generatedDays: 1 } as const;

export interface SharedPoolArgs {
  trace?: string;
  timeColumn?: string;
  countColumn?: string;
  modelColumn?: string;
  splitModels?: number;
  generateModels?: number;
  rate?: number;
  modelLoadS?: number;
  modelsPerWorker?: number;
  memoryMb?: number;
  modelMemoryMb?: number;
  given: Partial<SimulationSettings>;
  sloTarget: number;
  dir: string;
}

export async function sharedPoolMain(a: SharedPoolArgs, out: SimulateOut): Promise<number> {
  const memoryMb = a.memoryMb ?? SHARED_DEFAULTS.memoryMb;
  const modelMemoryMb = a.modelMemoryMb ?? SHARED_DEFAULTS.modelMemoryMb;
  if (modelMemoryMb > memoryMb) {
    throw new InvalidInputError(
      'invalid_flag',
      `--model-memory-mb ${modelMemoryMb} is more than a worker's --memory-mb ${memoryMb}: no worker could hold a model`,
    );
  }
  const loadMs = (a.modelLoadS ?? SHARED_DEFAULTS.modelLoadS) * 1000;
  const generated = a.generateModels !== undefined;
  const given = generated ? { historyDays: 1, days: SHARED_DEFAULTS.generatedDays, ...defined(a.given) } : a.given;
  const sim = defaultSettings(SIMULATE_DEFAULTS, given);
  const { world, info } = worldOf(a, sim, { loadMs, modelMemoryMb, memoryMb });
  const settings = {
    sim,
    memoryMb,
    assumedLoadMs: loadMs,
    ...(a.modelsPerWorker !== undefined ? { modelsPerWorker: a.modelsPerWorker } : {}),
  };
  const comparison = await withProgress(out, 'replays', POOL_REPLAYS, (counter) => comparePool(world, settings, a.sloTarget, counter));
  writePoolReport(a.dir, info, comparison, { ...settings, modelMemoryMb, modelLoadS: loadMs / 1000 });
  out.out(`${poolTable(comparison)}\n\n${poolChecks(comparison)}\n\nwrote ${a.dir}/report.json and ${a.dir}/report.md\n`);
  return 0;
}

function worldOf(
  a: SharedPoolArgs,
  sim: SimulationSettings,
  m: { loadMs: number; modelMemoryMb: number; memoryMb: number },
): { world: PoolWorldInput; info: PoolWorldInfo } {
  const uniform = (t: ManyModelTrace): ModelSpec[] => t.models.map((name) => ({ name, loadMs: m.loadMs, memoryMb: m.modelMemoryMb }));
  if (a.generateModels !== undefined) {
    const days = sim.historyDays + (sim.days ?? SHARED_DEFAULTS.generatedDays);
    const g = generateManyModelWorld({ models: a.generateModels, days, seed: sim.seed, totalPerSec: a.rate ?? SHARED_DEFAULTS.rate });
    const specs = g.trace.models.map((name, k) => ({
      name,
      loadMs: m.loadMs * (g.loadFactor[k] ?? 1),
      // A drawn size never exceeds a worker's budget: a model no worker can hold is a configuration error, not a world.
      memoryMb: Math.min(m.modelMemoryMb * (g.memoryFactor[k] ?? 1), m.memoryMb),
    }));
    const source = `generated: ${a.generateModels} models, ${a.rate ?? SHARED_DEFAULTS.rate} requests/s, seed ${sim.seed}`;
    return { world: { trace: g.trace, specs }, info: infoOf(source, g.trace) };
  }
  if (!a.trace)
    throw new InvalidInputError(
      'invalid_flag',
      '--shared-pool needs --trace FILE.csv (with --model-col or --split-models) or --generate-models N',
    );
  if (a.modelColumn !== undefined) {
    const read = readManyModelTraceFile(a.trace, {
      modelColumn: a.modelColumn,
      ...opt('timeColumn', a.timeColumn),
      ...opt('countColumn', a.countColumn),
    });
    const trace = sim.scale === 1 ? read : scaled(read, sim);
    return { world: { trace, specs: uniform(trace) }, info: infoOf(a.trace, trace) };
  }
  if (a.splitModels === undefined) {
    throw new InvalidInputError(
      'invalid_flag',
      `--shared-pool with --trace needs --model-col NAME (the trace names each row's model) or --split-models N`,
    );
  }
  const single = readTraceFile(a.trace, { ...opt('timeColumn', a.timeColumn), ...opt('countColumn', a.countColumn) });
  const trace = splitIntoModels(single, a.splitModels, sim.seed, sim.scale);
  return {
    world: { trace, specs: uniform(trace) },
    info: infoOf(`${a.trace} split into ${a.splitModels} models (Zipf, seed ${sim.seed})`, trace),
  };
}

function scaled(t: ManyModelTrace, sim: SimulationSettings): ManyModelTrace {
  return { ...t, perMinute: t.perMinute.map((s, k) => realiseCounts(s, t.missing, sim.scale, sim.seed + k)) };
}

function infoOf(source: string, t: ManyModelTrace): PoolWorldInfo {
  const requests = t.perMinute.reduce((n, s) => n + s.reduce((a, b) => a + b, 0), 0);
  return { source, models: t.models.length, minutes: t.missing.length, requests };
}

function opt<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}

function defined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
