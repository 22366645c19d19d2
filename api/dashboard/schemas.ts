/**
 * The dashboard's JSON routes as zod schemas: the routes parse their queries with them, and the
 * OpenAPI table (api/openapi/operations.ts) documents the routes with them.
 */
import { z } from 'zod';
import { MAX_SERIES_MINUTES } from '../use-cases/deployment-series.ts';
import { MAX_SIMULATION_MINUTES } from '../use-cases/simulate-deployment.ts';

const minutes = (max: number, fallback: number) =>
  z.coerce.number().int().min(1).max(max).default(fallback).describe(`Minutes back from now, 1–${max}`);
const count = z.coerce.number().int().min(0).max(10_000);

export const SeriesQuery = z.object({ minutes: minutes(MAX_SERIES_MINUTES, 15) });

export const SimulationQuery = z.object({
  minutes: minutes(MAX_SIMULATION_MINUTES, 60),
  min: count.optional().describe('Policy to try: min workers (default: the deployment’s)'),
  max: count.optional().describe('Policy to try: max workers'),
  standby: count.optional().describe('Policy to try: warmed standby workers'),
  targetUtilization: z.coerce.number().gt(0).max(1).optional().describe('Policy to try: target utilisation of active workers'),
  sloMs: z.coerce
    .number()
    .int()
    .min(1)
    .max(86_400_000)
    .optional()
    .describe('Queue-wait SLO the runs are judged by (default: the policy’s)'),
});

export const Session = z.object({
  tenant: z.string(),
  admin: z.boolean().describe('Whether this tenant may change deployments (ADMIN_TENANTS)'),
});

const nums = z.array(z.number());
const maybeNums = z.array(z.number().nullable());

export const DeploymentSeries = z.object({
  model: z.string(),
  at: z.number().describe('Epoch ms'),
  minutes: z.number().int(),
  arrivals: z
    .object({ t: nums, perMin: nums, cachedPerMin: nums, servedPerMin: nums, forecastPerMin: maybeNums })
    .describe(
      'Per minute (t in epoch s): online rows arrived that need a worker, rows the result cache answered at submit (not arrivals: no worker ran for them), rows served (online and bulk), and rows per minute the scaler forecast',
    ),
  pool: z
    .object({
      t: nums,
      queued: nums,
      running: nums,
      oldestAgeS: nums,
      starting: nums,
      standby: nums,
      active: nums,
      draining: nums,
    })
    .describe('Per sample (t in epoch s): jobs waiting and running, the oldest waiting job’s age, workers by state'),
  batches: z
    .object({ t: nums, meanRows: maybeNums, waitP50Ms: maybeNums, waitP95Ms: maybeNums, waitP99Ms: maybeNums, jobs: nums })
    .describe('Per interval between samples: mean rows per forward pass, queue-wait percentiles, jobs taken'),
});

const workerSeconds = z.object({ active: z.number(), standby: z.number(), starting: z.number(), total: z.number() });
const policySettings = z.object({
  min: z.number(),
  max: z.number(),
  standby: z.number(),
  sloQueueWaitMs: z.number(),
  coldStartMs: z.number(),
  scaleDownStabilizationMs: z.number(),
  targetUtilization: z.number(),
});

export const Simulation = z.object({
  model: z.string(),
  from: z.number(),
  to: z.number(),
  minutes: z.number().int().describe('Minutes replayed: those asked for, or fewer when the deployment was observed for less of them'),
  requestedMinutes: z.number().int(),
  sloMs: z.number(),
  world: z
    .object({
      source: z
        .enum(['profile+measured', 'profile', 'measured', 'assumed'])
        .describe(
          'Where the simulated worker’s speed comes from: the batch profile, the per-worker rate the scaler measured under load, both, or neither',
        ),
      workerRowsPerSec: z.number().describe('Rows/s one simulated worker serves at a full batch'),
      measuredRowsPerSec: z.number().nullable().describe('The scaler’s per-worker rate measured under load; null before it has one'),
      profileRowsPerSec: z.number().nullable().describe('Warm-up’s rows/s at its chosen batch (forward passes only)'),
      jobOverheadMs: z.number().describe('Per job (row) beyond the forward pass: fitted so the simulated rate equals the measured one'),
      maxBatch: z.number(),
      missing: z.array(z.string()).describe('What was not measured and what was assumed instead, in words'),
      coldStartMs: z.number(),
      coldStartMeasured: z.boolean(),
      batchProfile: z.boolean(),
      historyMinutes: z.number(),
      replayedRows: z.number(),
    })
    .describe('The simulated world, from the deployment’s measurements'),
  runs: z
    .array(
      z.object({
        name: z.enum(['current', 'chosen']),
        settings: policySettings,
        cost: z.number().describe('Worker-seconds: active + starting + standby'),
        workerSeconds,
        jobs: z.number(),
        sloAttainment: z.number(),
        queueWaitMs: z.object({ p50: z.number(), p95: z.number(), p99: z.number(), max: z.number() }),
        coldStarts: z.number(),
      }),
    )
    .describe('The recorded arrivals replayed through the policy with the current and the chosen settings'),
  actual: z
    .object({
      observedMinutes: z.number(),
      workerSeconds,
      cost: z.number(),
      jobs: z.number(),
      sloAttainment: z.number().nullable(),
      queueWaitP95Ms: z.number().nullable(),
      waitSamples: z.number().describe('Dashboard samples in the window that carry queue waits'),
      note: z.string().nullable().describe('Why there are no queue waits, when there are none'),
    })
    .describe('What the deployment actually did over the window, as far as it was observed'),
  inProgress: z
    .object({ rows: z.number(), jobs: z.number(), endsAt: z.number() })
    .describe('The minute in progress, in neither row: rows arrived and jobs sampled so far, and when it ends (epoch ms)'),
  atSlo: z
    .object({
      target: z.number().describe('Share of jobs within the SLO each baseline was sized to reach'),
      baselines: z.array(
        z.object({
          name: z.string(),
          setting: z.enum(['workers', 'backlogPerWorker', 'headroom']).describe('The knob searched'),
          asIs: z.object({ value: z.number(), sloAttainment: z.number(), cost: z.number() }),
          atSlo: z
            .object({
              met: z.boolean(),
              value: z.number().nullable(),
              sloAttainment: z.number(),
              cost: z.number().nullable(),
              reason: z.string().nullable(),
            })
            .describe('The cheapest setting meeting the target; value and cost are null when no setting tried met it (reason says why)'),
          ratio: z
            .record(z.enum(['current', 'chosen']), z.object({ asIs: z.number().nullable(), atSlo: z.number().nullable() }))
            .describe('The simulated run’s cost ÷ this baseline’s, as-is and at the SLO target'),
        }),
      ),
      error: z.string().nullable().describe('Why there are no baselines: the search ran past its CPU-time budget'),
    })
    .describe('The baselines (static-peak, reactive, oracle) as-is and at the SLO target, on the same arrivals: costs at equal attainment'),
  pool: z.object({ t: nums, actual: maybeNums, current: nums, chosen: nums }).describe('Workers in the pool per interval'),
});
