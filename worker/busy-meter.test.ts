// The busy share of a pool worker's inference thread: calls timed on a manual clock, overlapping
// ones counted once, a call across a window's end split between the windows, the clock going backwards.
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../infra/kernel/clock.ts';
import { createBusyMeter } from './busy-meter.ts';
import type { EngineInfo, EngineTensor, InferenceEngine } from './engine/engine.ts';

/** An engine whose calls end when the test says: `finish()` answers the oldest one out. */
function heldEngine() {
  const answers: Array<() => void> = [];
  const call = <T>(value: T) =>
    new Promise<T>((resolve) => {
      answers.push(() => resolve(value));
    });
  const engine: InferenceEngine = {
    load: () => call<EngineInfo>({ inputNames: [], outputNames: [], loadMs: 0 }),
    run: () => call<Record<string, EngineTensor>>({}),
    close: () => call(undefined),
  };
  const finish = async () => {
    answers.shift()?.();
    await new Promise((r) => setImmediate(r));
  };
  return { engine, finish };
}

describe('createBusyMeter', () => {
  it('is the share of the window with a call out; calls out at once count once', async () => {
    const clock = new ManualClock(1_000);
    const meter = createBusyMeter(clock);
    const { engine, finish } = heldEngine();
    const timed = meter.timed(engine);
    await clock.advance(100);
    void timed.run({});
    await clock.advance(100);
    // Sent while the first is out: the thread is busy with one of them either way.
    void timed.run({});
    await clock.advance(100);
    await finish();
    await clock.advance(100);
    await finish();
    await clock.advance(600);
    expect(meter.take()).toBeCloseTo(0.3);
    await clock.advance(1_000);
    expect(meter.take()).toBe(0);
  });

  it('counts a load and a close as busy, and splits a call across the windows it spans', async () => {
    const clock = new ManualClock(0);
    const meter = createBusyMeter(clock);
    const { engine, finish } = heldEngine();
    const timed = meter.timed(engine);
    await clock.advance(500);
    void timed.load('m.onnx', { executionProviders: ['cpu'], intraOpThreads: 1 });
    await clock.advance(500);
    expect(meter.take()).toBeCloseTo(0.5);
    await clock.advance(1_000);
    expect(meter.take()).toBe(1);
    await clock.advance(250);
    await finish();
    void timed.close();
    await clock.advance(250);
    await finish();
    await clock.advance(500);
    expect(meter.take()).toBeCloseTo(0.5);
  });

  it('gives the last share again when the clock stands still or goes backwards, and never leaves [0, 1]', async () => {
    const clock = new ManualClock(10_000);
    const meter = createBusyMeter(clock);
    const { engine, finish } = heldEngine();
    const timed = meter.timed(engine);
    void timed.run({});
    clock.set(11_000);
    await finish();
    clock.set(12_000);
    expect(meter.take()).toBeCloseTo(0.5);
    expect(meter.take()).toBeCloseTo(0.5);
    clock.set(7_000);
    void timed.run({});
    expect(meter.take()).toBeCloseTo(0.5);
    clock.set(10_000);
    await finish();
    clock.set(11_000);
    const share = meter.take();
    expect(share).toBeGreaterThanOrEqual(0);
    expect(share).toBeLessThanOrEqual(1);
    expect(share).toBeCloseTo(0.75);
  });
});
