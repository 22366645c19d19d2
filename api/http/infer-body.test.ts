import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { readInferBody } from './infer-body.ts';

/** readInferBody behind a route: the body it read, or the refusal as the API maps it. */
const app = new Hono()
  .post('/', async (c) => c.json({ body: (await readInferBody(c)).body }))
  .onError((err, c) =>
    err instanceof InvalidInputError ? c.json({ error: { code: err.code, message: err.message } }, err.status) : c.text('500', 500),
  );

/** A binary tensor body: a JSON header, then one FP32's bytes. */
const header = JSON.stringify({ inputs: [{ name: 'x', shape: [1], datatype: 'FP32', parameters: { binary_data_size: 4 } }] });
const binary = Buffer.concat([Buffer.from(header), Buffer.from(new Float32Array([0.25]).buffer)]);

const post = (body: BodyInit, headers: Record<string, string>) => app.request('/', { method: 'POST', body, headers });

describe('readInferBody without Inference-Header-Content-Length', () => {
  it('refuses binary tensor data sent as application/octet-stream by naming the missing header', async () => {
    const res = await post(new Uint8Array(binary), { 'content-type': 'application/octet-stream' });
    expect(res.status).toBe(400);
    const { error } = (await res.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe('missing_header_length');
    expect(error.message).toMatch(/^an application\/octet-stream body that is not JSON needs the Inference-Header-Content-Length header/);
    expect(error.message).toContain('request body is not valid JSON');
  });

  it('still reads a JSON body sent as application/octet-stream, as Triton does', async () => {
    const res = await post(header, { 'content-type': 'application/octet-stream' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ body: JSON.parse(header) });
  });

  it('leaves a broken JSON body sent as JSON a JSON parse error', async () => {
    const res = await post('{"inputs": [', { 'content-type': 'application/json' });
    const { error } = (await res.json()) as { error: { code: string } };
    expect(res.status).toBe(400);
    expect(error.code).toBe('malformed_json');
  });

  it('reads the binary body once the header gives the JSON part’s length', async () => {
    const res = await post(new Uint8Array(binary), {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(Buffer.byteLength(header)),
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ body: JSON.parse(header) });
  });
});
