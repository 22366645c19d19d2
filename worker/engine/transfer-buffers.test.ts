import { describe, expect, it } from 'vitest';
import { IDLE_PER_CLASS, MIN_POOLED_BYTES, TransferBuffers } from './transfer-buffers.ts';

describe('TransferBuffers', () => {
  it('allocates small buffers exactly and lends none of them', () => {
    const pool = new TransferBuffers();
    const small = pool.take(1000);
    expect(small.byteLength).toBe(1000);
    expect(pool.lent(small)).toBe(false);
  });

  it('hands out a power of two that holds the bytes asked, and reuses it once given back', () => {
    const pool = new TransferBuffers();
    const a = pool.take(110_592); // a 3×48×192 float row
    expect(a.byteLength).toBe(131_072);
    expect(pool.lent(a)).toBe(true);
    pool.give(a);
    const b = pool.take(100_000);
    expect(b).toBe(a);
    expect(pool.stats()).toMatchObject({ reused: 1, allocated: 1, idle: 0 });
  });

  it('keeps a buffer of another size out of the pool, and a detached one', () => {
    const pool = new TransferBuffers();
    pool.give(new ArrayBuffer(110_592));
    const detached = new ArrayBuffer(MIN_POOLED_BYTES);
    structuredClone(detached, { transfer: [detached] });
    pool.give(detached);
    expect(pool.stats().idle).toBe(0);
  });

  it('takes a buffer handed back from elsewhere (the thread) when its size is a class size', () => {
    const pool = new TransferBuffers();
    const back = new ArrayBuffer(2 * MIN_POOLED_BYTES);
    pool.give(back);
    expect(pool.take(MIN_POOLED_BYTES + 1)).toBe(back);
  });

  it('keeps at most IDLE_PER_CLASS idle buffers of a class', () => {
    const pool = new TransferBuffers();
    const taken = Array.from({ length: IDLE_PER_CLASS + 3 }, () => pool.take(MIN_POOLED_BYTES));
    for (const b of taken) pool.give(b);
    expect(pool.stats()).toMatchObject({ idle: IDLE_PER_CLASS, idleBytes: IDLE_PER_CLASS * MIN_POOLED_BYTES });
  });
});
