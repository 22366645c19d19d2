/**
 * What makes a request that names a stored run's id (`runId`, `--run-id`) that same run: the one
 * home of which spec fields count (pure; bulk-runs.ts `start` asks it before anything is written).
 *
 * Fields that decide what the run writes or whether it succeeds must match, else the request is
 * another run under a taken id (409 `run_conflict`): model, version, input, output, format,
 * outputFormat, columns, idColumn, chunkRows and maxBadRows (the bad-row budget decides whether
 * the run fails: a run that failed on 100 bad rows must not turn into a success by asking again
 * with 200). A field the request leaves out keeps the run's own.
 *
 * Settings that change neither, the deadline and the webhook, may be given anew when resuming a
 * running run (`resumeSettings`). A run that ended keeps everything as it ended.
 */
import { BULK_WEBHOOK_EVENTS, type BulkColumns, type BulkRunRequest, type BulkRunSpec, DEFAULT_ID_COLUMN } from '../contracts/bulk.ts';
import { formatS3Url, parseS3Url } from './s3-url.ts';

/** A field that defines the run: its value in the stored spec, and in the request (undefined: not given). */
interface DefiningField {
  field: keyof BulkRunRequest;
  stored(spec: BulkRunSpec): unknown;
  asked(request: BulkRunRequest, spec: BulkRunSpec): unknown;
}

const DEFINING: readonly DefiningField[] = [
  { field: 'model', stored: (s) => s.model, asked: (r) => r.model },
  { field: 'version', stored: (s) => s.version, asked: (r) => r.version },
  { field: 'input', stored: (s) => formatS3Url(s.input), asked: (r) => formatS3Url(parseS3Url(r.input, 'input')) },
  { field: 'output', stored: (s) => formatS3Url(s.output), asked: (r) => formatS3Url(parseS3Url(r.output, 'output')) },
  { field: 'format', stored: (s) => s.format, asked: (r) => r.format },
  { field: 'outputFormat', stored: (s) => s.outputFormat, asked: (r) => r.outputFormat },
  { field: 'columns', stored: (s) => s.columns, asked: (r, s) => (r.columns ? sameNames(r.columns, s.columns) : undefined) },
  { field: 'idColumn', stored: (s) => s.idColumn ?? DEFAULT_ID_COLUMN, asked: (r) => r.idColumn },
  { field: 'chunkRows', stored: (s) => s.chunkRows, asked: (r) => r.chunkRows },
  { field: 'maxBadRows', stored: (s) => s.maxBadRows, asked: (r) => r.maxBadRows },
];

/** The spec fields a request sets, in words (`"maxBadRows" 200 (the run's: none)`); undefined when it matches the run. */
export function conflictOf(spec: BulkRunSpec, request: BulkRunRequest): string | undefined {
  const differ: string[] = [];
  for (const { field, stored, asked } of DEFINING) {
    const want = asked(request, spec);
    const have = stored(spec);
    if (want === undefined || JSON.stringify(want) === JSON.stringify(have)) continue;
    differ.push(`"${field}" ${show(want)} (the run's: ${have === undefined ? 'none' : show(have)})`);
  }
  return differ.length > 0 ? differ.join(', ') : undefined;
}

/** The settings a resume of a running run replaces: deadline and webhook, where the request gives them. */
export function resumeSettings(request: BulkRunRequest): Partial<Pick<BulkRunSpec, 'deadline' | 'webhook'>> {
  const out: Partial<Pick<BulkRunSpec, 'deadline' | 'webhook'>> = {};
  if (typeof request.deadline === 'number') out.deadline = request.deadline;
  if (request.webhook) out.webhook = { url: request.webhook.url, events: request.webhook.events ?? [...BULK_WEBHOOK_EVENTS] };
  return out;
}

/** The CLI's bare list (key '') under the stored run's single input name, to compare like with like. */
function sameNames(asked: BulkColumns, stored: BulkColumns | undefined): BulkColumns {
  const only = stored ? Object.keys(stored) : [];
  const bare = asked[''];
  return bare && only.length === 1 ? { [only[0] as string]: bare } : asked;
}

function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}
