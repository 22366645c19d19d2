/**
 * The buffers forward passes' inputs travel in, reused instead of allocated per pass (issue 34).
 * A pass's input is assembled into one buffer (batch-runner's concatenation, or thread-engine's
 * copy of a view), transferred to the inference thread, and transferred back once the pass is
 * over (ort-thread.ts), so it is copied into once and allocated once for many passes.
 *
 * Why it matters: on a model with big rows (an image of 27,648 floats is 110 KB) a buffer per
 * pass is ~1 MB a pass of memory outside V8's heap, and V8 answers that with a collection
 * ("external memory pressure") every few tens of MB: on a 2-core host the worker's main thread
 * spent about as long in those collections as in all its own code, on the cores ONNX Runtime's
 * threads need (docs/BENCHMARKS.md, issue 34's profile).
 *
 * Sizes. Buffers come in powers of two from MIN_POOLED_BYTES: a request for n bytes takes one of
 * the smallest class that holds n, so a pass of 7 rows and one of 8 share buffers, at most twice
 * the bytes asked. A buffer handed back of any other size (an entry's own bytes) is left to the
 * collector. Below
 * MIN_POOLED_BYTES a buffer is simply allocated: V8 handles small ones cheaply.
 *
 * Bounds. A buffer is idle only after a pass gave it back, so a class never holds more idle
 * buffers than passes of its size were once in flight together: the pool keeps at most what the
 * passes themselves held at their peak, never more, and drops any past IDLE_PER_CLASS. The
 * classes double, so over all of them the idle bytes stay under 2 × IDLE_PER_CLASS × the largest
 * class a pass used.
 *
 * `lent` says whether a buffer came from `take`: only those may be transferred whole although a
 * view covers part of them. Any other view is copied before a transfer, since its buffer may hold
 * bytes the caller still reads (an entry's other rows, Node's Buffer pool). So a buffer from
 * `take` is one pass's input tensor and nothing else's: never cut into several tensors.
 */

/** Smaller buffers are allocated per pass (a 64-float row batch of 128 is 32 KB). */
export const MIN_POOLED_BYTES = 64 * 1024;
/** Idle buffers kept per size class: the passes a worker can have in flight, MAX_AUTO_SESSIONS (4) sessions × one running and one waiting. */
export const IDLE_PER_CLASS = 8;

export interface TransferBufferStats {
  /** Buffers taken from the idle lists / allocated anew. */
  reused: number;
  allocated: number;
  /** Idle buffers and their bytes now. */
  idle: number;
  idleBytes: number;
}

export class TransferBuffers {
  private readonly idle = new Map<number, ArrayBuffer[]>();
  private readonly lentSet = new WeakSet<ArrayBuffer>();
  private reused = 0;
  private allocated = 0;

  /** A buffer of at least `bytes` bytes, whose contents are unspecified. */
  take(bytes: number): ArrayBuffer {
    if (bytes < MIN_POOLED_BYTES) return new ArrayBuffer(bytes);
    const cls = classFor(bytes);
    const buf = this.idle.get(cls)?.pop();
    if (buf) this.reused++;
    else this.allocated++;
    const out = buf ?? new ArrayBuffer(2 ** cls);
    this.lentSet.add(out);
    return out;
  }

  /** A buffer nobody reads any more (a pass's input, back from the thread). */
  give(buf: ArrayBuffer): void {
    // Only a class's own size: any other could serve no request of its class (a detached buffer's length is 0).
    if (buf.byteLength < MIN_POOLED_BYTES || !Number.isInteger(Math.log2(buf.byteLength))) return;
    const cls = Math.log2(buf.byteLength);
    const list = this.idle.get(cls) ?? [];
    if (list.length >= IDLE_PER_CLASS) return;
    list.push(buf);
    this.idle.set(cls, list);
  }

  /** `buf` came from take(): it may be transferred whole. */
  lent(buf: ArrayBufferLike): boolean {
    return buf instanceof ArrayBuffer && this.lentSet.has(buf);
  }

  stats(): TransferBufferStats {
    let idle = 0;
    let idleBytes = 0;
    for (const list of this.idle.values()) {
      idle += list.length;
      for (const b of list) idleBytes += b.byteLength;
    }
    return { reused: this.reused, allocated: this.allocated, idle, idleBytes };
  }
}

/** The smallest power-of-two exponent whose size holds `bytes`. */
function classFor(bytes: number): number {
  return Math.ceil(Math.log2(bytes));
}

/** The process's pool: every inference thread of a worker and its batch assembly share it. */
export const transferBuffers = new TransferBuffers();
