import { describe, expect, it } from 'vitest';
import { formatRate } from './format-rate.ts';

describe('formatRate', () => {
  it.each([
    [0, '0.0'],
    [0.05, '0.05'],
    [0.004, '0.004'],
    [0.00333, '0.0033'],
    [0.125, '0.13'],
    [0.5, '0.5'],
    [0.999, '1.0'],
    [1, '1.0'],
    [2.25, '2.3'],
    [45.26, '45.3'],
    [99.9, '99.9'],
    [812.4, '812'],
    [12_458.2, '12,458'],
  ])('%s → %s', (rate, text) => expect(formatRate(rate)).toBe(text));

  it('never rounds a small rate to a different first digit, nor to zero', () => {
    for (const rate of [0.05, 0.015, 0.0049, 0.00012]) {
      const shown = Number(formatRate(rate));
      expect(shown).toBeGreaterThan(0);
      expect(Math.abs(shown - rate) / rate).toBeLessThan(0.1);
    }
  });
});
