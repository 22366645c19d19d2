/**
 * A named shared pool (DESIGN §2, §8): workers not bound to a model, each holding several models
 * within a memory budget, that many deployments join (`warmpool deploy M --pool NAME`). A
 * deployment that names no pool keeps a pool of its own, as before pools existed.
 *
 * This module is the config and its rules, pure: the store (infra/deployments/pool-store.ts), the
 * API, the CLI, the worker and the scaler's pool planner all read the same record.
 *
 * Bounds, in workers of the pool (not per model):
 *   max      1..10000   the most workers the pool runs
 *   min      0..max     workers kept running even when idle (default 1, as a deployment's)
 *   standby  0..max     warmed workers holding no model, ready to become any member's (default 0)
 *   memoryMb 64..1048576  per worker, the budget for resident models, counted from measured
 *                       resident memory per session, not file sizes (default 1024)
 */
import { InvalidInputError } from '../kernel/errors.ts';

/**
 * A pool's name: 1–32 characters of lower-case letters, digits and `-`, starting with a letter
 * and not ending with `-` (a DNS label, shorter: it also names Kubernetes objects, Auto Scaling
 * groups, Redis keys and metric labels, each with a prefix of its own). `none` is reserved: it is
 * how the CLI says "no pool" (`warmpool deploy M --pool none`).
 */
export const POOL_NAME_PATTERN = /^[a-z](?:[a-z0-9-]{0,30}[a-z0-9])?$/;
export const RESERVED_POOL_NAMES: readonly string[] = ['none'];
export const POOL_NAME_RULE = "1–32 lower-case letters, digits and '-', starting with a letter and not ending with '-'";

export const MAX_POOL_WORKERS = 10_000;
export const MIN_POOL_MEMORY_MB = 64;
export const MAX_POOL_MEMORY_MB = 1_048_576;
export const POOL_DEFAULTS = { min: 1, standby: 0, memoryMb: 1024 } as const;

/** What a write sets. */
export interface SharedPoolConfig {
  /** The most workers the pool runs (≥ 1). */
  max: number;
  /** Workers kept running even when idle (0..max). */
  min: number;
  /** Warmed workers holding no model beyond those serving (0..max). */
  standby: number;
  /** Per worker: the budget for resident models, MB (≥ MIN_POOL_MEMORY_MB). */
  memoryMb: number;
}

/** A pool as stored. */
export interface SharedPool extends SharedPoolConfig {
  name: string;
  /** 1, 2, 3… per name, never reused, even across a delete. */
  revision: number;
  /** When this pool (since its last delete) was first written, ISO 8601. */
  createdAt: string;
  /** When this revision was written, ISO 8601. */
  updatedAt: string;
}

/** A whole config to write, with its name. */
export interface SharedPoolInput extends SharedPoolConfig {
  name: string;
}

/** A partial change (`warmpool pool set`, `PUT /v1/pools/{name}`): absent keeps the current value, or takes the default for a new pool. */
export interface SharedPoolChange {
  max?: number;
  min?: number;
  standby?: number;
  memoryMb?: number;
}

const invalid = (message: string) => new InvalidInputError('invalid_pool', message);

/** Why `name` is not a pool name, or undefined when it is one. */
export function poolNameProblem(name: unknown): string | undefined {
  if (typeof name !== 'string' || !POOL_NAME_PATTERN.test(name)) {
    return `invalid pool name ${JSON.stringify(name)}: a pool name is ${POOL_NAME_RULE}`;
  }
  if (RESERVED_POOL_NAMES.includes(name)) return `"${name}" is reserved (it means no pool) and cannot name a pool`;
  return undefined;
}

/** Throws 400 `invalid_pool` when `name` is not a pool name. */
export function assertPoolName(name: unknown): asserts name is string {
  const problem = poolNameProblem(name);
  if (problem) throw invalid(problem);
}

/** Checks a whole config; returns it with only its own fields. */
export function validateSharedPool(input: SharedPoolInput): SharedPoolInput {
  assertPoolName(input.name);
  const { max, min, standby, memoryMb } = input;
  if (!Number.isInteger(max) || max < 1 || max > MAX_POOL_WORKERS) {
    throw invalid(`max must be an integer between 1 and ${MAX_POOL_WORKERS} (got ${max})`);
  }
  for (const [key, value] of [
    ['min', min],
    ['standby', standby],
  ] as const) {
    if (!Number.isInteger(value) || value < 0) throw invalid(`${key} must be a non-negative integer (got ${value})`);
    if (value > max) throw invalid(`${key} (${value}) is above max (${max})`);
  }
  if (!Number.isInteger(memoryMb) || memoryMb < MIN_POOL_MEMORY_MB || memoryMb > MAX_POOL_MEMORY_MB) {
    throw invalid(`memoryMb must be an integer between ${MIN_POOL_MEMORY_MB} and ${MAX_POOL_MEMORY_MB} (got ${memoryMb})`);
  }
  return { name: input.name, max, min, standby, memoryMb };
}

/**
 * The whole config a change leads to. An existing pool keeps what the change leaves out; a new
 * one must be given `max`, and takes POOL_DEFAULTS for the rest (min at most max).
 */
export function applyPoolChange(name: string, current: SharedPoolConfig | null, change: SharedPoolChange): SharedPoolInput {
  const max = change.max ?? current?.max;
  if (max === undefined) throw invalid(`pool ${name} does not exist yet: a new pool needs max (the most workers it runs)`);
  return {
    name,
    max,
    min: change.min ?? current?.min ?? Math.min(POOL_DEFAULTS.min, max),
    standby: change.standby ?? current?.standby ?? POOL_DEFAULTS.standby,
    memoryMb: change.memoryMb ?? current?.memoryMb ?? POOL_DEFAULTS.memoryMb,
  };
}
