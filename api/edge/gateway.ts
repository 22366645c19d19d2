/**
 * The edge gateway: a hono app on Cloudflare Workers (worker.ts binds it) in front of one regional
 * API. It answers at the edge what needs no model and no Redis, and forwards the rest:
 *
 *   - every request is charged before any work: a known key to its tenant's bucket, a wrong key to
 *     its client address's failure bucket (429, as the region's auth failure guard), a request
 *     with no key to its address's bucket, each in a Durable Object (rate-limiter-object.ts);
 *   - a submission (POST /v1/models/{m}/jobs) and a sync inference (POST /v2/models/{m}/…/infer)
 *     are read within the body limit, decoded and validated against the region's catalog
 *     (edge-catalog.ts, edge-request.ts): what every version would refuse is refused here, with
 *     the region's code and message, and never costs the region a request;
 *   - a submission always travels with an Idempotency-Key, the client's or one minted here (sent
 *     back in the `Idempotency-Key` header), so a forward whose answer was lost may be sent again
 *     and still make one job. When the region cannot be reached it goes to the tenant's buffer
 *     (edge-buffer.ts) and the client gets a 202 for `edge-…`, a job it can poll, stream and
 *     cancel here until the buffer has forwarded it, and then through here at the region;
 *   - a sync inference while the region is down is a 503 with Retry-After: it cannot wait;
 *   - GET /v2/health/live is answered here; everything else is proxied, bodies streamed.
 *
 * The forwarded request carries the client's own Authorization, so the region authenticates and
 * limits it again as its own (nothing the edge says is trusted there), and X-Forwarded-For with
 * the client's address (the region believes it with TRUST_PROXY_HOPS=1).
 */

import type { Context } from 'hono';
import { Hono } from 'hono';
import { InvalidInputError, NotFoundError, OverloadedError, UnauthorizedError } from '../../infra/kernel/errors.ts';
import { bearerKey } from '../http/bearer-key.ts';
import { decisionResponse, errorBody } from '../http/error-body.ts';
import { parseIdempotencyKey } from '../http/idempotency-key-header.ts';
import type { EdgeCatalog } from '../use-cases/edge-catalog.ts';
import type { KeyLookup } from './edge-auth.ts';
import {
  BUFFER_MESSAGE_LIMIT_BYTES,
  bufferedJob,
  cancelBufferedJob,
  EDGE_JOB_PREFIX,
  type EdgeJobState,
  enqueueAtEdge,
} from './edge-buffer.ts';
import type { CatalogReader } from './edge-catalog.ts';
import type { EdgeConfig } from './edge-config.ts';
import { candidateVersions, checkAtEdge, decodedBody, parseInferBody, readSentBody } from './edge-request.ts';
import { type RateVerdict, takeFrom } from './rate-limiter-object.ts';
import type { RegionAnswer, RegionClient } from './region-client.ts';
import type { DurableObjectNamespace } from './workers-types.ts';

export interface GatewayDeps {
  config: EdgeConfig;
  region: RegionClient;
  catalog: CatalogReader;
  keys: KeyLookup;
  /** EdgeRateLimiter objects, one per bucket name. */
  limiter: DurableObjectNamespace;
  /** EdgeBuffer objects, one per tenant. */
  buffer: DurableObjectNamespace;
  now: () => number;
  newId: () => string;
}

interface GatewayEnv {
  Variables: { tenant: string | undefined; address: string };
}
type Ctx = Context<GatewayEnv>;

/** Retry-After of a sync request while the region cannot be reached: about a restart's length. */
const REGION_DOWN_RETRY_S = 5;
/** How often an edge job's event stream reads its buffer while it waits there. */
const BUFFER_POLL_MS = 1_000;

/**
 * The headers a buffered submission keeps to forward later: what the region reads of a
 * submission. Nothing else of the client's request (cookies, proxies' headers) is stored.
 */
const KEPT_HEADERS = [
  'authorization',
  'content-type',
  'content-encoding',
  'inference-header-content-length',
  'x-forwarded-for',
  'traceparent',
];

export function createGateway(deps: GatewayDeps): Hono<GatewayEnv> {
  const app = new Hono<GatewayEnv>();

  app.onError((err, c) => {
    const decided = decisionResponse(err, c as unknown as Context);
    if (decided) return decided;
    console.error('edge gateway failed', err);
    return c.json(errorBody('internal', 'internal error at the edge gateway; it has logged it'), 500);
  });

  app.get('/v2/health/live', (c) => c.json({ live: true }));

  // Charged before anything is read: the key's tenant, a wrong key's or no key's address.
  app.use('*', async (c, next) => {
    const address = c.req.header('cf-connecting-ip') ?? 'unknown';
    c.set('address', address);
    const key = bearerKey(c.req.header('authorization'));
    const tenant = key === undefined ? undefined : await deps.keys(key);
    c.set('tenant', tenant);
    if (key !== undefined && tenant === undefined) {
      const verdict = await takeFrom(deps.limiter, `auth:${address}`, deps.config.authFailures);
      if (!verdict.ok) return rateLimited(c, verdict, `wrong API keys from ${address}`, deps.config.authFailures);
      c.header('WWW-Authenticate', 'Bearer');
      return c.json(errorBody('unauthorized', 'unknown API key'), 401);
    }
    const bucket = tenant === undefined ? `anon:${address}` : `tenant:${tenant}`;
    const verdict = await takeFrom(deps.limiter, bucket, deps.config.rateLimit);
    if (!verdict.ok)
      return rateLimited(c, verdict, tenant === undefined ? `requests from ${address}` : `tenant ${tenant}`, deps.config.rateLimit);
    await next();
  });

  app.post('/v1/models/:model/jobs', async (c) => {
    const tenant = requireTenant(c);
    const model = c.req.param('model');
    const clientKey = parseIdempotencyKey(c.req.header('idempotency-key'));
    const { sent, version } = await checkedBody(deps, c, model, 'body');
    const idempotencyKey = clientKey ?? `${EDGE_JOB_PREFIX}${deps.newId()}`;
    const headers = forwardHeaders(c, KEPT_HEADERS);
    headers.set('idempotency-key', idempotencyKey);
    const path = `/v1/models/${encodeURIComponent(model)}/jobs`;
    const answer = await deps.region.send({ method: 'POST', path, headers, body: sent, signal: c.req.raw.signal });
    if (clientKey === undefined) c.header('Idempotency-Key', idempotencyKey);
    if (answer.kind === 'answered') return relay(answer.response, clientKey === undefined ? { 'Idempotency-Key': idempotencyKey } : {});
    if (sent.byteLength > BUFFER_MESSAGE_LIMIT_BYTES) {
      // Not staged in R2 (edge-buffer.ts says why): the client keeps the body and sends it again.
      throw new InvalidInputError(
        'buffer_limit_exceeded',
        `the region cannot be reached (${answer.reason}) and the edge holds submissions only up to ${BUFFER_MESSAGE_LIMIT_BYTES / 1024} KiB (${BUFFER_MESSAGE_LIMIT_BYTES} bytes); this one has ${sent.byteLength} bytes: send it again once the region is back`,
        { status: 413, retryAfterS: REGION_DOWN_RETRY_S },
      );
    }
    const acceptedAt = new Date(deps.now()).toISOString();
    const edgeId = `${EDGE_JOB_PREFIX}${deps.newId()}`;
    const meta = { edgeId, idempotencyKey, model, path, headers: [...headers.entries()], acceptedAt };
    const queued = await enqueueAtEdge(deps.buffer, tenant, meta, sent);
    if (queued === 'full') {
      throw new OverloadedError(
        'edge_buffer_full',
        `the region cannot be reached and tenant ${tenant} already has ${deps.config.bufferMaxEntries} submissions buffered at the edge; retry once the region is back`,
        REGION_DOWN_RETRY_S,
      );
    }
    const self = `/v1/jobs/${queued.edgeId}`;
    c.header('Location', self);
    if (queued.replayed) {
      // The same key again while its first submission is held here: that submission, as it is now.
      c.header('Idempotent-Replayed', 'true');
      const held = await bufferedJob(deps.buffer, tenant, queued.edgeId);
      if (held?.state === 'forwarded') return proxy(deps, c, `/v1/jobs/${encodeURIComponent(held.regionalId)}`);
      if (held) return c.json({ ...edgeJobResource(held), links: { self, events: `${self}/events` } }, 202);
    }
    const links = { self, events: `${self}/events` };
    return c.json(
      { id: queued.edgeId, status: 'queued', buffered: true, model, version: version ?? null, createdAt: acceptedAt, links },
      202,
    );
  });

  const infer = async (c: Ctx, version: string | undefined) => {
    requireTenant(c);
    const model = c.req.param('model') as string;
    const { sent } = await checkedBody(deps, c, model, version === undefined ? 'none' : { url: version });
    const url = new URL(c.req.url);
    const answer = await deps.region.send({
      method: 'POST',
      path: `${url.pathname}${url.search}`,
      headers: forwardHeaders(c),
      body: sent,
      signal: c.req.raw.signal,
    });
    if (answer.kind === 'answered') return relay(answer.response);
    throw regionDown(answer);
  };
  app.post('/v2/models/:model/infer', (c) => infer(c, undefined));
  app.post('/v2/models/:model/versions/:version/infer', (c) => infer(c, c.req.param('version')));

  app.get('/v1/jobs/:id', async (c) => {
    const id = c.req.param('id');
    if (!id.startsWith(EDGE_JOB_PREFIX)) return proxy(deps, c);
    const job = await edgeJob(deps, c, id);
    if (job.state === 'forwarded') return proxy(deps, c, `/v1/jobs/${encodeURIComponent(job.regionalId)}`);
    return c.json(edgeJobResource(job));
  });

  app.delete('/v1/jobs/:id', async (c) => {
    const id = c.req.param('id');
    if (!id.startsWith(EDGE_JOB_PREFIX)) return proxy(deps, c);
    const job = await edgeJob(deps, c, id);
    if (job.state === 'forwarded') return proxy(deps, c, `/v1/jobs/${encodeURIComponent(job.regionalId)}`);
    const after = (await cancelBufferedJob(deps.buffer, requireTenant(c), id)) ?? job;
    // Forwarded between the two reads: canceled at the region, as any job there.
    if (after.state === 'forwarded') return proxy(deps, c, `/v1/jobs/${encodeURIComponent(after.regionalId)}`);
    return c.json(edgeJobResource(after));
  });

  app.get('/v1/jobs/:id/events', async (c) => {
    const id = c.req.param('id');
    if (!id.startsWith(EDGE_JOB_PREFIX)) return proxy(deps, c);
    const first = await edgeJob(deps, c, id);
    if (first.state === 'forwarded') return proxy(deps, c, `/v1/jobs/${encodeURIComponent(first.regionalId)}/events`);
    return edgeJobEvents(deps, c, first);
  });

  app.all('*', (c) => proxy(deps, c));

  return app;
}

function requireTenant(c: Ctx): string {
  const tenant = c.get('tenant');
  if (tenant === undefined) throw new UnauthorizedError('unauthorized', 'missing bearer token: send Authorization: Bearer <key>');
  return tenant;
}

function rateLimited(c: Ctx, verdict: RateVerdict, who: string, rule: { rate: number; burst: number }): Response {
  const seconds = Math.max(1, Math.ceil(verdict.retryAfterS ?? 1));
  const message = `${who}: over ${rule.rate} requests per second with bursts of ${rule.burst} at the edge; retry in ${seconds} s`;
  c.header('Retry-After', String(seconds));
  return c.json(errorBody('rate_limited', message), 429);
}

function regionDown(answer: Extract<RegionAnswer, { kind: 'unreachable' }>): OverloadedError {
  return new OverloadedError('region_unreachable', `the region cannot be reached (${answer.reason}); retry shortly`, REGION_DOWN_RETRY_S);
}

type VersionFrom = 'body' | 'none' | { url: string };

/**
 * The body as sent, after the checks the catalog allows: model known, size, coding, form and
 * specs of every version it may run on. Without a catalog (the region never answered this
 * isolate) only the configured body limit is checked; the region checks the rest on arrival.
 */
async function checkedBody(deps: GatewayDeps, c: Ctx, model: string, from: VersionFrom): Promise<{ sent: Uint8Array; version?: string }> {
  const now = deps.now();
  const entry = await deps.catalog.model(model, now);
  if (entry === 'unknown') throw new NotFoundError('model_not_found', `no model named ${model} in the registry`);
  const catalog: EdgeCatalog | undefined = entry === undefined ? undefined : await deps.catalog.current(now);
  const limit = catalog?.limits.bodyLimitBytes ?? deps.config.bodyLimitBytes;
  const sent = await readSentBody(c.req.raw, limit);
  if (entry === undefined || catalog === undefined) return { sent };
  const decoded = await decodedBody(sent, c.req.header('content-encoding') ?? null, limit);
  const parsed = parseInferBody(decoded, c.req.header('inference-header-content-length') ?? null);
  const version = typeof from === 'object' ? from.url : from === 'body' ? bodyVersion(parsed.body) : undefined;
  const candidates = candidateVersions(entry, version);
  if (candidates !== 'unchecked') checkAtEdge(candidates, parsed, catalog.limits);
  return version === undefined ? { sent } : { sent, version };
}

function bodyVersion(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const v = (body as { version?: unknown }).version;
  return typeof v === 'string' ? v : undefined;
}

/** The client's headers for the region (all but the hop's, or only `only`), with its address appended to X-Forwarded-For. */
function forwardHeaders(c: Ctx, only?: readonly string[]): Headers {
  const from = c.req.raw.headers;
  const headers = new Headers();
  for (const [name, value] of from) {
    if (only && !only.includes(name)) continue;
    if (
      !only &&
      ['host', 'connection', 'keep-alive', 'transfer-encoding', 'te', 'upgrade', 'content-length', 'cf-connecting-ip'].includes(name)
    )
      continue;
    headers.set(name, value);
  }
  const address = c.get('address');
  const prior = from.get('x-forwarded-for');
  headers.set('x-forwarded-for', prior ? `${prior}, ${address}` : address);
  return headers;
}

/** The region's answer as the client's, streamed, with the gateway's own headers added. */
function relay(response: Response, extra: Record<string, string> = {}): Response {
  const headers = new Headers(response.headers);
  for (const [name, value] of Object.entries(extra)) headers.set(name, value);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

async function proxy(deps: GatewayDeps, c: Ctx, path?: string): Promise<Response> {
  const url = new URL(c.req.url);
  const method = c.req.method;
  const answer = await deps.region.send({
    method,
    path: path === undefined ? `${url.pathname}${url.search}` : `${path}${url.search}`,
    headers: forwardHeaders(c),
    body: method === 'GET' || method === 'HEAD' ? null : c.req.raw.body,
    signal: c.req.raw.signal,
  });
  if (answer.kind === 'answered') return relay(answer.response);
  throw regionDown(answer);
}

async function edgeJob(deps: GatewayDeps, c: Ctx, id: string): Promise<EdgeJobState> {
  const job = await bufferedJob(deps.buffer, requireTenant(c), id);
  if (!job) throw new NotFoundError('job_not_found', `no job ${id}`);
  return job;
}

/** An edge job as a job resource (the region's shape), while the region has no job for it. */
function edgeJobResource(job: Exclude<EdgeJobState, { state: 'forwarded' }>): Record<string, unknown> {
  const base = { id: job.edgeId, model: job.model, version: null, createdAt: job.acceptedAt, buffered: true };
  if (job.state === 'buffered') {
    const why = job.lastError ? ` (last try: ${job.lastError})` : '';
    return {
      ...base,
      status: 'queued',
      waiting: { code: 'region_unreachable', message: `held at the edge until the region can be reached${why}` },
    };
  }
  if (job.state === 'canceled') {
    return {
      ...base,
      status: 'canceled',
      finishedAt: job.canceledAt,
      error: { code: 'canceled', message: 'canceled at the edge before it was forwarded' },
    };
  }
  const refusal = (job.body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const code = typeof refusal?.code === 'string' ? refusal.code : 'refused_by_region';
  const message = typeof refusal?.message === 'string' ? refusal.message : `the region refused the buffered submission with ${job.status}`;
  return { ...base, status: 'failed', error: { code, message, status: job.status } };
}

/**
 * Events of a job held at the edge: its status now, again whenever it changes, and once the
 * buffer has forwarded it, the region's stream of the job it became (whose events name the
 * region's id). The stream ends with a terminal event, or when the client leaves.
 */
function edgeJobEvents(deps: GatewayDeps, c: Ctx, first: EdgeJobState): Response {
  const tenant = requireTenant(c);
  const signal = c.req.raw.signal;
  const encoder = new TextEncoder();
  const event = (name: string, data: unknown) => encoder.encode(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
  const stream = new ReadableStream<Uint8Array>({
    async start(controller) {
      let job = first;
      let sent = '';
      try {
        while (!signal.aborted) {
          if (job.state === 'forwarded') {
            const headers = forwardHeaders(c);
            const answer = await deps.region.send({
              method: 'GET',
              path: `/v1/jobs/${encodeURIComponent(job.regionalId)}/events`,
              headers,
              signal,
            });
            if (answer.kind === 'answered' && answer.response.body) {
              const reader = answer.response.body.getReader();
              for (;;) {
                const { done, value } = await reader.read();
                if (done) break;
                controller.enqueue(value);
              }
              break;
            }
          } else {
            const resource = edgeJobResource(job);
            const key = `${resource.status as string}:${JSON.stringify(resource.waiting ?? '')}`;
            if (key !== sent) {
              controller.enqueue(event(resource.status as string, resource));
              sent = key;
            }
            if (job.state !== 'buffered') break;
          }
          await new Promise((resolve) => setTimeout(resolve, BUFFER_POLL_MS));
          job = (await bufferedJob(deps.buffer, tenant, job.edgeId)) ?? job;
        }
      } catch (err) {
        if (!signal.aborted) {
          const message = err instanceof Error ? err.message : String(err);
          controller.enqueue(event('error', errorBody('internal', `the edge lost the job's stream: ${message}`)));
        }
      }
      controller.close();
    },
  });
  return new Response(stream, { headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
}
