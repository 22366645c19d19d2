import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../kernel/errors.ts';
import { coldStartModel, drawColdStart, meanColdStartMs, parsePhases } from './cold-start.ts';

describe('cold starts', () => {
  it('splits the total over the four phases; CV 0 always takes the mean', () => {
    const model = coldStartModel(60_000);
    expect(model.downloading.meanMs).toBe(18_000);
    expect(meanColdStartMs(model)).toBe(60_000);
    expect(drawColdStart(model, 1, 0)).toBe(60_000);
    expect(drawColdStart(model, 1, 99)).toBe(60_000);
  });

  it('draws a spread with the mean and CV asked for, the same for the same (seed, n)', () => {
    const model = coldStartModel(100_000, 0.5);
    const draws = Array.from({ length: 20_000 }, (_, n) => drawColdStart(model, 7, n));
    const mean = draws.reduce((a, b) => a + b, 0) / draws.length;
    expect(mean).toBeGreaterThan(97_000);
    expect(mean).toBeLessThan(103_000);
    // Four independent phases each with CV 0.5, a quarter-ish of the mean each: the total's CV is ≈ 0.5 / √4 × (spread of shares).
    const sd = Math.sqrt(draws.reduce((a, d) => a + (d - mean) ** 2, 0) / draws.length);
    expect(sd / mean).toBeGreaterThan(0.2);
    expect(sd / mean).toBeLessThan(0.35);
    expect(Math.min(...draws)).toBeGreaterThan(0);
    expect(drawColdStart(model, 7, 3)).toBe(draws[3]);
    expect(drawColdStart(model, 8, 3)).not.toBe(draws[3]);
  });

  it('parses phases in seconds with optional CVs, and names what it cannot read', () => {
    const model = parsePhases('launching=5,downloading=20:0.5', coldStartModel(60_000, 0.1));
    expect(model.launching).toEqual({ meanMs: 5_000, cv: 0.1 });
    expect(model.downloading).toEqual({ meanMs: 20_000, cv: 0.5 });
    expect(model.warming).toEqual({ meanMs: 18_000, cv: 0.1 });
    expect(() => parsePhases('booting=5', model)).toThrow(InvalidInputError);
    expect(() => parsePhases('loading=abc', model)).toThrow(/cannot read cold-start phase "loading=abc"/);
  });
});
