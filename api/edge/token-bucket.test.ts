import { describe, expect, it } from 'vitest';
import { take } from './token-bucket.ts';

const rule = { rate: 2, burst: 3 };

describe('take', () => {
  it('starts full and refuses once the burst is spent, naming the wait', () => {
    let b = take(undefined, rule, 0);
    for (let i = 0; i < 2; i++) {
      expect(b.ok).toBe(true);
      b = take(b.bucket, rule, 0);
    }
    expect(b.ok).toBe(true);
    const refused = take(b.bucket, rule, 0);
    expect(refused).toMatchObject({ ok: false, retryAfterS: 1 });
  });

  it('refills at the rate, never past the burst', () => {
    const empty = { tokens: 0, at: 0 };
    expect(take(empty, rule, 400).ok).toBe(false);
    expect(take(empty, rule, 500).ok).toBe(true);
    expect(take(empty, rule, 60_000).bucket.tokens).toBe(2);
  });

  it('a clock that goes back adds nothing', () => {
    expect(take({ tokens: 0.5, at: 1000 }, rule, 0).ok).toBe(false);
  });
});
