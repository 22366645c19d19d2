/**
 * rejectionOf on ONNX Runtime's real messages (the thread engine on real models): an index out of
 * range is the input's fault, any other rejection the model's, and neither carries ORT's words.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildGatherModel } from '../../scripts/fixtures/onnx-models.ts';
import { INPUT_REJECTED, MODEL_FAILED, rejectionOf } from './rejections.ts';
import { createThreadEngine, type ThreadEngine } from './thread-engine.ts';

let dir: string;
let engine: ThreadEngine;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'warmpool-rejections-'));
  await writeFile(path.join(dir, 'gather.onnx'), buildGatherModel());
  engine = createThreadEngine();
  await engine.load(path.join(dir, 'gather.onnx'), { executionProviders: ['cpu'], intraOpThreads: 1 });
});

afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

async function ortMessage(run: Promise<unknown>): Promise<string> {
  const err = await run.then(
    () => null,
    (e: unknown) => e as Error,
  );
  expect(err).toBeInstanceOf(Error);
  return (err as Error).message;
}

describe('rejectionOf', () => {
  it.each([99n, -9n, 2n ** 40n])('calls a Gather index of %s the input’s fault, in words that name no node', async (index) => {
    const message = await ortMessage(engine.run({ idx: { type: 'int64', dims: [1, 1], data: new BigInt64Array([index]) } }));
    expect(message).toMatch(/Gather.*out of data bounds/);
    expect(rejectionOf(message)).toEqual({ code: 'invalid_input', message: INPUT_REJECTED });
  });

  it('calls any other rejection the model’s, without ORT’s message either', async () => {
    // A rank the graph does not take (the API's validation would refuse it; here it stands for
    // an op failing on data the model declares it accepts).
    const message = await ortMessage(engine.run({ idx: { type: 'int64', dims: [1, 1, 1], data: new BigInt64Array([1n]) } }));
    expect(message).toMatch(/rank/i);
    expect(rejectionOf(message)).toEqual({ code: 'inference_failed', message: MODEL_FAILED });
    expect(
      rejectionOf(
        "Non-zero status code returned while running Gather node. Name:'/Gather_1' Status Message: GatherElements op: Out of range value in index tensor",
      ),
    ).toMatchObject({ code: 'invalid_input' });
    expect(rejectionOf('invalid indice found, indice = 12')).toMatchObject({ code: 'invalid_input' });
  });
});
