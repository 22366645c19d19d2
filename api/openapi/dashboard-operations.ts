/** The dashboard's routes in the operation table (api/openapi/operations.ts): its page and assets, and its JSON routes. */
import { z } from 'zod';
import { DeploymentSeries, SeriesQuery, Session, Simulation, SimulationQuery } from '../dashboard/schemas.ts';
import { authed, DEMO_MODEL, model, notDeployed, type OperationSpec, type ResponseSpec } from './operation-spec.ts';
import * as S from './schemas.ts';

const badQuery: ResponseSpec = { description: 'Bad query', schema: S.ErrorBody, codes: ['invalid_query'] };

export const DASHBOARD_OPERATIONS: readonly OperationSpec[] = [
  {
    operationId: 'dashboard',
    method: 'get',
    path: '/dashboard',
    tag: 'Dashboard',
    summary: 'The operator dashboard (a page; it asks for an API key and sends it with every data call)',
    auth: false,
    responses: { 200: { description: 'The page', schema: S.HtmlPage, contentType: 'text/html' } },
    example: { status: 200 },
  },
  {
    operationId: 'dashboardAsset',
    method: 'get',
    path: '/dashboard/assets/:file',
    tag: 'Dashboard',
    summary: 'The dashboard’s script, stylesheet and uPlot, cached as immutable (their URLs carry a content hash)',
    auth: false,
    params: { file: z.string().describe('dashboard.js, dashboard.css, uPlot.iife.min.js or uPlot.min.css') },
    responses: {
      200: {
        description: 'The file (`.css` files are text/css)',
        schema: S.HtmlPage.describe('JavaScript'),
        contentType: 'text/javascript',
      },
      404: { description: 'No such asset', schema: S.ErrorBody, codes: ['asset_not_found'] },
    },
    example: { params: { file: 'dashboard.js' }, status: 200 },
  },
  {
    operationId: 'session',
    method: 'get',
    path: '/v1/session',
    tag: 'Dashboard',
    summary: 'Who this API key is, and whether it may change deployments',
    auth: true,
    responses: { 200: { description: 'The key’s tenant', schema: Session }, ...authed },
    example: { status: 200 },
  },
  {
    operationId: 'deploymentSeries',
    method: 'get',
    path: '/v1/deployments/:model/series',
    tag: 'Dashboard',
    summary: 'A deployment’s recent arrivals and forecast, queue, workers by state, batch sizes and queue waits, as chart series',
    description:
      'Arrivals are the per-minute counters the scaler forecasts from; the forecast comes from its decision records. ' +
      'Queue, workers, batch sizes and queue waits are sampled by this route (at most one sample per model every 2 s, ' +
      'however many dashboards poll), so their record grows while a dashboard is open.',
    auth: true,
    params: model,
    query: SeriesQuery,
    responses: { 200: { description: 'The series', schema: DeploymentSeries }, 400: badQuery, 404: notDeployed(), ...authed },
    example: { params: { model: DEMO_MODEL }, query: { minutes: '15' }, status: 200 },
  },
  {
    operationId: 'deploymentSimulation',
    method: 'get',
    path: '/v1/deployments/:model/simulation',
    tag: 'Dashboard',
    summary:
      'The deployment’s recorded arrivals replayed through the policy with its current and with chosen settings, beside what happened',
    description:
      'Runs the policy simulator (the live forecaster and policy) on a worker thread of the API process, on up to 7 days of ' +
      'recorded history before the window; at most 1440 minutes and 1,000,000 arrivals replayed, within SIMULATION_CPU_BUDGET_MS ' +
      'of CPU time, with min/max/standby at most twice the deployment’s max; one simulation at a time per process, and ' +
      'SIMULATIONS_PER_MIN per tenant. Beside the runs, the baselines as-is and at the cheapest setting meeting 99 % within ' +
      'the SLO (a search of up to 36 baseline replays, on its own thread with its own SIMULATION_CPU_BUDGET_MS); past that ' +
      'budget, atSlo.error says so.',
    auth: true,
    params: model,
    query: SimulationQuery,
    responses: {
      200: {
        description: 'Cost and SLO attainment: actual, simulated with the current settings, simulated with the chosen ones',
        schema: Simulation,
      },
      400: {
        ...badQuery,
        description: 'Bad query, settings that do not hold together (max below min), or more workers than twice the deployment’s max',
      },
      404: notDeployed(),
      422: {
        description: 'Too many arrivals in the window to replay here, or the replay used its CPU-time budget',
        schema: S.ErrorBody,
        codes: ['simulation_too_large'],
      },
      503: {
        description: 'Another simulation is running',
        schema: S.ErrorBody,
        codes: ['simulation_busy'],
        headers: { 'Retry-After': 'Seconds to wait' },
      },
      ...authed,
    },
    example: { params: { model: DEMO_MODEL }, query: { minutes: '30', standby: '2' }, status: 200 },
  },
];
