/**
 * The simulator's event queue: a binary min-heap ordered by time, then by insertion order, so
 * events at the same instant run first-in first-out and a replay is the same on every run.
 */
export interface QueuedEvent<T> {
  at: number;
  seq: number;
  value: T;
}

export class EventQueue<T> {
  private readonly heap: QueuedEvent<T>[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  push(at: number, value: T): void {
    const heap = this.heap;
    heap.push({ at, seq: this.seq++, value });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i] as QueuedEvent<T>, heap[parent] as QueuedEvent<T>)) break;
      swap(heap, i, parent);
      i = parent;
    }
  }

  /** Time of the earliest event; +Infinity when empty. */
  peekTime(): number {
    return this.heap[0]?.at ?? Number.POSITIVE_INFINITY;
  }

  pop(): QueuedEvent<T> | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < heap.length && before(heap[l] as QueuedEvent<T>, heap[m] as QueuedEvent<T>)) m = l;
      if (r < heap.length && before(heap[r] as QueuedEvent<T>, heap[m] as QueuedEvent<T>)) m = r;
      if (m === i) return top;
      swap(heap, i, m);
      i = m;
    }
  }
}

function before<T>(a: QueuedEvent<T>, b: QueuedEvent<T>): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

function swap<T>(a: T[], i: number, j: number): void {
  const t = a[i] as T;
  a[i] = a[j] as T;
  a[j] = t;
}
