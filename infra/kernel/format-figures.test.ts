import { describe, expect, it } from 'vitest';
import { formatCount, formatDuration, formatRate } from './format-figures.ts';

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

describe('formatDuration', () => {
  it.each([
    [0, '0s'],
    [44.6, '45s'],
    [60, '1m00s'],
    [185, '3m05s'],
    [3600, '1h00m'],
    [7620, '2h07m'],
    [86_400 * 3 + 3600 * 4, '3d04h'],
    [-5, '0s'],
  ])('%s s → %s', (seconds, text) => expect(formatDuration(seconds)).toBe(text));
});

describe('formatCount', () => {
  it('rounds to a whole and separates thousands', () => {
    expect(formatCount(12_457.6)).toBe('12,458');
    expect(formatCount(0)).toBe('0');
    expect(formatCount(999)).toBe('999');
  });
});
