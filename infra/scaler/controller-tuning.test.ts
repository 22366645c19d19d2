/** The live tuner's spacing: how often a deployment is retuned for the window it replays. */
import { describe, expect, it } from 'vitest';
import { RETUNES_PER_WINDOW, retuneSpacingMs } from './controller-tuning.ts';

const MIN = 60_000;

describe('retuneSpacingMs', () => {
  it('is the interval when the window is short, a sixth of the window when that is longer', () => {
    expect(RETUNES_PER_WINDOW).toBe(6);
    expect(retuneSpacingMs(30 * MIN, 60 * MIN)).toBe(30 * MIN);
    expect(retuneSpacingMs(5 * MIN, 60 * MIN)).toBe(10 * MIN);
    expect(retuneSpacingMs(5 * MIN, 1440 * MIN)).toBe(240 * MIN);
    expect(retuneSpacingMs(0, 120 * MIN)).toBe(20 * MIN);
  });
});
