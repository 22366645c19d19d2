/**
 * A model's canary status as the API shows it: the guard's events (newest first) and, while the
 * deployment has a split, how each canary stands now. `current` comes from the same assessor
 * the guard decides with, read-only: it reflects the outcomes the guard has aggregated so far
 * and the breach it carries, and never ingests or acts itself.
 */

import type { VersionWeight } from '../deployments/deployment-store.ts';
import type { RedisClient } from '../redis/client.ts';
import { createAssessor, splitOf } from './assessment.ts';
import { type CanaryEvent, listCanaryEvents } from './event-log.ts';
import { canaryMaxGapMs, DEFAULT_CANARY_TICK_MS } from './guard.ts';
import { createOutcomeStore, type WindowStats } from './outcomes.ts';
import { type CanaryPolicy, DEFAULT_CANARY_POLICY, type Verdict } from './verdict.ts';

export interface CanaryStatus {
  model: string;
  events: CanaryEvent[];
  current?: {
    stable: { version: string; weight: number; window: WindowStats };
    canaries: Array<{ version: string; weight: number; window: WindowStats; verdict: Verdict }>;
  };
}

export interface CanaryStatusDeps {
  redis: RedisClient;
  prefix: string;
  /** The guard's policy and tick, so verdicts here match its. Defaults: the guard's. */
  policy?: Partial<CanaryPolicy>;
  tickMs?: number;
}

export function createCanaryStatusReader(deps: CanaryStatusDeps): {
  read(model: string, deployment: { versions: readonly VersionWeight[] } | null, now: number): Promise<CanaryStatus>;
} {
  const policy: CanaryPolicy = { ...DEFAULT_CANARY_POLICY, ...deps.policy };
  const assessor = createAssessor({
    redis: deps.redis,
    prefix: deps.prefix,
    outcomes: createOutcomeStore({ redis: deps.redis, prefix: deps.prefix, windowMs: policy.windowMs }),
    policy,
    maxGapMs: canaryMaxGapMs(deps.tickMs ?? DEFAULT_CANARY_TICK_MS),
  });
  return {
    async read(model, deployment, now) {
      const status: CanaryStatus = { model, events: await listCanaryEvents(deps.redis, deps.prefix, model) };
      const split = deployment ? splitOf(deployment.versions) : null;
      if (!deployment || !split) return status;
      const { stable, canaries } = await assessor.assess({ model, versions: deployment.versions }, split, now);
      status.current = { stable, canaries: canaries.map(({ version, weight, window, verdict }) => ({ version, weight, window, verdict })) };
      return status;
    },
  };
}
