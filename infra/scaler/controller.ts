/**
 * The scaler's controller (DESIGN §8, issue 4 §5): every tick, for each deployment, it reads the
 * arrival history, the backlog, the workers and what it has measured (per-worker throughput,
 * cold-start time), forecasts arrivals over the lead time, asks the policy what the pool should
 * be, applies that through the pool provider, and records the decision with all its inputs.
 *
 * Tick, as steps:
 *   1. leader lock (controller-lock.ts): take or renew it; a follower does nothing else. The lock
 *      is checked again before each deployment is applied, so a leader that lost it mid-tick
 *      (a long stall) stops acting;
 *   2. per deployment: observe (heartbeats, provider.list, queue stats, history, measurements),
 *      forecast over coldStartMs + one tick (a worker launched now serves after both), decide
 *      with the policy memory kept in Redis (a restarted or new leader continues the
 *      stabilisation window), plan worker actions (controller-plan.ts), apply them unless in
 *      shadow mode, record (decision-log.ts), set metrics;
 *   3. publish the metrics snapshot (leader only).
 *
 * Versions: the policy sees the versions with traffic as one pool — their workers, and the
 * backlog of their queues; versions without traffic only drain what they hold (controller-plan.ts).
 *
 * Shadow mode decides and records exactly the same way but calls no provider method at all (its
 * view of the workers comes from heartbeats), so it can run beside a live scaler — or any other
 * autoscaler — to judge a policy. It keeps its own lock, memory and measurements
 * (`<prefix>:scaler-shadow:*`) so it never holds the live scaler's lock or bends its memory;
 * its records go to the same decision streams, flagged `shadow: true`.
 *
 * Per-deployment overrides: a deployment's `policy` object may set `sloQueueWaitMs`,
 * `coldStartMs` (the model's default until a cold start is measured), `scaleDownStabilizationMs`,
 * `targetUtilization` and `minLifetimeColdStarts`; min, max and standby come from the deployment
 * itself. The policy is also told how long a full batch takes (the largest batch the workers'
 * warm-up chose, at the per-worker rate), and records which term set each number (`terms`).
 *
 * Lifecycle: start() runs ticks every `tickMs` until close(); tick() is one pass (tests, tools).
 * close() stops the loop, waits for a tick in flight, releases the lock; safe to call twice.
 * The Redis connection, the provider and the queue stats are the caller's: not closed here.
 */

import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { Registry } from 'prom-client';
import {
  type ArrivalSeries,
  emptyPolicyMemory,
  type Forecast,
  type PolicyDecision,
  type PolicyInput,
  type PolicyMemory,
  type PolicySettings,
  type PoolProvider,
  type Tuner,
  type TuningChoice,
} from '../contracts/pool.ts';
import { readCapacityRequest } from '../deployments/capacity-request.ts';
import type { Deployment, DeploymentStore } from '../deployments/deployment-store.ts';
import { type HeartbeatPayload, isPoolWorker, listHeartbeats } from '../fleet/worker-states.ts';
import type { Clock } from '../kernel/clock.ts';
import { errorMessage } from '../kernel/errors.ts';
import { once } from '../kernel/lifecycle.ts';
import type { Log } from '../kernel/log.ts';
import { createTicker } from '../kernel/ticker.ts';
import { type QueueStats, queuedJobs } from '../queue/index.ts';
import type { RedisClient } from '../redis/client.ts';
import { metricsKey, scalerLeaderKey, scalerMemoryKey } from '../redis/keys.ts';
import { publishMetricsSnapshot } from '../telemetry/metrics.ts';
import { decideCandidate } from './candidates.ts';
import { createLeaderLock } from './controller-lock.ts';
import { createScalerMetrics, observeDeployment, resetGauges } from './controller-metrics.ts';
import {
  batchServiceMs,
  chosenBatch,
  countWorkers,
  createColdStartMeter,
  createIntents,
  createThroughputMeter,
  observeWorkers,
} from './controller-observe.ts';
import { allocate, inApplyOrder, isSettled, planVersion, retireTargets, usableWorkers, type VersionView } from './controller-plan.ts';
import { createLiveTuning } from './controller-tuning.ts';
import { createDecisionLog, type ScalerAction } from './decision-log.ts';
import { overridesOf, type ScalerSettings } from './settings.ts';
import { type CountMark, countSince } from './tick-counts.ts';

/** Daily analogues for a week back plus the recent window, and the first weekly one (forecast.ts). */
export const DEFAULT_HISTORY_WINDOW_MS = 8 * 24 * 3600_000;

export interface ScalerControllerDeps {
  redis: RedisClient;
  prefix: string;
  deployments: Pick<DeploymentStore, 'list'>;
  history: {
    series(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
    /** Finished rows per minute: with both, the policy sees what arrived and was served each tick (tick-counts.ts). */
    completions?(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
    /** Finished rows that had waited past `lateSloMs`, per minute (the workers count them): the SLO control's errors. */
    late?(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
  };
  /** The SLO the workers count late rows against (SLO_QUEUE_WAIT_MS); a deployment whose policy sets another does without them. */
  lateSloMs?: number;
  queueStats: Pick<QueueStats, 'backlog'>;
  /** Required unless `shadow`; never called in shadow mode. */
  provider?: PoolProvider;
  forecast: (input: { series: ArrivalSeries; now: number; horizonS: number }) => Forecast;
  decide: (input: PolicyInput) => PolicyDecision;
  clock: Clock;
  log: Log;
  /** From the config (scalerSettingsFrom); a deployment's `policy` overrides them. */
  settings: ScalerSettings;
  shadow?: boolean;
  tickMs: number;
  /** Default 3 ticks (at least 5 s). */
  lockTtlMs?: number;
  /** Arrival history read per tick; default 8 days. */
  historyWindowMs?: number;
  /** The scaler's own registry; when given, the leader publishes it each tick (controller-metrics.ts). */
  metrics?: Registry;
  /** Names this controller in the lock and its records; default host-pid-random. */
  identity?: string;
  /**
   * Self-tuning (controller-tuning.ts): where retunes run, how often and with how much CPU; absent,
   * the deployment's own policy (`decide`) decides every tick.
   */
  tuning?: { tuner: Tuner; retuneIntervalMs: number; cpuBudgetMs: number };
}

export interface ScalerController {
  start(): void;
  tick(): Promise<void>;
  /** Whether the last tick held the leader lock. */
  isLeader(): boolean;
  close(): Promise<void>;
}

export function createScalerController(deps: ScalerControllerDeps): ScalerController {
  const shadow = deps.shadow ?? false;
  if (!shadow && !deps.provider) throw new Error('the scaler needs a pool provider unless it runs in shadow mode');
  const provider = shadow ? undefined : deps.provider;
  const { tickMs, settings } = deps;
  const windowMs = deps.historyWindowMs ?? DEFAULT_HISTORY_WINDOW_MS;
  const identity = deps.identity ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const lock = createLeaderLock(deps.redis, scalerLeaderKey(deps.prefix, shadow), identity, deps.lockTtlMs ?? Math.max(5_000, 3 * tickMs));
  const decisions = createDecisionLog(deps.redis, deps.prefix);
  /** Per deployment, where the last tick left the arrival and completion counts. */
  const marks = new Map<string, { arrived: CountMark; served?: CountMark; late?: CountMark }>();
  const throughput = createThroughputMeter(deps.redis, deps.prefix, shadow);
  const coldStarts = createColdStartMeter(deps.redis, deps.prefix, shadow);
  const metrics = deps.metrics ? createScalerMetrics(deps.metrics) : undefined;
  const memoryKey = (model: string) => scalerMemoryKey(deps.prefix, shadow, model);
  const tuning = deps.tuning
    ? createLiveTuning({
        ...deps.tuning,
        redis: deps.redis,
        prefix: deps.prefix,
        shadow,
        tickMs,
        onError: (model, err) => deps.log.warn({ model, err: errorMessage(err) }, 'scaler: retune failed; the choice in force stays'),
      })
    : undefined;
  // Two ticks: long enough for a command's effect to reach a heartbeat, short enough to recover.
  const intents = createIntents(Math.max(2 * tickMs, 5_000));
  let closed = false;
  let leader = false;

  async function loadMemory(model: string): Promise<PolicyMemory> {
    const raw = await deps.redis.get(memoryKey(model));
    if (!raw) return emptyPolicyMemory();
    try {
      const parsed = JSON.parse(raw) as PolicyMemory;
      if (!Array.isArray(parsed.recentDesired)) return emptyPolicyMemory();
      // A memory from before the pool's hold (or a foreign one) starts that window afresh.
      return Array.isArray(parsed.recentPool) ? parsed : { recentDesired: parsed.recentDesired };
    } catch {
      return emptyPolicyMemory();
    }
  }

  async function observeVersions(d: Deployment, beats: HeartbeatPayload[], now: number) {
    const listed = new Set(d.versions.map((v) => v.version));
    const unlisted = [...new Set(beats.filter((b) => b.model === d.model && !listed.has(b.version)).map((b) => b.version))];
    const ordered = [...d.versions].sort((a, b) => (a.version === d.version ? -1 : b.version === d.version ? 1 : b.weight - a.weight));
    const views: VersionView[] = [];
    for (const v of [...ordered, ...unlisted.map((version) => ({ version, weight: 0 }))]) {
      const workers = intents.overlay(await observeWorkers({ model: d.model, version: v.version }, beats, provider), now);
      views.push({ version: v.version, weight: v.weight, workers });
    }
    return { weighted: views.filter((v) => v.weight > 0), retired: views.filter((v) => v.weight === 0) };
  }

  function settingsFor(d: Deployment, measuredColdStartMs: number | undefined): PolicySettings {
    const own = overridesOf(d.policy);
    const base = { ...settings, ...own };
    return { ...base, min: d.min, max: d.max, standby: d.standby, coldStartMs: measuredColdStartMs ?? base.coldStartMs };
  }

  async function scaleDeployment(d: Deployment, beats: HeartbeatPayload[], now: number): Promise<void> {
    const { weighted, retired } = await observeVersions(d, beats, now);
    const weightedVersions = new Set(weighted.map((v) => v.version));
    const weightedBeats = beats.filter((b) => b.model === d.model && weightedVersions.has(b.version));
    const backlog = await deps.queueStats.backlog({ model: d.model, versions: [...weightedVersions] });
    const workers = countWorkers(weighted.flatMap((v) => v.workers));
    const coldStartSamplesMs = await coldStarts.observe(d.model, beats);
    const coldStart = await coldStarts.estimate(d.model);
    const s = settingsFor(d, coldStart.ms);
    const rate = await throughput.observe(d.model, weightedBeats, backlog);
    const perWorkerRatePerSec = rate.ratePerSec;
    const raw = await deps.history.series(d.model, now - windowMs, now);
    const observed = await observeTick(d.model, raw, now, deps.lateSloMs !== undefined && s.sloQueueWaitMs === deps.lateSloMs);
    const series = sinceFirstArrival(raw);
    const horizonS = Math.ceil((s.coldStartMs + tickMs) / 1000);
    const forecast = deps.forecast({ series, now, horizonS });
    const memory = await loadMemory(d.model);
    const capacityRequest = await readCapacityRequest(deps.redis, deps.prefix, d.model, now);
    const tuned = await tuning?.tick(d.model, {
      now,
      ...(observed ? { arrivedRows: observed.arrivedRows } : {}),
      series,
      settings: s,
      sloTarget: s.sloTarget ?? deps.settings.sloTarget,
      perWorkerRatePerSec,
      maxBatch: chosenBatch(weightedBeats),
      coldStartsMs: coldStart.values,
    });
    const input: PolicyInput = {
      now,
      forecast,
      backlog,
      workers,
      perWorkerRatePerSec,
      batchServiceMs: batchServiceMs(weightedBeats, perWorkerRatePerSec),
      settings: s,
      memory,
      ...(capacityRequest ? { capacityRequest } : {}),
      ...(observed ? { observed } : {}),
    };
    const decision = decideTuned(tuned, input, deps.decide);
    await deps.redis.set(memoryKey(d.model), JSON.stringify(decision.memory), 'PX', Math.max(86_400_000, 2 * s.scaleDownStabilizationMs));

    const ordered = await planActions(d.model, decision, weighted, retired);
    // Re-check the lock right before acting: a leader that stalled past its TTL must not act.
    const applied = provider && (await lock.acquire()) ? await apply(d.model, ordered) : [];
    await decisions.record({
      at: now,
      model: d.model,
      version: d.version,
      shadow,
      leader: identity,
      forecast,
      backlog,
      workers,
      perWorkerRatePerSec,
      perWorkerRateSource: rate.source,
      settings: s,
      coldStartSamples: coldStart.samples,
      ...(tuned ? { tuning: tuned } : {}),
      decision: {
        active: decision.active,
        standby: decision.standby,
        launch: decision.launch,
        drain: decision.drain,
        reasons: decision.reasons,
        ...(decision.terms ? { terms: decision.terms } : {}),
      },
      planned: ordered,
      applied,
    });
    if (metrics) {
      const all = [...weighted, ...retired].flatMap((v) => v.workers);
      observeDeployment(metrics, { model: d.model, workers: all, decision, forecast, backlog, coldStartSamplesMs });
    }
  }

  /** The decision as actions on each version's workers, the retired versions drained as their queues empty, in the order to apply. */
  async function planActions(
    model: string,
    decision: PolicyDecision,
    weighted: VersionView[],
    retired: VersionView[],
  ): Promise<ScalerAction[]> {
    const targets = allocate(decision, weighted);
    const settled = isSettled(targets, weighted);
    const planned: ScalerAction[] = targets.flatMap((t, i) => planVersion(t, weighted[i]?.workers ?? []));
    for (const view of retired) {
      const queued = queuedJobs(await deps.queueStats.backlog({ model, versions: [view.version] }));
      planned.push(...planVersion(retireTargets(view, queued, settled), view.workers));
    }
    return inApplyOrder(planned);
  }

  /**
   * Rows arrived and served since this deployment's last tick, and of those served the late ones
   * where the workers count them against this deployment's SLO; absent on its first (tick-counts.ts).
   */
  async function observeTick(model: string, arrivals: ArrivalSeries, now: number, countsLate: boolean): Promise<PolicyInput['observed']> {
    const prev = marks.get(model);
    const arrived = countSince(prev?.arrived, arrivals, now);
    const from = prev?.served?.minuteMs ?? now;
    const served = deps.history.completions ? countSince(prev?.served, await deps.history.completions(model, from, now), now) : undefined;
    const lateFrom = prev?.late?.minuteMs ?? now;
    const late = countsLate && deps.history.late ? countSince(prev?.late, await deps.history.late(model, lateFrom, now), now) : undefined;
    marks.set(model, { arrived: arrived.mark, ...(served ? { served: served.mark } : {}), ...(late ? { late: late.mark } : {}) });
    if (!prev || arrived.rows === undefined || served?.rows === undefined) return undefined;
    return {
      arrivedRows: arrived.rows,
      servedRows: served.rows,
      ...(late?.rows !== undefined ? { lateRows: late.rows } : {}),
      sinceMs: now - prev.arrived.at,
    };
  }

  /** Applies actions one by one; a failed one is recorded with its error and the rest still run. */
  async function apply(model: string, actions: ScalerAction[]): Promise<ScalerAction[]> {
    const p = provider as PoolProvider;
    const done: ScalerAction[] = [];
    for (const a of actions) {
      const target = { model, version: a.version };
      try {
        if (a.action === 'launch') await p.launch(target, a.count, { startAs: a.startAs });
        else if (a.action === 'activate') await p.setState(target, a.workerId, 'active');
        else if (a.action === 'standby') await p.setState(target, a.workerId, 'standby');
        else await p.drain(target, a.workerId);
        if (a.action !== 'launch')
          intents.remember(
            a.workerId,
            a.action === 'activate' ? 'active' : a.action === 'drain' ? 'draining' : 'standby',
            deps.clock.now(),
          );
        done.push(a);
      } catch (err) {
        const error = errorMessage(err);
        deps.log.warn({ model, ...a, err: error }, 'scaler: action failed');
        done.push({ ...a, error });
      }
    }
    if (done.length > 0) deps.log.info({ model, actions: done }, 'scaler applied');
    return done;
  }

  /** Workers of models no longer deployed drain once their queue is empty (a shared pool's worker is no model's). */
  async function retireUndeployed(deployed: Set<string>, beats: HeartbeatPayload[]): Promise<void> {
    if (!provider) return;
    const orphans = new Map<string, { model: string; version: string }>();
    for (const b of beats)
      if (!isPoolWorker(b) && !deployed.has(b.model)) orphans.set(`${b.model}@${b.version}`, { model: b.model, version: b.version });
    for (const target of orphans.values()) {
      const workers = usableWorkers(await observeWorkers(target, beats, provider));
      const queued = queuedJobs(await deps.queueStats.backlog({ model: target.model, versions: [target.version] }));
      const view = { version: target.version, weight: 0, workers };
      const actions = planVersion(retireTargets(view, queued, true), workers);
      if (actions.length > 0 && (await lock.acquire())) await apply(target.model, inApplyOrder(actions));
    }
  }

  async function tick(): Promise<void> {
    if (closed) return;
    leader = await lock.acquire();
    if (!leader) return;
    const now = deps.clock.now();
    const beats = await listHeartbeats(deps.redis, deps.prefix);
    const deployments = await deps.deployments.list();
    if (metrics) resetGauges(metrics);
    for (const d of deployments) {
      try {
        await scaleDeployment(d, beats, now);
      } catch (err) {
        // One deployment's trouble must not starve the others; the next tick redoes it all.
        deps.log.warn({ model: d.model, err: errorMessage(err) }, 'scaler: tick failed for a deployment');
      }
    }
    await retireUndeployed(new Set(deployments.map((d) => d.model)), beats);
    if (deps.metrics && !shadow) await publishMetricsSnapshot(deps.redis, metricsKey(deps.prefix, 'scaler'), deps.metrics, 3 * tickMs);
  }

  const ticker = createTicker({
    clock: deps.clock,
    intervalMs: tickMs,
    tick,
    onError: (err) => deps.log.warn({ err: errorMessage(err) }, 'scaler: tick failed; retrying'),
  });

  return {
    start: () => ticker.start(),
    tick,
    isLeader: () => leader,
    close: once(async () => {
      closed = true;
      await ticker.close();
      await tuning?.settle();
      leader = false;
      await lock.release();
    }),
  };
}

/**
 * The decision of the candidate a retune adopted, its reasons led by why; the deployment's own
 * policy when there is no choice in force or the choice is that policy as configured.
 */
export function decideTuned(
  tuned: TuningChoice | undefined,
  input: PolicyInput,
  own: (input: PolicyInput) => PolicyDecision,
): PolicyDecision {
  const c = tuned?.chosen;
  const plain = !c || (c.kind === 'predictive' && Object.keys(c.overrides).length === 0);
  const decision = plain ? own(input) : decideCandidate(c, input);
  if (!tuned) return decision;
  return { ...decision, reasons: [`self-tuning: ${tuned.chosen.name} (${tuned.why})`, ...decision.reasons] };
}

/**
 * The series from its first arrival on. The history reads a minute never written as 0, so a
 * model deployed an hour ago would show 8 days of "no demand" and the forecaster would trust
 * seasonality it has never seen; minutes before the first arrival in the window are no data,
 * which keeps the forecaster honest (reactive) until the history is really there. A deployment
 * with no arrivals at all keeps the last minute: an empty series says nothing.
 */
export function sinceFirstArrival(series: ArrivalSeries): ArrivalSeries {
  const first = series.perMinute.findIndex((n) => n > 0);
  const from = first === -1 ? Math.max(0, series.perMinute.length - 1) : first;
  if (from === 0) return series;
  return { startMs: series.startMs + from * 60_000, perMinute: series.perMinute.slice(from) };
}
