/**
 * The canary guard: every tick, for each deployment with a split (assessment.ts), it folds the
 * versions' new stream entries into the window aggregates (outcomes.ts), judges each canary
 * against the stable version (verdict.ts), and rolls back a canary whose breach has lasted
 * `sustainMs`: its weight goes to 0 and its share to the stable version, written through the
 * deployment store (a new revision, so `GET …/history` shows it), and a canary event is recorded.
 *
 * Several guards may run at once (beside each dispatcher, say): aggregation is exactly once
 * (outcomes.ts), breaches live in Redis, and the rollback is a compare-and-set on the
 * deployment that re-checks, on the record it replaces, that the canary still has weight and
 * the stable version is still the one judged. A guard that finds it already done writes nothing.
 *
 * Lifecycle: start() runs ticks every `tickMs` until close(); tick() is one pass, for tests and
 * tools. close() stops the loop, waits for a tick in flight, and is safe to call twice. The
 * Redis connection is the caller's: not closed here.
 */

import { configOf, type Deployment, type DeploymentStore } from '../deployments/deployment-store.ts';
import type { Clock } from '../kernel/clock.ts';
import { CANARY_DEFAULTS } from '../kernel/config.ts';
import { errorMessage } from '../kernel/errors.ts';
import type { Log } from '../kernel/log.ts';
import { createTicker } from '../kernel/ticker.ts';
import type { RedisClient } from '../redis/client.ts';
import { type Assessment, type CanaryStanding, createAssessor, type Split, splitOf } from './assessment.ts';
import { recordCanaryEvent } from './event-log.ts';
import { createOutcomeStore } from './outcomes.ts';
import { type CanaryPolicy, DEFAULT_CANARY_POLICY } from './verdict.ts';

/** The guard's period where none is given (CANARY_TICK_MS's default). */
export const DEFAULT_CANARY_TICK_MS = CANARY_DEFAULTS.tickMs;

/** A breach continues across a missed tick or two; past three tick periods unseen, it starts over. */
export function canaryMaxGapMs(tickMs: number): number {
  return 3 * tickMs;
}

export interface CanaryGuardDeps {
  redis: RedisClient;
  prefix: string;
  deployments: Pick<DeploymentStore, 'list' | 'update'>;
  clock: Clock;
  log: Log;
  policy?: Partial<CanaryPolicy>;
  /** Default DEFAULT_CANARY_TICK_MS. */
  tickMs?: number;
  /** Default canaryMaxGapMs(tickMs). */
  maxGapMs?: number;
}

export interface CanaryGuard {
  start(): void;
  tick(): Promise<void>;
  close(): Promise<void>;
}

/** Thrown inside the deployment update to leave the record as it is (someone else acted first). */
class Superseded extends Error {}

export function createCanaryGuard(deps: CanaryGuardDeps): CanaryGuard {
  const tickMs = deps.tickMs ?? DEFAULT_CANARY_TICK_MS;
  const policy: CanaryPolicy = { ...DEFAULT_CANARY_POLICY, ...deps.policy };
  const outcomes = createOutcomeStore({ redis: deps.redis, prefix: deps.prefix, windowMs: policy.windowMs });
  const assessor = createAssessor({
    redis: deps.redis,
    prefix: deps.prefix,
    outcomes,
    policy,
    maxGapMs: deps.maxGapMs ?? canaryMaxGapMs(tickMs),
  });
  let closing: Promise<void> | undefined;

  async function guardDeployment(deployment: Deployment, split: Split, now: number): Promise<void> {
    for (const v of [split.stable, ...split.canaries]) await outcomes.ingest(deployment.model, v.version, now);
    const assessment = await assessor.assess(deployment, split, now);
    for (const canary of assessment.canaries) {
      if (canary.verdict.state === 'failing' && canary.verdict.rollback) await rollback(assessment, canary, now);
      else await assessor.saveBreach(deployment.model, canary.version, canary.breach);
    }
  }

  async function rollback(assessment: Assessment, canary: CanaryStanding, now: number): Promise<void> {
    const { model, stable } = assessment;
    try {
      const written = await deps.deployments.update(model, (current) => {
        const target = current?.versions.find((v) => v.version === canary.version);
        if (!current || !target || target.weight === 0 || current.version !== stable.version) throw new Superseded();
        const versions = current.versions.map((v) => {
          if (v.version === canary.version) return { ...v, weight: 0 };
          if (v.version === stable.version) return { ...v, weight: v.weight + target.weight };
          return v;
        });
        return { ...configOf(current), model, versions };
      });
      const reason = reasonOf(canary, now);
      await recordCanaryEvent(deps.redis, deps.prefix, {
        model,
        version: canary.version,
        action: 'rollback',
        at: new Date(now).toISOString(),
        reason,
        revision: written.revision,
        stable,
        canary: { version: canary.version, weight: canary.weight, window: canary.window },
      });
      deps.log.info({ model, version: canary.version, stable: stable.version, revision: written.revision, reason }, 'canary rolled back');
    } catch (err) {
      if (!(err instanceof Superseded)) throw err;
    } finally {
      await assessor.saveBreach(model, canary.version, null);
    }
  }

  async function tick(): Promise<void> {
    const now = deps.clock.now();
    for (const deployment of await deps.deployments.list()) {
      const split = splitOf(deployment.versions);
      if (!split) continue;
      try {
        await guardDeployment(deployment, split, now);
      } catch (err) {
        // One deployment's trouble (Redis hiccup, a lost write race) must not starve the others;
        // nothing was half-done that the next tick cannot redo.
        deps.log.warn({ err: errorMessage(err), model: deployment.model }, 'canary guard: tick failed for a deployment');
      }
    }
  }

  const ticker = createTicker({
    clock: deps.clock,
    intervalMs: tickMs,
    tick,
    onError: (err) => deps.log.warn({ err: errorMessage(err) }, 'canary guard: tick failed; retrying'),
  });

  return {
    start: () => ticker.start(),
    tick,
    close() {
      closing ??= ticker.close();
      return closing;
    },
  };
}

function reasonOf(canary: CanaryStanding, now: number): string {
  if (canary.verdict.state !== 'failing') return canary.verdict.state;
  const seconds = Math.round((now - canary.verdict.since) / 1000);
  return `${canary.verdict.reasons.join('; ')}, sustained ${seconds} s`;
}
