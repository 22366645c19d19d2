import { describe, expect, it } from 'vitest';
import { generateManyModelWorld } from './many-model-generator.ts';
import { parseManyModelTrace, splitIntoModels, totalPerMinute, zipfShares } from './many-model-trace.ts';
import type { Trace } from './trace.ts';

describe('many-model traces', () => {
  it('reads one row per request with a model column, busiest model first', () => {
    const t = parseManyModelTrace('ts,model\n2026-01-05T00:00:10Z,b\n2026-01-05T00:00:20Z,a\n2026-01-05T00:01:05Z,a\n', {
      modelColumn: 'model',
      timeColumn: 'ts',
    });
    expect(t.models).toEqual(['a', 'b']);
    expect(t.perMinute).toEqual([
      [1, 1],
      [1, 0],
    ]);
  });

  it('reads per-minute counts per model', () => {
    const t = parseManyModelTrace('minute,model,n\n0,a,3\n60,a,2\n60,b,7\n', { modelColumn: 'model', countColumn: 'n' });
    expect(t.models).toEqual(['b', 'a']);
    expect(t.perMinute).toEqual([
      [0, 7],
      [3, 2],
    ]);
  });

  it('names a missing column', () => {
    expect(() => parseManyModelTrace('ts,x\n0,a\n', { modelColumn: 'model' })).toThrow(/no column "model"/);
  });

  it('splits a trace among models keeping every minute’s total, the busiest model by Zipf', () => {
    const perMinute = Array.from({ length: 200 }, (_, i) => (i % 3 === 0 ? 5 : 400));
    const trace: Trace = { series: { startMs: 0, perMinute }, missing: perMinute.map(() => false), rows: 1 };
    const split = splitIntoModels(trace, 20, 3);
    expect(totalPerMinute(split)).toEqual(perMinute);
    const share = (split.perMinute[0] as number[]).reduce((a, b) => a + b, 0) / perMinute.reduce((a, b) => a + b, 0);
    expect(share).toBeCloseTo(zipfShares(20)[0] as number, 1);
  });

  it('generates the same world from the same seed and another from another', () => {
    const a = generateManyModelWorld({ models: 5, days: 0.1, seed: 4, totalPerSec: 2 });
    const b = generateManyModelWorld({ models: 5, days: 0.1, seed: 4, totalPerSec: 2 });
    const c = generateManyModelWorld({ models: 5, days: 0.1, seed: 5, totalPerSec: 2 });
    expect(b).toEqual(a);
    expect(c.trace.perMinute).not.toEqual(a.trace.perMinute);
  });
});
