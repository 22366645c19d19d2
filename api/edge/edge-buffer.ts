/**
 * The edge buffer: while the region cannot be reached, a tenant's async submissions are kept in
 * that tenant's Durable Object (one per tenant: one tenant can fill only its own) and forwarded
 * in the order they came, each with the Idempotency-Key minted or given at the edge, by the
 * object's alarm, until the region answers. At least once: an answer lost on the way back sends
 * the submission again, and the region's idempotency store answers the replay with the job it
 * made the first time, so each runs once. A submission is taken only when the object holds it in
 * its storage; it is deleted only once the region's answer is recorded.
 *
 * Why a Durable Object and not Cloudflare Queues: the client's 202 must name something it can
 * poll at once (`GET /v1/jobs/edge-…`), which needs the submission's state readable by id and
 * ordered per tenant, while a queue is write-only until consumed; and workerd, where the tests
 * run, implements Durable Objects and their alarms but not a Queues consumer. The message limit
 * is Queues' (128 KiB), so the choice could be revisited without changing what clients see:
 * while the region is down, bodies above it are answered 413 `buffer_limit_exceeded` naming the
 * limit, with Retry-After (the gateway), not staged in R2 (R2 would add a second store whose writes must be ordered with the object's).
 *
 * A buffered job may be canceled (DELETE /v1/jobs/edge-…): while it waits it is taken out and is
 * `canceled` for good; while its forward is in flight, the region's job is canceled the moment
 * its id is known.
 */
import { forwardedHeaders, type RegionClient } from './region-client.ts';
import type { DurableObjectNamespace, DurableObjectState } from './workers-types.ts';

/** The largest body the buffer takes (Cloudflare Queues' message limit, and a Durable Object value's). */
export const BUFFER_MESSAGE_LIMIT_BYTES = 128 * 1024;
/** The id prefix of a job the edge answered for; the region's ids never start with it. */
export const EDGE_JOB_PREFIX = 'edge-';

/** Retry intervals while the region stays down: doubling from 1 s, at most 15 s apart. */
const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 15_000;
/**
 * Answers that mean "later", not "no": 409 idempotency_key_in_use (a killed region's claim not yet
 * expired), 429, 503 (its store down) and 500s, until one submission has had this many of them;
 * then it is settled as refused with that answer, so one poisoned request cannot hold the queue.
 */
const MAX_SERVER_ERRORS = 20;

export interface BufferedMeta {
  edgeId: string;
  idempotencyKey: string;
  model: string;
  path: string;
  headers: Array<[string, string]>;
  acceptedAt: string;
  serverErrors: number;
}

export type EdgeJobState =
  | { state: 'buffered'; edgeId: string; model: string; acceptedAt: string; seq: number; lastError?: string }
  | { state: 'canceled'; edgeId: string; model: string; acceptedAt: string; canceledAt: string }
  | { state: 'forwarded'; edgeId: string; model: string; acceptedAt: string; regionalId: string }
  | { state: 'refused'; edgeId: string; model: string; acceptedAt: string; status: number; body: unknown };

const seqKey = (seq: number) => `q:${String(seq).padStart(15, '0')}`;
const bodyKey = (seq: number) => `b:${String(seq).padStart(15, '0')}`;

interface BufferEnv {
  region: RegionClient;
  maxEntries: number;
}

export class EdgeBufferCore {
  private retryMs = FIRST_RETRY_MS;
  /** The submission whose forward is awaiting the region's answer. */
  private inFlight: string | undefined;
  /** Submissions canceled while their forward was in flight: the region's job is canceled once known. */
  private readonly cancelOnArrival = new Set<string>();

  constructor(
    private readonly state: DurableObjectState,
    private readonly env: BufferEnv,
  ) {}

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (request.method === 'POST' && url.pathname === '/enqueue') return this.enqueue(request);
    const job = /^\/jobs\/(.+)$/.exec(url.pathname)?.[1];
    if (job !== undefined && (request.method === 'GET' || request.method === 'DELETE')) {
      const id = decodeURIComponent(job);
      const found = await this.state.storage.get<EdgeJobState>(`job:${id}`);
      if (!found) return Response.json({ state: 'unknown' }, { status: 404 });
      return Response.json(request.method === 'DELETE' ? await this.cancel(found) : found);
    }
    return new Response('no such buffer operation', { status: 404 });
  }

  private async enqueue(request: Request): Promise<Response> {
    const meta = JSON.parse(request.headers.get('x-edge-meta') ?? '{}') as Omit<BufferedMeta, 'serverErrors'>;
    const body = new Uint8Array(await request.arrayBuffer());
    const storage = this.state.storage;
    const known = await storage.get<string>(`key:${meta.idempotencyKey}`);
    if (known !== undefined) return Response.json({ edgeId: known, replayed: true });
    const count = (await storage.get<number>('count')) ?? 0;
    if (count >= this.env.maxEntries) return Response.json({ full: true, count }, { status: 507 });
    const seq = ((await storage.get<number>('seq')) ?? 0) + 1;
    const job: EdgeJobState = { state: 'buffered', edgeId: meta.edgeId, model: meta.model, acceptedAt: meta.acceptedAt, seq };
    await storage.put({
      seq,
      count: count + 1,
      [seqKey(seq)]: { ...meta, serverErrors: 0 } satisfies BufferedMeta,
      [bodyKey(seq)]: body,
      [`key:${meta.idempotencyKey}`]: meta.edgeId,
      [`job:${meta.edgeId}`]: job,
    });
    if ((await storage.getAlarm()) === null) await storage.setAlarm(Date.now());
    return Response.json({ edgeId: meta.edgeId, replayed: false });
  }

  /** Cancels a job still held here; one in flight is canceled at the region once forwarded. */
  private async cancel(job: EdgeJobState): Promise<EdgeJobState> {
    if (job.state !== 'buffered') return job;
    if (this.inFlight === job.edgeId) {
      this.cancelOnArrival.add(job.edgeId);
      return job;
    }
    const storage = this.state.storage;
    const canceled: EdgeJobState = {
      state: 'canceled',
      edgeId: job.edgeId,
      model: job.model,
      acceptedAt: job.acceptedAt,
      canceledAt: new Date().toISOString(),
    };
    const count = (await storage.get<number>('count')) ?? 1;
    await storage.put({ [`job:${job.edgeId}`]: canceled, count: Math.max(0, count - 1) });
    await storage.delete([seqKey(job.seq), bodyKey(job.seq)]);
    return canceled;
  }

  /** Forwards what is held, in order, until it is empty or the region does not take one. */
  async alarm(): Promise<void> {
    const storage = this.state.storage;
    for (;;) {
      const head = await storage.list<BufferedMeta>({ prefix: 'q:', limit: 1 });
      const [entry] = head;
      if (entry === undefined) {
        this.retryMs = FIRST_RETRY_MS;
        return;
      }
      const [key, meta] = entry;
      const seq = Number(key.slice(2));
      const body = (await storage.get<Uint8Array>(bodyKey(seq))) ?? new Uint8Array(0);
      const headers = forwardedHeaders(new Headers(meta.headers));
      headers.set('idempotency-key', meta.idempotencyKey);
      this.inFlight = meta.edgeId;
      const answer = await this.env.region.send({ method: 'POST', path: meta.path, headers, body }).finally(() => {
        this.inFlight = undefined;
      });
      const settled = answer.kind === 'answered' ? await this.settle(meta, answer.response) : undefined;
      if (settled === undefined && this.cancelOnArrival.delete(meta.edgeId)) {
        // Canceled while in flight, and the region did not take it: canceled here, and on to the next.
        const held = await storage.get<EdgeJobState>(`job:${meta.edgeId}`);
        if (held) await this.cancel(held);
        continue;
      }
      if (settled === undefined) {
        const why = answer.kind === 'unreachable' ? answer.reason : `the region answered ${answer.response.status}`;
        await storage.put(`job:${meta.edgeId}`, {
          state: 'buffered',
          edgeId: meta.edgeId,
          model: meta.model,
          acceptedAt: meta.acceptedAt,
          seq,
          lastError: why,
        } satisfies EdgeJobState);
        if (answer.kind === 'answered' && answer.response.status === 500)
          await storage.put(key, { ...meta, serverErrors: meta.serverErrors + 1 });
        await storage.setAlarm(Date.now() + this.retryMs);
        this.retryMs = Math.min(MAX_RETRY_MS, this.retryMs * 2);
        return;
      }
      const count = (await storage.get<number>('count')) ?? 1;
      await storage.put({ [`job:${meta.edgeId}`]: settled, count: Math.max(0, count - 1) });
      await storage.delete([key, bodyKey(seq)]);
      this.retryMs = FIRST_RETRY_MS;
      if (this.cancelOnArrival.delete(meta.edgeId) && settled.state === 'forwarded') {
        // Best effort, as a client's DELETE: the job resource says whether it was in time.
        const auth = new Headers({ authorization: headers.get('authorization') ?? '' });
        await this.env.region.send({ method: 'DELETE', path: `/v1/jobs/${encodeURIComponent(settled.regionalId)}`, headers: auth });
      }
    }
  }

  /** The job's final edge state from the region's answer; undefined when it is to be sent again. */
  private async settle(meta: BufferedMeta, response: Response): Promise<EdgeJobState | undefined> {
    const base = { edgeId: meta.edgeId, model: meta.model, acceptedAt: meta.acceptedAt };
    const text = await response.text();
    if (response.status === 202 || response.status === 200) {
      const id = (JSON.parse(text) as { id?: unknown }).id;
      if (typeof id === 'string') return { ...base, state: 'forwarded', regionalId: id };
    }
    const later =
      response.status === 429 ||
      response.status === 503 ||
      (response.status === 409 && text.includes('"idempotency_key_in_use"')) ||
      (response.status === 500 && meta.serverErrors + 1 < MAX_SERVER_ERRORS);
    if (later) return undefined;
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: kept as text
    }
    return { ...base, state: 'refused', status: response.status, body };
  }
}

export interface EnqueueResult {
  edgeId: string;
  replayed: boolean;
}

/** Puts one submission in the tenant's buffer; 'full' when the tenant's buffer holds its most. */
export async function enqueueAtEdge(
  ns: DurableObjectNamespace,
  tenant: string,
  meta: Omit<BufferedMeta, 'serverErrors'>,
  body: Uint8Array,
): Promise<EnqueueResult | 'full'> {
  const stub = ns.get(ns.idFromName(tenant));
  const res = await stub.fetch('https://edge-buffer/enqueue', {
    method: 'POST',
    headers: { 'x-edge-meta': JSON.stringify(meta) },
    body: body as BodyInit,
  });
  if (res.status === 507) return 'full';
  return (await res.json()) as EnqueueResult;
}

/** A buffered job's state in the tenant's buffer; undefined when the tenant has no such job. */
export async function bufferedJob(ns: DurableObjectNamespace, tenant: string, edgeId: string): Promise<EdgeJobState | undefined> {
  const stub = ns.get(ns.idFromName(tenant));
  const res = await stub.fetch(`https://edge-buffer/jobs/${encodeURIComponent(edgeId)}`);
  if (res.status === 404) return undefined;
  return (await res.json()) as EdgeJobState;
}

/** Cancels a buffered job (see the header); its state after, undefined when the tenant has no such job. */
export async function cancelBufferedJob(ns: DurableObjectNamespace, tenant: string, edgeId: string): Promise<EdgeJobState | undefined> {
  const stub = ns.get(ns.idFromName(tenant));
  const res = await stub.fetch(`https://edge-buffer/jobs/${encodeURIComponent(edgeId)}`, { method: 'DELETE' });
  if (res.status === 404) return undefined;
  return (await res.json()) as EdgeJobState;
}
