/**
 * The OpenAPI 3.1 document of the HTTP API, generated from the operation table (operations.ts)
 * and its zod schemas with `z.toJSONSchema`. OpenAPI 3.1 schemas are JSON Schema 2020-12, which
 * is zod's default target, so the converted schemas go in unchanged (less `$schema`/`$id`).
 *
 * Named schemas (schemas.ts NAMED_SCHEMAS) become `components.schemas` and are referenced with
 * `$ref`; everything else is inlined. Schemas are converted in "input" mode: objects stay open
 * (`additionalProperties` unset) unless the schema is strict, which matches a server that
 * ignores unknown fields, and a client that should too.
 *
 * Headers every body shares are added here rather than in each table entry: `Content-Encoding`
 * on every operation with a body (all bodies go through one decoder), and for a body or answer
 * that may be binary tensor data, the `application/octet-stream` content beside the JSON and the
 * `Inference-Header-Content-Length` header that frames it. OpenAPI has no way to say "a JSON
 * header, then bytes", so the header's schema rides in the media type as `x-inference-header`.
 */
import { z } from 'zod';
import type { BinaryForm } from './operation-spec.ts';
import { OPERATIONS, type OperationSpec, type ResponseSpec } from './operations.ts';
import { BinaryTensorBody, ContentEncoding, InferenceHeaderContentLength, NAMED_SCHEMAS } from './schemas.ts';

export interface OpenApiOptions {
  /** Absolute URL of the API, for `servers`; without it clients resolve paths against the document's own URL. */
  serverUrl?: string;
}

type Json = Record<string, unknown>;

const COMPONENT_REF = '#/components/schemas/';
const BINARY_TYPE = 'application/octet-stream';
const HEADER_LENGTH = 'Inference-Header-Content-Length';

/** "input": what a client may send (defaults optional, open objects). The safe-integer bounds zod adds to every int are noise. */
const CONVERT = {
  io: 'input',
  override: ({ jsonSchema }: { jsonSchema: Record<string, unknown> }) => {
    if (jsonSchema.maximum === Number.MAX_SAFE_INTEGER) delete jsonSchema.maximum;
    if (jsonSchema.minimum === Number.MIN_SAFE_INTEGER) delete jsonSchema.minimum;
  },
} as const;

const TAG_DESCRIPTIONS: Record<string, string> = {
  Jobs: 'Async inference: submit, poll or stream, cancel. Results are kept for JOB_RETENTION_S.',
  'Inference (Open Inference Protocol)': 'KServe v2 / Open Inference Protocol: sync inference, model metadata and readiness.',
  'Models and deployments': 'What the registry holds, and which versions serve each model (traffic split, pool bounds, backlog bound).',
  'Bulk runs': 'Score every row under an S3 prefix into parts under another prefix, resumably and exactly once, behind online traffic.',
  Dashboard:
    'What the operator dashboard (/dashboard) reads: the session, chart series per deployment, and a replay of its recorded arrivals through chosen settings.',
  Webhooks: 'Standard Webhooks signing secret, delivery log, dead letters and replay.',
  'Health and metrics': 'Probes and this documentation (open); Prometheus metrics (an admin key or METRICS_TOKEN).',
};

export function buildOpenApiDocument(options: OpenApiOptions = {}): Json {
  const { schemas, refOf } = componentSchemas();
  const paths: Record<string, Json> = {};
  for (const op of OPERATIONS) {
    const path = openApiPath(op.path);
    paths[path] ??= {};
    (paths[path] as Json)[op.method] = operationObject(op, refOf);
  }
  const tags = [...new Set(OPERATIONS.map((op) => op.tag))].map((name) => ({ name, description: TAG_DESCRIPTIONS[name] ?? '' }));
  const doc: Json = {
    openapi: '3.1.0',
    info: {
      title: 'warmpool API',
      version: '1',
      description:
        'Autoscaling ONNX inference behind a queue: async jobs with signed webhooks, Open Inference Protocol ' +
        '(KServe v2) sync inference, deployments with traffic splits. Authenticate with `Authorization: Bearer <key>`. ' +
        'Errors are `{"error": {"code", "message"}}`. Request bodies may be compressed (`Content-Encoding: gzip` or `deflate`); ' +
        'answers of 1 KiB or more are compressed when `Accept-Encoding` allows gzip or deflate. Inference bodies and answers ' +
        'may be Open Inference Protocol binary tensor data (`application/octet-stream` with `Inference-Header-Content-Length`).',
    },
    tags,
    paths,
    components: {
      schemas,
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key from API_KEYS' } },
    },
  };
  if (options.serverUrl) doc.servers = [{ url: options.serverUrl }];
  return doc;
}

/** `/v1/jobs/:id` → `/v1/jobs/{id}`. */
export function openApiPath(honoPath: string): string {
  return honoPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** Converts every named schema at once, so references between them become `$ref`s. */
function componentSchemas(): { schemas: Record<string, Json>; refOf: (schema: z.ZodType) => Json } {
  const registry = z.registry<{ id: string }>();
  const ids = new Map<z.ZodType, string>();
  for (const [id, schema] of Object.entries(NAMED_SCHEMAS)) {
    registry.add(schema, { id });
    ids.set(schema, id);
  }
  const converted = z.toJSONSchema(registry, { ...CONVERT, uri: (id) => `${COMPONENT_REF}${id}` }).schemas;
  const schemas: Record<string, Json> = {};
  for (const [id, schema] of Object.entries(converted)) {
    const { $schema: _schema, $id: _id, ...rest } = schema as Json;
    schemas[id] = rest;
  }
  const refOf = (schema: z.ZodType): Json => {
    const id = ids.get(schema);
    return id ? { $ref: `${COMPONENT_REF}${id}` } : inline(schema);
  };
  return { schemas, refOf };
}

/** A schema outside the components (parameters, plain-text bodies), converted on its own. */
function inline(schema: z.ZodType): Json {
  const { $schema: _schema, ...rest } = z.toJSONSchema(schema, CONVERT) as Json;
  return rest;
}

function operationObject(op: OperationSpec, refOf: (schema: z.ZodType) => Json): Json {
  const operation: Json = {
    operationId: op.operationId,
    summary: op.summary,
    tags: [op.tag],
    security: op.auth ? [{ bearerAuth: [] }] : [],
  };
  if (op.description) operation.description = op.description;
  const parameters = parameterObjects(op);
  if (parameters.length > 0) operation.parameters = parameters;
  if (op.body) {
    const media: Json = { schema: refOf(op.body.schema) };
    if (op.example?.body !== undefined) media.example = op.example.body;
    const content: Json = { 'application/json': media };
    if (op.body.binary) content[BINARY_TYPE] = binaryMedia(op.body.binary, refOf, op.example?.binaryHeader);
    operation.requestBody = { required: op.body.required, content };
  }
  operation.responses = Object.fromEntries(Object.entries(op.responses).map(([status, spec]) => [status, responseObject(spec, refOf)]));
  return operation;
}

function parameterObjects(op: OperationSpec): Json[] {
  const params: Json[] = [];
  const example = op.example;
  for (const [name, schema] of Object.entries(op.params ?? {})) {
    params.push(parameter(name, 'path', true, schema, example?.params?.[name]));
  }
  for (const [name, schema] of Object.entries(op.query?.shape ?? {})) {
    const field = schema as z.ZodType;
    const raw = example?.query?.[name];
    // The URL carries strings; the example shows the value the schema reads from it (`"10"` → 10).
    const parsed = raw === undefined ? undefined : field.safeParse(raw);
    params.push(parameter(name, 'query', !field.safeParse(undefined).success, field, parsed?.success ? parsed.data : raw));
  }
  for (const [name, schema] of Object.entries(op.headers ?? {})) {
    params.push(parameter(name, 'header', false, schema, example?.headers?.[name]));
  }
  if (op.body?.binary) params.push(parameter(HEADER_LENGTH, 'header', false, InferenceHeaderContentLength, undefined));
  if (op.body) params.push(parameter('Content-Encoding', 'header', false, ContentEncoding, undefined));
  return params;
}

/**
 * A binary tensor data body: bytes to any JSON Schema tool, described; the JSON header's schema
 * (with the operation's example header, when it has one) under `x-inference-header`.
 */
function binaryMedia(form: BinaryForm, refOf: (schema: z.ZodType) => Json, example: unknown): Json {
  const header = refOf(form.header);
  if (example !== undefined) header.examples = [example];
  return { schema: { ...inline(BinaryTensorBody), description: form.description }, 'x-inference-header': header };
}

function parameter(name: string, where: string, required: boolean, schema: z.ZodType, example: unknown): Json {
  const json = inline(schema);
  const { description, ...rest } = json;
  const p: Json = { name, in: where, required, schema: rest };
  if (typeof description === 'string') p.description = description;
  if (example !== undefined) p.example = example;
  return p;
}

function responseObject(spec: ResponseSpec, refOf: (schema: z.ZodType) => Json): Json {
  const codes = spec.codes?.length ? ` Codes: ${spec.codes.map((c) => `\`${c}\``).join(', ')}.` : '';
  const response: Json = { description: `${spec.description}.${codes}` };
  if (spec.schema) response.content = { [spec.contentType ?? 'application/json']: { schema: refOf(spec.schema) } };
  if (spec.binary) response.content = { ...(response.content as Json), [BINARY_TYPE]: binaryMedia(spec.binary, refOf, undefined) };
  const headers: Record<string, Json> = Object.fromEntries(
    Object.entries(spec.headers ?? {}).map(([name, description]) => [name, { description, schema: { type: 'string' } }]),
  );
  if (spec.binary) {
    headers[HEADER_LENGTH] = {
      description: 'Binary answers only: bytes of the JSON header at the start of the body',
      schema: { type: 'integer', minimum: 1 },
    };
  }
  if (Object.keys(headers).length > 0) response.headers = headers;
  return response;
}
