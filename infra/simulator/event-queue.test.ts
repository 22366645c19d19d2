import { describe, expect, it } from 'vitest';
import { EventQueue } from './event-queue.ts';

describe('EventQueue', () => {
  it('pops by time, and events at the same time first-in first-out', () => {
    const q = new EventQueue<string>();
    const times = [5, 1, 9, 1, 3, 5, 0, 7, 1];
    for (const [i, t] of times.entries()) q.push(t, `${t}:${i}`);
    const out: string[] = [];
    while (q.size > 0) out.push(q.pop()?.value ?? '');
    expect(out).toEqual(['0:6', '1:1', '1:3', '1:8', '3:4', '5:0', '5:5', '7:7', '9:2']);
    expect(q.peekTime()).toBe(Number.POSITIVE_INFINITY);
    expect(q.pop()).toBeUndefined();
  });

  it('stays ordered under interleaved pushes and pops', () => {
    const q = new EventQueue<number>();
    let x = 12345;
    const popped: number[] = [];
    for (let i = 0; i < 2000; i++) {
      x = (x * 1103515245 + 12345) % 2147483648;
      q.push((popped.at(-1) ?? 0) + (x % 1000), i);
      if (i % 3 === 0) popped.push(q.pop()?.at ?? -1);
    }
    while (q.size > 0) popped.push(q.pop()?.at ?? -1);
    for (let i = 1; i < popped.length; i++) expect(popped[i]).toBeGreaterThanOrEqual(popped[i - 1] ?? 0);
  });
});
