import { describe, expect, it } from 'vitest';
import type { BulkRunRequest, BulkRunSpec } from '../contracts/bulk.ts';
import { conflictOf, resumeSettings } from './spec-conflict.ts';

const spec: BulkRunSpec = {
  id: 'nightly',
  tenant: 't',
  model: 'scorer',
  version: '3',
  input: { bucket: 'day-bucket', prefix: 'day/in/' },
  output: { bucket: 'day-bucket', prefix: 'day/out/' },
  chunkRows: 100,
  columns: { features: ['a', 'b'] },
  maxBadRows: 100,
  createdAt: 0,
};
const same: BulkRunRequest = { model: 'scorer', input: 's3://day-bucket/day/in/', output: 's3://day-bucket/day/out/', runId: 'nightly' };

describe('conflictOf', () => {
  it('a request that leaves fields out, or gives the run its own values, is the same run', () => {
    expect(conflictOf(spec, same)).toBeUndefined();
    expect(
      conflictOf(spec, { ...same, version: '3', chunkRows: 100, idColumn: 'id', columns: { '': ['a', 'b'] }, maxBadRows: 100 }),
    ).toBeUndefined();
    // The deadline and the webhook do not define the run.
    expect(conflictOf(spec, { ...same, deadline: 5, webhook: { url: 'https://example.com/hook' } })).toBeUndefined();
  });

  it('another bad-row budget is another run: it decides whether the run fails', () => {
    expect(conflictOf(spec, { ...same, maxBadRows: 200 })).toBe(`"maxBadRows" 200 (the run's: 100)`);
    const { maxBadRows: _, ...unbudgeted } = spec;
    expect(conflictOf(unbudgeted, { ...same, maxBadRows: 200 })).toBe(`"maxBadRows" 200 (the run's: none)`);
  });

  it('names every field that differs, with both values', () => {
    const request = { ...same, model: 'other', output: 's3://day-bucket/elsewhere/', chunkRows: 64, columns: { features: ['a'] } };
    expect(conflictOf(spec, request)).toBe(
      `"model" other (the run's: scorer), "output" s3://day-bucket/elsewhere/ (the run's: s3://day-bucket/day/out/), ` +
        `"columns" {"features":["a"]} (the run's: {"features":["a","b"]}), "chunkRows" 64 (the run's: 100)`,
    );
  });
});

describe('resumeSettings', () => {
  it('takes only the deadline and the webhook, with every event when none are named', () => {
    expect(resumeSettings({ ...same, maxBadRows: 5, chunkRows: 7 })).toEqual({});
    expect(resumeSettings({ ...same, deadline: 1000, webhook: { url: 'https://example.com/hook' } })).toEqual({
      deadline: 1000,
      webhook: { url: 'https://example.com/hook', events: ['bulk.progress', 'bulk.succeeded', 'bulk.failed', 'bulk.canceled'] },
    });
  });
});
