/**
 * Deployments: which model version the pool serves, and the pool's bounds. Stored as one Redis
 * hash per install (`<prefix>:deployments`, field = model) so the API, the dev pool and later
 * the scaler read the same record. `warmpool deploy` writes it.
 */
import type { Redis } from 'ioredis';
import { InvalidInputError } from './errors.ts';
import { MODEL_NAME_PATTERN, VERSION_PATTERN } from './manifest.ts';

export interface Deployment {
  model: string;
  version: string;
  /** Workers kept running even when idle (the dev pool keeps at least one). */
  min: number;
  max: number;
  /** Warmed workers held in standby beyond those active. */
  standby: number;
  updatedAt: string;
}

export type DeploymentInput = Omit<Deployment, 'updatedAt'>;

export interface DeploymentStore {
  get(model: string): Promise<Deployment | null>;
  list(): Promise<Deployment[]>;
  put(input: DeploymentInput): Promise<Deployment>;
  remove(model: string): Promise<boolean>;
}

export function validateDeployment(input: DeploymentInput): DeploymentInput {
  if (!MODEL_NAME_PATTERN.test(input.model)) throw new InvalidInputError('invalid_deployment', `invalid model name "${input.model}"`);
  if (!VERSION_PATTERN.test(input.version)) throw new InvalidInputError('invalid_deployment', `invalid version "${input.version}"`);
  for (const key of ['min', 'max', 'standby'] as const) {
    const v = input[key];
    if (!Number.isInteger(v) || v < 0 || v > 10_000) {
      throw new InvalidInputError('invalid_deployment', `${key} must be an integer between 0 and 10000 (got ${v})`);
    }
  }
  if (input.max < input.min) throw new InvalidInputError('invalid_deployment', `max (${input.max}) is below min (${input.min})`);
  if (input.max < 1) throw new InvalidInputError('invalid_deployment', 'max must be at least 1');
  return input;
}

export function createDeploymentStore(redis: Redis, prefix: string, now: () => number = Date.now): DeploymentStore {
  const key = `${prefix}:deployments`;
  return {
    async get(model) {
      const raw = await redis.hget(key, model);
      return raw ? (JSON.parse(raw) as Deployment) : null;
    },
    async list() {
      const all = await redis.hgetall(key);
      return Object.values(all)
        .map((raw) => JSON.parse(raw) as Deployment)
        .sort((a, b) => a.model.localeCompare(b.model));
    },
    async put(input) {
      const deployment: Deployment = { ...validateDeployment(input), updatedAt: new Date(now()).toISOString() };
      await redis.hset(key, input.model, JSON.stringify(deployment));
      return deployment;
    },
    async remove(model) {
      return (await redis.hdel(key, model)) > 0;
    },
  };
}
