/**
 * Bulk runs as the HTTP API offers them (DESIGN §7): start (or resume by id), read, cancel, over
 * the `BulkRuns` use case in infra/bulk. What is the API's own: a run's webhook URL passes the
 * same address policy as a job's before anything is stored; another tenant's run reads as a 404
 * like an unknown one; times are ISO 8601 like the job resource's.
 */

import { RUN_ID_PATTERN } from '../../infra/bulk/index.ts';
import type { BulkRunRequest, BulkRuns, BulkRunView } from '../../infra/contracts/bulk.ts';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import { parseWebhookSpec } from '../webhooks/webhook-spec.ts';

export interface BulkRunUseCaseDeps {
  bulkRuns: BulkRuns;
  /** WEBHOOK_ALLOWED_PRIVATE_HOSTS. */
  webhookAllowedPrivateHosts: readonly string[];
}

/** `created` is false when the request named an existing run of this tenant (a resume). */
export async function startBulkRun(
  deps: BulkRunUseCaseDeps,
  input: { tenant: string; body: unknown },
): Promise<{ run: BulkRunView; created: boolean }> {
  checkWebhookUrl(input.body, deps.webhookAllowedPrivateHosts);
  const runId = runIdOf(input.body);
  // Asked before start(): start() answers the same view whether it created the run or found it.
  const existed = runId !== undefined && RUN_ID_PATTERN.test(runId) && (await deps.bulkRuns.get(input.tenant, runId)) !== null;
  // The body's shape is checked by start() (parseBulkRunRequest, shared with the CLI), field by field.
  const run = await deps.bulkRuns.start(input.tenant, input.body as BulkRunRequest);
  return { run, created: !existed };
}

export async function getBulkRun(deps: Pick<BulkRunUseCaseDeps, 'bulkRuns'>, input: { tenant: string; id: string }): Promise<BulkRunView> {
  const run = RUN_ID_PATTERN.test(input.id) ? await deps.bulkRuns.get(input.tenant, input.id) : null;
  if (!run) throw notFound(input.id);
  return run;
}

/**
 * Canceling a running run stops it (written parts stay). Canceling a canceled run succeeds again
 * (DELETE is idempotent, as for jobs); a run that already succeeded or failed is left alone (409).
 */
export async function cancelBulkRun(
  deps: Pick<BulkRunUseCaseDeps, 'bulkRuns'>,
  input: { tenant: string; id: string },
): Promise<BulkRunView> {
  const before = await getBulkRun(deps, input);
  if (before.status === 'succeeded' || before.status === 'failed') throw finished(before);
  const run = before.status === 'canceled' ? before : await deps.bulkRuns.cancel(input.tenant, input.id);
  if (!run) throw notFound(input.id);
  // It may have ended between the read and the cancel.
  if (run.status === 'succeeded' || run.status === 'failed') throw finished(run);
  return run;
}

/**
 * A run's webhook is checked by the job webhooks' own rules (URL form, literal blocked hosts);
 * the event names differ, so only the URL goes through here and the events are start()'s.
 */
export function checkWebhookUrl(body: unknown, allowedPrivateHosts: readonly string[]): void {
  const webhook = isObject(body) ? body.webhook : undefined;
  if (!isObject(webhook)) return; // absent, or a shape start() refuses with the field named
  parseWebhookSpec({ url: webhook.url }, { allowedPrivateHosts });
}

function runIdOf(body: unknown): string | undefined {
  const id = isObject(body) ? body.runId : undefined;
  return typeof id === 'string' ? id : undefined;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function notFound(id: string): NotFoundError {
  return new NotFoundError('bulk_run_not_found', `no bulk run ${id}`);
}

function finished(run: BulkRunView): InvalidInputError {
  return new InvalidInputError('bulk_run_finished', `bulk run ${run.id} has already ${run.status}; only a running run can be canceled`, {
    status: 409,
  });
}
