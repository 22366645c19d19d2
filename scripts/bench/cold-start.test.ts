import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { testServices } from '../../test/support/services.ts';
import { buildMultiTypeModel } from '../fixtures/onnx-models.ts';
import { phasesFrom, rawWarmStart, stateMarkOf } from './cold-start.ts';

describe('phasesFrom', () => {
  it('splits a start into boot, download, load and warm-up from the state timestamps', () => {
    const phases = phasesFrom(1_000, [
      { state: 'launching', at: 1_400 },
      { state: 'downloading', at: 1_500 },
      { state: 'loading', at: 1_800 },
      { state: 'warming', at: 2_000 },
      { state: 'active', at: 2_600 },
    ]);
    expect(phases).toEqual({ boot: 500, download: 300, load: 200, warmup: 600, ready: 1_100 });
  });

  it('counts a worker that warmed into standby as ready then', () => {
    const phases = phasesFrom(0, [
      { state: 'downloading', at: 10 },
      { state: 'loading', at: 20 },
      { state: 'warming', at: 30 },
      { state: 'standby', at: 70 },
      { state: 'active', at: 900 },
    ]);
    expect(phases.warmup).toBe(40);
    expect(phases.ready).toBe(60);
  });

  it('leaves phases it has no marks for as NaN', () => {
    const phases = phasesFrom(0, [{ state: 'downloading', at: 10 }]);
    expect(phases.boot).toBe(10);
    expect(phases.download).toBeNaN();
    expect(phases.ready).toBeNaN();
  });
});

describe('stateMarkOf', () => {
  it("reads a state change from the worker's pino line", () => {
    const line = JSON.stringify({ level: 30, time: 1234, pid: 1, state: 'loading', previous: 'downloading', msg: 'worker state' });
    expect(stateMarkOf(line)).toEqual({ state: 'loading', at: 1234 });
  });

  it('ignores other lines, other messages and broken JSON', () => {
    expect(stateMarkOf('plain text')).toBeUndefined();
    expect(stateMarkOf(JSON.stringify({ time: 1, state: 'active', msg: 'warm-up done' }))).toBeUndefined();
    expect(stateMarkOf('{"msg": "worker state", "state"')).toBeUndefined();
  });
});

describe('rawWarmStart', () => {
  const dir = mkdtempSync(path.join(testServices().tmpDir, 'raw-start-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  // Four inputs of four types, so the fresh process builds every kind of tensor it is sent.
  const manifest: ModelManifest = {
    name: 'multi',
    version: '1',
    format: 'onnx',
    sha256: '0'.repeat(64),
    sizeBytes: 0,
    inputs: [
      { name: 'x', datatype: 'FP32', shape: [-1, 2, 2] },
      { name: 'ids', datatype: 'INT64', shape: [-1, 3] },
      { name: 'mask', datatype: 'BOOL', shape: [-1, 3] },
      { name: 'n', datatype: 'INT32', shape: [-1, 1] },
    ],
    outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 2, 3] }],
    batching: { maxBatch: 8, warmupBatches: [1, 8] },
    createdAt: new Date(0).toISOString(),
    labels: {},
  };

  it('times import + create + the warm-up runs in a process of its own', async () => {
    const file = path.join(dir, 'multi.onnx');
    writeFileSync(file, buildMultiTypeModel());
    const ms = await rawWarmStart(file, manifest, 1, 2);
    expect(Number.isFinite(ms)).toBe(true);
    expect(ms).toBeGreaterThan(0);
  });

  it("fails with the process's own error, never a number, when ONNX Runtime cannot run it", async () => {
    await expect(rawWarmStart(path.join(dir, 'missing.onnx'), manifest, 1, 1)).rejects.toThrow(
      /raw warm start failed \(exit 1\): .*missing\.onnx/s,
    );
  });
});
