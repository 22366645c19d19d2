/**
 * The one parser of a bulk run request, for the API body and the CLI's flags alike: every field
 * checked, unknown fields refused (a typo must not silently drop a setting), the deadline
 * resolved to epoch ms against the caller's clock. Errors are InvalidInputError naming the field.
 */

import {
  BULK_FORMATS,
  BULK_WEBHOOK_EVENTS,
  type BulkColumns,
  type BulkFormat,
  type BulkRunRequest,
  type BulkWebhookEvent,
} from '../contracts/bulk.ts';
import { MODEL_NAME_PATTERN, VERSION_PATTERN } from '../contracts/manifest.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { overlaps, parseS3Url } from './s3-url.ts';

/**
 * Rows a chunk aims at by default. A chunk costs a job, a few ranged GETs, a put and its counting
 * whatever its size; at 1,000 rows that overhead cost more CPU than the naive script spent on the
 * rows themselves (docs/BENCHMARKS.md). Small runs still get MIN_CHUNKS_PER_RUN chunks (chunk-plan.ts).
 */
export const DEFAULT_CHUNK_ROWS = 10_000;
export const MAX_CHUNK_ROWS = 100_000;
export const RUN_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

const FIELDS = new Set([
  'model',
  'version',
  'input',
  'output',
  'format',
  'outputFormat',
  'columns',
  'idColumn',
  'chunkRows',
  'deadline',
  'webhook',
  'maxBadRows',
  'runId',
]);

/** Column names: what a CSV header cell, a JSON key or a Parquet column may be called here. */
const COLUMN_NAME = /^\P{Cc}{1,256}$/u;
const MAX_COLUMNS = 100_000;

type Json = Record<string, unknown>;

export function parseBulkRunRequest(body: unknown, now: number): BulkRunRequest {
  if (!isObject(body)) fail('body', 'the request body must be a JSON object');
  const unknown = Object.keys(body).find((k) => !FIELDS.has(k));
  if (unknown !== undefined) fail(unknown, `unknown field; known fields: ${[...FIELDS].join(', ')}`);
  const model = str(body, 'model', true);
  if (!MODEL_NAME_PATTERN.test(model)) fail('model', `"${model}" is not a model name`);
  const request: BulkRunRequest = { model, input: str(body, 'input', true), output: str(body, 'output', true) };
  const input = parseS3Url(request.input, 'input');
  const output = parseS3Url(request.output, 'output');
  if (overlaps(input, output)) fail('output', 'must not overlap the input prefix (parts would be read back as input)');
  const version = str(body, 'version');
  if (version !== undefined) {
    if (!VERSION_PATTERN.test(version)) fail('version', `"${version}" is not a version name`);
    request.version = version;
  }
  const format = formatField(body, 'format');
  if (format !== undefined) request.format = format;
  const outputFormat = formatField(body, 'outputFormat');
  if (outputFormat !== undefined) request.outputFormat = outputFormat;
  if (body.columns !== undefined) request.columns = parseColumns(body.columns);
  const idColumn = str(body, 'idColumn');
  if (idColumn !== undefined) {
    if (!COLUMN_NAME.test(idColumn)) fail('idColumn', 'must be 1-256 printable characters');
    request.idColumn = idColumn;
  }
  const chunkRows = int(body, 'chunkRows', 1, MAX_CHUNK_ROWS);
  if (chunkRows !== undefined) request.chunkRows = chunkRows;
  const maxBadRows = int(body, 'maxBadRows', 0, Number.MAX_SAFE_INTEGER);
  if (maxBadRows !== undefined) request.maxBadRows = maxBadRows;
  if (body.deadline !== undefined) request.deadline = resolveDeadline(body.deadline, now);
  if (body.webhook !== undefined) request.webhook = parseWebhook(body.webhook);
  const runId = str(body, 'runId');
  if (runId !== undefined) {
    if (!RUN_ID_PATTERN.test(runId)) fail('runId', 'must be 1-64 characters of [A-Za-z0-9_-], starting with a letter or digit');
    request.runId = runId;
  }
  return request;
}

function formatField(body: Json, field: 'format' | 'outputFormat'): BulkFormat | undefined {
  const v = str(body, field);
  if (v === undefined) return undefined;
  if (!(BULK_FORMATS as readonly string[]).includes(v)) fail(field, `must be one of ${BULK_FORMATS.join(', ')}`);
  return v as BulkFormat;
}

/**
 * `{"<input>": ["col", …]}`, or the CLI's text: `a,b,c` (the single input's features) or
 * `x=a,b;y=seq` (per input). A list of names (JSON) is the single input's.
 */
export function parseColumns(raw: unknown): BulkColumns {
  let map: Record<string, unknown>;
  if (typeof raw === 'string') map = columnsText(raw);
  else if (Array.isArray(raw)) map = { '': raw };
  else if (isObject(raw)) map = raw;
  else fail('columns', 'must map each model input to a list of column names, e.g. {"x": ["f1", "f2"]}');
  const out: BulkColumns = {};
  let total = 0;
  for (const [input, cols] of Object.entries(map)) {
    if (!Array.isArray(cols) || cols.length === 0) fail('columns', `"${input || 'the input'}" must list at least one column`);
    for (const c of cols) if (typeof c !== 'string' || !COLUMN_NAME.test(c)) fail('columns', `${JSON.stringify(c)} is not a column name`);
    if (new Set(cols).size !== cols.length) fail('columns', `"${input || 'the input'}" lists a column twice`);
    total += cols.length;
    out[input] = cols as string[];
  }
  if (Object.keys(out).length === 0) fail('columns', 'must name at least one input');
  if (total > MAX_COLUMNS) fail('columns', `names more than ${MAX_COLUMNS} columns`);
  return out;
}

function columnsText(text: string): Record<string, string[]> {
  const split = (s: string) => s.split(',').map((c) => c.trim());
  if (!text.includes('=')) return { '': split(text) };
  const out: Record<string, string[]> = {};
  for (const part of text.split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) fail('columns', `"${part}" is not <input>=<column>[,<column>…]`);
    out[part.slice(0, eq).trim()] = split(part.slice(eq + 1));
  }
  return out;
}

/**
 * Epoch ms; an ISO 8601 date-time; or `HH:MM`, the next time the local clock shows it (tonight's
 * 06:00 asked at 23:00 is tomorrow's). A deadline already past is refused.
 */
export function resolveDeadline(raw: unknown, now: number): number {
  let at: number;
  if (typeof raw === 'number') at = raw;
  else if (typeof raw === 'string' && /^\d{10,}$/.test(raw.trim())) at = Number(raw.trim());
  else if (typeof raw === 'string' && /^\d{1,2}:\d{2}$/.test(raw.trim())) at = nextClockTime(raw.trim(), now);
  else if (typeof raw === 'string') at = Date.parse(raw);
  else fail('deadline', 'must be epoch milliseconds, an ISO date-time or HH:MM');
  if (!Number.isFinite(at)) fail('deadline', `"${String(raw)}" is not a date-time (use ISO 8601 or HH:MM)`);
  if (at <= now) fail('deadline', `${new Date(at).toISOString()} has already passed`);
  return Math.round(at);
}

function nextClockTime(hhmm: string, now: number): number {
  const [h, m] = hhmm.split(':').map(Number) as [number, number];
  if (h > 23 || m > 59) fail('deadline', `"${hhmm}" is not a time of day`);
  const at = new Date(now);
  at.setHours(h, m, 0, 0);
  if (at.getTime() <= now) at.setDate(at.getDate() + 1);
  return at.getTime();
}

function parseWebhook(raw: unknown): { url: string; events?: BulkWebhookEvent[] } {
  if (!isObject(raw)) fail('webhook', 'must be an object { url, events? }');
  const url = str(raw, 'url', true, 'webhook.url');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    fail('webhook.url', `"${url}" is not a URL`);
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') fail('webhook.url', 'must be an http(s) URL');
  if (raw.events === undefined) return { url };
  if (!Array.isArray(raw.events) || raw.events.length === 0) fail('webhook.events', 'must be a non-empty array');
  for (const e of raw.events) {
    if (!(BULK_WEBHOOK_EVENTS as readonly unknown[]).includes(e))
      fail('webhook.events', `must list only ${BULK_WEBHOOK_EVENTS.join(', ')}`);
  }
  return { url, events: [...new Set(raw.events as BulkWebhookEvent[])] };
}

function str(body: Json, field: string, required: true, label?: string): string;
function str(body: Json, field: string, required?: false, label?: string): string | undefined;
function str(body: Json, field: string, required = false, label = field): string | undefined {
  const v = body[field];
  if (v === undefined && !required) return undefined;
  if (typeof v !== 'string' || v.trim() === '') fail(label, required && v === undefined ? 'is required' : 'must be a non-empty string');
  return v.trim();
}

function int(body: Json, field: string, min: number, max: number): number | undefined {
  const raw = body[field];
  if (raw === undefined) return undefined;
  // The CLI hands flags over as strings: digits are taken as the number they spell.
  const v = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : raw;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) fail(field, `must be an integer in [${min}, ${max}]`);
  return v;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fail(field: string, message: string): never {
  throw new InvalidInputError('invalid_bulk_run', `"${field}" ${message}`);
}
