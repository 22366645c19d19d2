/**
 * How a deployment's canaries stand right now: the one computation behind both the guard's
 * decisions and `GET /v1/deployments/{model}/canary`, so the API shows what the guard sees.
 *
 * A deployment has a split when two or more versions have weight > 0. The stable version is
 * the one with the highest weight (the first listed on a tie, as `Deployment.version` says);
 * every other version with weight > 0 is a canary. Weight-0 versions are out of it.
 *
 * The breach carried between looks (verdict.ts) lives in Redis, so guards in several processes
 * and a restarted guard continue the same sustain period:
 *
 *   <prefix>:canary:breach:<model>:<version>   JSON Breach, expiring once it is too old to continue
 */

import { stableVersion, type VersionWeight } from '../deployments/deployment-store.ts';
import type { RedisClient } from '../redis/client.ts';
import { canaryBreachKey } from '../redis/keys.ts';
import type { OutcomeStore, WindowStats } from './outcomes.ts';
import { type Breach, type CanaryPolicy, judgeCanary, type Verdict } from './verdict.ts';

export interface Split {
  stable: VersionWeight;
  canaries: VersionWeight[];
}

export interface CanaryStanding {
  version: string;
  weight: number;
  window: WindowStats;
  verdict: Verdict;
  /** The breach to carry to the next look (null = none). */
  breach: Breach | null;
}

export interface Assessment {
  model: string;
  stable: { version: string; weight: number; window: WindowStats };
  canaries: CanaryStanding[];
}

export interface AssessorDeps {
  redis: RedisClient;
  prefix: string;
  outcomes: Pick<OutcomeStore, 'window'>;
  policy: CanaryPolicy;
  /** Longest gap between looks that still continues a breach (verdict.ts). */
  maxGapMs: number;
}

export interface Assessor {
  /** Reads windows and carried breaches; writes nothing. */
  assess(deployment: { model: string; versions: readonly VersionWeight[] }, split: Split, now: number): Promise<Assessment>;
  /** Stores (or clears) the breach a look produced. */
  saveBreach(model: string, version: string, breach: Breach | null): Promise<void>;
}

/** The split of a deployment, or null when fewer than two versions take traffic. */
export function splitOf(versions: readonly VersionWeight[]): Split | null {
  const served = versions.filter((v) => v.weight > 0);
  if (served.length < 2) return null;
  const stable = stableVersion(served);
  return {
    stable: served.find((v) => v.version === stable) as VersionWeight,
    canaries: served.filter((v) => v.version !== stable),
  };
}

export function createAssessor(deps: AssessorDeps): Assessor {
  const breachKey = (model: string, version: string) => canaryBreachKey(deps.prefix, model, version);
  // Past this a carried breach could not continue anyway (its lastSeenAt is too old).
  const breachTtlMs = Math.max(1000, 2 * deps.maxGapMs);

  async function carried(model: string, version: string): Promise<Breach | null> {
    const raw = await deps.redis.get(breachKey(model, version));
    if (!raw) return null;
    const b = JSON.parse(raw) as Partial<Breach>;
    return typeof b.since === 'number' && typeof b.lastSeenAt === 'number' ? { since: b.since, lastSeenAt: b.lastSeenAt } : null;
  }

  return {
    async assess(deployment, split, now) {
      const { model } = deployment;
      const stableWindow = await deps.outcomes.window(model, split.stable.version, now);
      const canaries = await Promise.all(
        split.canaries.map(async ({ version, weight }): Promise<CanaryStanding> => {
          const [window, previous] = await Promise.all([deps.outcomes.window(model, version, now), carried(model, version)]);
          const { verdict, breach } = judgeCanary({
            stable: stableWindow,
            canary: window,
            policy: deps.policy,
            now,
            previous,
            maxGapMs: deps.maxGapMs,
          });
          return { version, weight, window, verdict, breach };
        }),
      );
      return { model, stable: { ...split.stable, window: stableWindow }, canaries };
    },

    async saveBreach(model, version, breach) {
      if (breach) await deps.redis.set(breachKey(model, version), JSON.stringify(breach), 'PX', breachTtlMs);
      else await deps.redis.del(breachKey(model, version));
    },
  };
}
