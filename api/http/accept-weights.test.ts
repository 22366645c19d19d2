import { describe, expect, it } from 'vitest';
import { acceptWeights } from './accept-weights.ts';

describe('acceptWeights', () => {
  it('gives each listed name its q (1 when absent), lower-cased, in the order first listed', () => {
    const q = acceptWeights('Application/JSON;q=0.5, application/octet-stream, */*;q=0.1');
    expect([...q]).toEqual([
      ['application/json', 0.5],
      ['application/octet-stream', 1],
      ['*/*', 0.1],
    ]);
  });

  it('an unreadable or empty q is 0, a q outside [0, 1] is clamped, a name listed twice keeps its highest', () => {
    expect([...acceptWeights('gzip;q=x, br;q=, deflate;q=7, zstd;q=-1')]).toEqual([
      ['gzip', 0],
      ['br', 0],
      ['deflate', 1],
      ['zstd', 0],
    ]);
    expect(acceptWeights('gzip;q=0.2, x-gzip;q=0.9', (n) => (n === 'x-gzip' ? 'gzip' : n)).get('gzip')).toBe(0.9);
  });
});
