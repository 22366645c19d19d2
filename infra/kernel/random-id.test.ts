import { describe, expect, it } from 'vitest';
import { randomId } from './random-id.ts';

describe('randomId', () => {
  it('gives distinct base64url ids of the asked size, across pool refills', () => {
    const ids = new Set(Array.from({ length: 2000 }, () => randomId()));
    expect(ids.size).toBe(2000);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{20}$/);
    expect(randomId(6)).toMatch(/^[A-Za-z0-9_-]{8}$/);
    expect(Buffer.from(randomId(32), 'base64url').byteLength).toBe(32);
  });
});
