/**
 * Issue 20: job event streams are capped per tenant and per API process, on a real API (real
 * Redis, S3, no worker: the jobs stay queued, so their streams stay open). Past the tenant's cap
 * 429 too_many_streams, past the process's 503; a slot comes back when a stream's job ends and
 * when its client leaves, and one tenant at its cap leaves another tenant's streams alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { KEY_A, KEY_B, startStack, type TestStack } from './support/stack.ts';

const PER_TENANT = 3;
const TOTAL = 5;
const rows = { inputs: [{ name: 'features', shape: [1, 4], datatype: 'FP32', data: [0.1, 0.2, 0.3, 0.4] }] };

let stack: TestStack;
/** Streams a test opened, cancelled after the file (a stream left open would hold the server). */
const open: Array<{ abort: AbortController; reader: ReadableStreamDefaultReader<Uint8Array> }> = [];

beforeAll(async () => {
  stack = await startStack({ MAX_SSE_STREAMS_PER_TENANT: String(PER_TENANT), MAX_SSE_STREAMS: String(TOTAL) });
  await stack.registry.publish({ name: 'idle', version: '1', bytes: buildMlpModel({ features: 4, hidden: 8, layers: 1 }), maxBatch: 8 });
  // Deployed, at min 0: it takes jobs, and no worker comes (no scaler runs here).
  await stack.deployments.put({ model: 'idle', version: '1', min: 0, max: 1, standby: 0 });
}, 120_000);

afterAll(async () => {
  for (const s of open.splice(0)) s.abort.abort();
  await stack?.close();
});

async function submit(key: string): Promise<string> {
  const res = await stack.call('/v1/models/idle/jobs', { method: 'POST', body: JSON.stringify(rows), key });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

/** Opens a job's event stream; when accepted, reads its first event (the slot is held from then). */
async function stream(id: string, key: string) {
  const abort = new AbortController();
  const res = await stack.call(`/v1/jobs/${id}/events`, { key, signal: abort.signal });
  if (res.status !== 200) return { status: res.status, res };
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  open.push({ abort, reader });
  const first = new TextDecoder().decode((await reader.read()).value);
  expect(first).toContain('event: queued');
  return { status: 200, res, abort, reader };
}

/** Reads a stream to its end; the text it carried. */
async function drain(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<string> {
  let text = '';
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
  return text;
}

const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;

describe('GET /v1/jobs/{id}/events caps', () => {
  it('refuses a tenant past MAX_SSE_STREAMS_PER_TENANT (429), then the process past MAX_SSE_STREAMS (503), and gives slots back', async () => {
    const a = await Promise.all(Array.from({ length: PER_TENANT + 1 }, () => submit(KEY_A)));
    const held = [];
    for (const id of a.slice(0, PER_TENANT)) held.push(await stream(id, KEY_A));
    expect(held.map((s) => s.status)).toEqual([200, 200, 200]);

    const refused = await stream(a[PER_TENANT] as string, KEY_A);
    expect(refused.status).toBe(429);
    const error = await errorOf(refused.res);
    expect(error.code).toBe('too_many_streams');
    expect(error.message).toContain('tenant tenant-a has 3 job event streams open');

    // Another tenant is not held back by tenant-a's cap, only by the process's.
    const b = await Promise.all(Array.from({ length: 3 }, () => submit(KEY_B)));
    expect((await stream(b[0] as string, KEY_B)).status).toBe(200);
    expect((await stream(b[1] as string, KEY_B)).status).toBe(200);
    const full = await stream(b[2] as string, KEY_B);
    expect(full.status).toBe(503);
    expect(full.res.headers.get('retry-after')).toBe('5');
    expect((await errorOf(full.res)).code).toBe('too_many_streams');

    // A stream whose job ends gives its slot back: once the client has read the end, the slot is free.
    const [ending] = held;
    expect((await stack.call(`/v1/jobs/${a[0]}`, { method: 'DELETE', key: KEY_A })).status).toBe(200);
    expect(await drain(ending?.reader as ReadableStreamDefaultReader<Uint8Array>)).toContain('event: canceled');
    expect((await stream(a[PER_TENANT] as string, KEY_A)).status).toBe(200);
    expect((await stream(a[1] as string, KEY_A)).status).toBe(429);

    // A client that leaves gives its slot back too, as soon as the server sees it go.
    held[1]?.abort?.abort();
    let reopened = await stream(a[1] as string, KEY_A);
    for (let tries = 0; reopened.status === 429 && tries < 200; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      reopened = await stream(a[1] as string, KEY_A);
    }
    expect(reopened.status).toBe(200);
  });
});
