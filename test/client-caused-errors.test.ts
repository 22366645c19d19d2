/**
 * Issue 20: an index out of the model's range is the tenant's fault, told in our words. On a real
 * stack (API, Redis, S3, a real worker process running ONNX Runtime) with a Gather model whose
 * indices are the input: sync inference answers 400 invalid_input, an async job fails with the
 * same code and message, neither names a graph node or echoes ORT's message, the worker's log
 * has ORT's full message for operators, and the worker serves the next job.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopChild } from '../scripts/dev/stop-child.ts';
import { buildGatherModel } from '../scripts/fixtures/onnx-models.ts';
import { INPUT_REJECTED } from '../worker/engine/rejections.ts';
import { KEY_B, startStack, type TestStack, waitForJob } from './support/stack.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
/** What ORT's message holds and a tenant must not see: the node's name and kind, the table's bounds. */
const INTERNALS = /gather_0|Gather|Name:'|Status Message|inclusive range|idx=|\[-8,7\]/i;

let stack: TestStack;
let worker: ChildProcess;
let workerLog = '';

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300' });
  await stack.registry.publish({ name: 'lookup', version: '1', bytes: buildGatherModel(), maxBatch: 16 });
  await stack.deployments.put({ model: 'lookup', version: '1', min: 1, max: 1, standby: 0 });
  // Started here rather than by the stack, to read its log.
  worker = spawn(process.execPath, [BIN, 'worker', '--model', 'lookup', '--version', '1'], {
    env: stack.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  worker.stdout?.on('data', (chunk: Buffer) => {
    workerLog += chunk.toString();
  });
  await stack.waitForWorkers('lookup', 'active');
}, 120_000);

afterAll(async () => {
  if (worker) await stopChild(worker);
  await stack?.close();
});

const lookup = (indices: number[]) => ({ inputs: [{ name: 'idx', shape: [indices.length, 1], datatype: 'INT64', data: indices }] });

describe('an index out of the model’s range', () => {
  it('is a 400 invalid_input on sync inference, without graph internals; the worker logs ORT’s message and serves on', async () => {
    const res = await stack.call('/v2/models/lookup/infer', { method: 'POST', body: JSON.stringify(lookup([1, 99])), key: KEY_B });
    const text = await res.text();
    expect(res.status).toBe(400);
    expect(JSON.parse(text)).toEqual({ error: { code: 'invalid_input', message: INPUT_REJECTED } });
    expect(text).not.toMatch(INTERNALS);
    // For operators: the job, and ORT's own words (node name included).
    await expect.poll(() => workerLog, { timeout: 10_000 }).toMatch(/ONNX Runtime rejected a job/);
    expect(workerLog).toMatch(/"code":"invalid_input".*"ortMessage":"[^"]*gather_0[^"]*idx=99/);

    const good = await stack.call('/v2/models/lookup/infer', { method: 'POST', body: JSON.stringify(lookup([2])), key: KEY_B });
    expect(good.status).toBe(200);
    expect(((await good.json()) as { outputs: Array<{ data: number[] }> }).outputs[0]?.data).toEqual([8, 9, 10, 11]);
  });

  it('fails an async job with the same code and message, and only that job of its batch', async () => {
    const submit = async (indices: number[]) => {
      // tenant-a's: waitForJob reads with tenant-a's key.
      const res = await stack.call('/v1/models/lookup/jobs', { method: 'POST', body: JSON.stringify(lookup(indices)) });
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    };
    const [bad, ...good] = await Promise.all([submit([-9]), submit([0]), submit([7])]);
    const failed = await waitForJob(stack, bad as string);
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'invalid_input', message: INPUT_REJECTED } });
    expect(JSON.stringify(failed)).not.toMatch(INTERNALS);
    for (const id of good) expect((await waitForJob(stack, id)).status).toBe('succeeded');
  });
});
