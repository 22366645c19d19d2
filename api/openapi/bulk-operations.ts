/** The bulk run routes (DESIGN §7) in the operation table (operations.ts): start or resume, read, cancel. */
import { authed, jsonBody, malformedBody, type OperationSpec, type ResponseSpec, tooLarge } from './operation-spec.ts';
import * as S from './schemas.ts';

const bulkRunNotFound: ResponseSpec = {
  description: 'No such bulk run for this tenant',
  schema: S.ErrorBody,
  codes: ['bulk_run_not_found'],
};

export const BULK_RUN_OPERATIONS: readonly OperationSpec[] = [
  {
    operationId: 'startBulkRun',
    method: 'post',
    path: '/v1/bulk-runs',
    tag: 'Bulk runs',
    summary: 'Start (or resume) a bulk scoring run: S3 in, S3 out',
    description:
      'Checks the request, resolves the version and that the input prefix has objects, and records the run; the ' +
      'dispatcher (`warmpool dispatcher`, part of `warmpool dev`) drives it. Chunks queue behind online jobs. ' +
      'The same `runId` with the same spec answers 200 with the existing run: a running one is resumed (parts already written ' +
      'are skipped, a new `deadline` or `webhook` replaces the stored one); one that ended is answered as it ended, for good.',
    auth: true,
    body: { schema: S.BulkRunRequest, required: true },
    responses: {
      200: { description: 'The run already existed (same `runId`, same spec)', schema: S.BulkRunResource },
      202: { description: 'Started', schema: S.BulkRunResource, headers: { Location: 'The run: /v1/bulk-runs/{id}' } },
      400: { description: 'Invalid request', schema: S.ErrorBody, codes: [...malformedBody, 'invalid_bulk_run', 'invalid_location'] },
      403: {
        description:
          'The input or the output is not inside one of the tenant’s bulk locations (`BULK_LOCATIONS`); checked before any S3 ' +
          'call, and the same answer whether the bucket exists or not',
        schema: S.ErrorBody,
        codes: ['location_forbidden'],
      },
      404: {
        description: 'No such model or version, or no version given and the model is not deployed',
        schema: S.ErrorBody,
        codes: ['model_not_found', 'version_not_found', 'model_not_deployed'],
      },
      409: {
        description:
          '`runId` names a run of this tenant with another spec (model, version, input, output, format, outputFormat, columns, ' +
          'idColumn, chunkRows or maxBadRows; a field left out keeps the run’s), or a new run’s output prefix is not empty',
        schema: S.ErrorBody,
        codes: ['run_conflict', 'output_not_empty'],
      },
      413: tooLarge(),
      ...jsonBody,
      422: {
        description:
          'Webhook refused, or the input cannot be read: no objects under the prefix, an unknown format, CSV for a multi-input ' +
          'model, or a location of the tenant’s whose bucket does not exist (or may not be used by the service)',
        schema: S.ErrorBody,
        codes: [
          'invalid_webhook',
          'webhook_url_blocked',
          'empty_input',
          'unknown_format',
          'csv_needs_single_input',
          'location_unavailable',
        ],
      },
      ...authed,
    },
  },
  {
    operationId: 'getBulkRun',
    method: 'get',
    path: '/v1/bulk-runs/:id',
    tag: 'Bulk runs',
    summary: 'Read a bulk run: status, rows done/total, rows/s, ETA, bad rows',
    auth: true,
    params: { id: S.BulkRunId },
    responses: { 200: { description: 'The run', schema: S.BulkRunResource }, 404: bulkRunNotFound, ...authed },
  },
  {
    operationId: 'cancelBulkRun',
    method: 'delete',
    path: '/v1/bulk-runs/:id',
    tag: 'Bulk runs',
    summary: 'Cancel a bulk run',
    description: 'Its queued chunks are removed; parts already written stay. Idempotent: canceling a canceled run succeeds again.',
    auth: true,
    params: { id: S.BulkRunId },
    responses: {
      200: { description: 'Canceled', schema: S.BulkRunResource },
      404: bulkRunNotFound,
      409: { description: 'Already succeeded or failed', schema: S.ErrorBody, codes: ['bulk_run_finished'] },
      ...authed,
    },
  },
];
