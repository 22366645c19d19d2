// A job webhook's payload text: JSON.stringify's text of {type, timestamp, data} below the bound,
// written from the packed outputs; past MAX_JSON_OUTPUT_ELEMENTS the outputs are left out and
// `outputsOmitted` says how many and how to read them, as the job's event stream does.
import { describe, expect, it } from 'vitest';
import type { JobView } from '../../infra/contracts/job.ts';
import { rowsTensor } from '../../infra/contracts/packed-tensors.ts';
import { JSON_SLICE_ELEMENTS } from '../../infra/contracts/tensor-json.ts';
import { jobEventJson, toJobResource } from '../resources/job-resource.ts';
import { roundDeadlines, webhookPayloadJson } from './event-source.ts';

const TIMESTAMP = '2026-01-01T00:00:00.000Z';

/** A succeeded job whose output `y` is FP32 [1, n] (NaN among them, which JSON writes as null). */
function succeeded(n: number): JobView {
  const data = Float32Array.from({ length: n }, (_, i) => (i === 3 ? Number.NaN : i / 8));
  return {
    id: 'job_1',
    tenant: 't',
    model: 'm',
    version: '1',
    status: 'succeeded',
    result: { outputs: [rowsTensor('y', 'FP32', [1, n], data)], timings: { queueMs: 1, inferMs: 2, batchRows: 1 }, workerId: 'w' },
    createdAt: 0,
    startedAt: 1,
    finishedAt: 2,
    attemptsMade: 1,
  };
}

/** Makes reading `view`'s output `data` (the JS array of numbers rowsTensor builds) count. */
function countDataReads(view: JobView): { reads: number } {
  const counter = { reads: 0 };
  for (const t of view.result?.outputs ?? []) {
    const read = Object.getOwnPropertyDescriptor(t, 'data')?.get;
    Object.defineProperty(t, 'data', {
      enumerable: true,
      get: () => {
        counter.reads++;
        return read?.call(t);
      },
    });
  }
  return counter;
}

describe('webhookPayloadJson', () => {
  it.each([10, JSON_SLICE_ELEMENTS * 3 + 1])(
    '%i outputs under the bound: the text JSON.stringify makes of the payload, with no array of numbers built',
    async (n) => {
      const view = succeeded(n);
      const expected = JSON.stringify({ type: 'job.succeeded', timestamp: TIMESTAMP, data: toJobResource(view) });
      const counter = countDataReads(view);
      expect(await webhookPayloadJson('job.succeeded', TIMESTAMP, view, n)).toBe(expected);
      expect(counter.reads).toBe(0);
      expect(await webhookPayloadJson('job.succeeded', TIMESTAMP, view)).toBe(expected);
    },
  );

  it('past the bound: no outputs, outputsOmitted with the count and both binary reads, the rest as it was', async () => {
    const view = succeeded(5000);
    const text = await webhookPayloadJson('job.succeeded', TIMESTAMP, view, 4999);
    const payload = JSON.parse(text) as { type: string; timestamp: string; data: Record<string, unknown> };
    expect(payload.type).toBe('job.succeeded');
    expect(payload.timestamp).toBe(TIMESTAMP);
    expect(payload.data.outputs).toBeUndefined();
    const { outputs: _, ...rest } = toJobResource(view);
    expect(payload.data).toMatchObject(JSON.parse(JSON.stringify(rest)));
    const omitted = payload.data.outputsOmitted as { elements: number; message: string };
    expect(omitted.elements).toBe(5000);
    expect(omitted.message).toContain('more than the 4999');
    expect(omitted.message).toContain('MAX_JSON_OUTPUT_ELEMENTS');
    expect(omitted.message).toContain('GET /v1/jobs/job_1 with Accept: application/octet-stream, or ?binary_data_output=true');
    // The job event stream's data, to the byte: one home for the bound.
    expect(text).toBe(`{"type":"job.succeeded","timestamp":"${TIMESTAMP}","data":${jobEventJson(view, 4999)}}`);
    expect(text.length).toBeLessThan(1000);
  });

  it('a job without outputs (started, failed) is its resource as before', async () => {
    const { result: _, ...rest } = succeeded(1);
    const view: JobView = { ...rest, status: 'failed', error: { code: 'invalid_input', message: 'no' } };
    const text = await webhookPayloadJson('job.failed', TIMESTAMP, view, 0);
    expect(text).toBe(JSON.stringify({ type: 'job.failed', timestamp: TIMESTAMP, data: toJobResource(view) }));
  });
});

describe('roundDeadlines', () => {
  it('doubles on each round given up, up to 64 times the start, and starts again after a round in time', () => {
    const d = roundDeadlines(100);
    expect(d.current()).toBe(100);
    d.givenUp();
    d.givenUp();
    expect(d.current()).toBe(400);
    for (let i = 0; i < 10; i++) d.givenUp();
    expect(d.current()).toBe(6_400);
    d.inTime();
    expect(d.current()).toBe(100);
  });
});
