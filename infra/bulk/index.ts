/**
 * Bulk scoring runs (DESIGN §7): the folder's public surface for the API, the dispatcher and the
 * CLI. Runs only: the formats' readers and writers are infra/tabular, and the capacity a late run
 * asks of the scaler is infra/deployments/capacity-request.ts.
 */
export { createBulkRuns } from './bulk-runs.ts';
export { driveBulkRun } from './driver.ts';
export { RUN_ID_PATTERN } from './run-request.ts';
export { createRunStore, runRef } from './run-store.ts';
export { startBulkSupervisor } from './supervisor.ts';
export { createBulkWiring } from './wiring.ts';
