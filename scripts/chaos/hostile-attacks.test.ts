import { describe, expect, it } from 'vitest';
import { failureOf } from './hostile-attacks.ts';

describe('failureOf', () => {
  it("names what fetch's bare 'fetch failed' hides: the cause's code, else its message", () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(failureOf(new TypeError('fetch failed', { cause: reset }))).toBe('fetch failed: ECONNRESET');
    expect(failureOf(new TypeError('fetch failed', { cause: new Error('other side closed') }))).toBe('fetch failed: other side closed');
    expect(failureOf(new Error('request timed out'))).toBe('request timed out');
  });
});
