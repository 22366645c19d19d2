import { expect, it } from 'vitest';
import { sinceFirstArrival } from './controller.ts';
import { overridesOf } from './settings.ts';

it('reads the history from its first arrival on: earlier minutes are no data, not no demand', () => {
  expect(sinceFirstArrival({ startMs: 0, perMinute: [0, 0, 3, 0, 5] })).toEqual({ startMs: 120_000, perMinute: [3, 0, 5] });
  expect(sinceFirstArrival({ startMs: 0, perMinute: [1, 0] })).toEqual({ startMs: 0, perMinute: [1, 0] });
  expect(sinceFirstArrival({ startMs: 0, perMinute: [0, 0, 0] })).toEqual({ startMs: 120_000, perMinute: [0] });
  expect(sinceFirstArrival({ startMs: 0, perMinute: [] })).toEqual({ startMs: 0, perMinute: [] });
});

it("takes a deployment policy's numeric settings and ignores anything else", () => {
  expect(overridesOf({ sloQueueWaitMs: 5000, targetUtilization: 0.6, coldStartMs: 'fast', min: 3, scaleDownStabilizationMs: -1 })).toEqual({
    sloQueueWaitMs: 5000,
    targetUtilization: 0.6,
  });
  expect(overridesOf(undefined)).toEqual({});
});
