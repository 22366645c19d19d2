/** Bulk scoring runs (DESIGN §7): the folder's public surface for the API, the dispatcher, the CLI and the scaler. */
export { createBulkRuns } from './bulk-runs.ts';
export { readCapacityRequest } from './capacity-request.ts';
export { encodePart, readChunkRows } from './chunk-io.ts';
export { driveBulkRun } from './driver.ts';
export { PART_CONTENT_TYPES } from './formats.ts';
export { RUN_ID_PATTERN } from './run-request.ts';
export { createRunStore, runRef } from './run-store.ts';
export { createStoreFactory } from './store-factory.ts';
export { startBulkSupervisor } from './supervisor.ts';
export { createBulkWiring } from './wiring.ts';
