/**
 * A run's bad rows as the driver keeps them (run-driver.ts): the first MAX_BAD_ROW_SAMPLES in
 * input order, each named by its line in its object, and the budget they are held to. Apart
 * from the driver because placing a sample is bookkeeping of its own, over which chunks of an
 * object are counted, that the drive's loop only feeds.
 *
 * Bad rows come back with each chunk's part (count and the first few). A text chunk knows its
 * bad rows' lines within itself; the object's line is that plus the lines of the object's
 * earlier chunks, which are added once those are counted (until then a sample names its byte
 * offset). The budget (contracts/bulk.ts `badRowBudget`): the run fails as soon as the bad rows
 * pass the budget of the rows it expects, and at the end against the exact count; a run with
 * bad rows and no good one never succeeds.
 */
import { type BadRow, badRowBudget, type ChunkBadRow } from '../contracts/bulk.ts';

export const MAX_BAD_ROW_SAMPLES = 20;

/** Where a chunk lies in its object: what turns its local lines into the object's. */
export interface ChunkSpan {
  object: string;
  /** The object's chunks [firstChunk, endChunk): the sum of earlier chunks' lines turns local lines into the object's. */
  firstChunk: number;
  endChunk: number;
  text: boolean;
}

/** How far an object's chunks are counted without a gap: lines before `next` are known. */
interface CountedPrefix {
  next: number;
  lines: number;
}

/** A bad row whose object line is not known yet (an earlier chunk of its object is not counted). */
interface PendingSample {
  chunk: number;
  info: ChunkSpan;
  bad: ChunkBadRow;
}

export class BadRowSamples {
  /** The samples kept, earliest first: the run record's list (progress and the manifest show it). */
  readonly list: BadRow[];
  private pending: PendingSample[] = [];
  /** Lines each counted text chunk owned (to place its bad rows in its object). */
  private readonly chunkLines = new Map<number, number>();
  /** Per text chunk whose object's earlier chunks are all counted: their lines (a running sum, so placing a row is O(1)). */
  private readonly linesBefore = new Map<number, number>();
  private readonly prefixes = new Map<string, CountedPrefix>();
  /** Input objects in key order, by key: the order bad-row samples are kept in. */
  private objectOrder = new Map<string, number>();

  constructor(saved: readonly BadRow[]) {
    this.list = [...saved];
  }

  /** The input objects in key order: the order samples are kept in. */
  setOrder(keys: readonly string[]): void {
    this.objectOrder = new Map(keys.map((key, i) => [key, i]));
  }

  /** The lines a counted text chunk owned. */
  noteLines(chunk: number, lines: number): void {
    this.chunkLines.set(chunk, lines);
  }

  /** Walks the object's run of counted chunks forward, noting each one's lines before it. */
  advancePrefix(info: ChunkSpan): void {
    if (!info.text) return;
    const at = this.prefixes.get(info.object) ?? { next: info.firstChunk, lines: 0 };
    this.prefixes.set(info.object, at);
    this.linesBefore.set(at.next, at.lines);
    while (at.next < info.endChunk && this.chunkLines.has(at.next)) {
      at.lines += this.chunkLines.get(at.next) as number;
      at.next++;
      this.linesBefore.set(at.next, at.lines);
    }
  }

  /** Where a bad row sorts among samples: its object's place in the listing, then its byte (or row). */
  private rank(object: string, at: number): [number, number] {
    return [this.objectOrder.get(object) ?? Number.MAX_SAFE_INTEGER, at];
  }

  private before(a: [number, number], b: [number, number]): boolean {
    return a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
  }

  /**
   * Keeps a chunk's bad row only if it could be among the run's first MAX_BAD_ROW_SAMPLES: the
   * pending list stays that short whatever the number of bad rows, and placing is O(1) a row.
   */
  consider(p: PendingSample): void {
    const rank = this.rank(p.info.object, p.bad.byte ?? p.bad.line);
    const worst = this.list.length >= MAX_BAD_ROW_SAMPLES ? (this.list.at(-1) as BadRow) : undefined;
    if (worst && !this.before(rank, this.rank(worst.object, worst.byte ?? worst.line))) return;
    this.pending.push(p);
    if (this.pending.length > MAX_BAD_ROW_SAMPLES) {
      const keyed = this.pending.map((q) => ({ q, r: this.rank(q.info.object, q.bad.byte ?? q.bad.line) }));
      keyed.sort((x, y) => (this.before(x.r, y.r) ? -1 : this.before(y.r, x.r) ? 1 : 0));
      this.pending = keyed.slice(0, MAX_BAD_ROW_SAMPLES).map((k) => k.q);
    }
  }

  /**
   * Moves bad rows whose object line is now known into the samples (the earliest rows first,
   * at most MAX_BAD_ROW_SAMPLES); `final`: the rest too, named by byte offset.
   */
  place(final: boolean): void {
    const left: PendingSample[] = [];
    for (const p of this.pending) {
      const line = this.objectLine(p);
      if (line === undefined && !final) left.push(p);
      else this.addSample(p, line);
    }
    this.pending = left;
  }

  private objectLine({ chunk, info, bad }: PendingSample): number | undefined {
    if (!info.text) return bad.line;
    const before = this.linesBefore.get(chunk);
    return before === undefined ? undefined : before + bad.line;
  }

  private addSample({ info, bad }: PendingSample, line: number | undefined): void {
    const sample: BadRow = {
      object: info.object,
      line: line ?? 0,
      ...(bad.byte !== undefined ? { byte: bad.byte } : {}),
      message: line === undefined ? `${bad.message} (the line starting at byte ${bad.byte ?? '?'})` : bad.message,
    };
    if (this.list.some((s) => s.object === sample.object && s.line === sample.line && s.byte === sample.byte)) return;
    const rank = (s: BadRow) => this.rank(s.object, s.byte ?? s.line);
    this.list.push(sample);
    this.list.sort((a, b) => (this.before(rank(a), rank(b)) ? -1 : this.before(rank(b), rank(a)) ? 1 : 0));
    this.list.length = Math.min(this.list.length, MAX_BAD_ROW_SAMPLES);
  }

  /**
   * The run's failure message when its bad rows passed the budget, else undefined (then every
   * pending sample is placed first): during the run, of the rows it expects (`good`,
   * bytes-scaled, so an early estimate errs only as much as the plan did); at the end
   * (`final`), of the exact count, and whenever no row at all was good.
   */
  overBudget(
    counts: { good: number; badRows: number; rowsDone: number; maxBadRows: number | undefined; final: boolean },
    urlOf: (object: string) => string,
  ): string | undefined {
    const { good, badRows, rowsDone, maxBadRows, final } = counts;
    const rows = good + badRows;
    const budget = badRowBudget(rows, maxBadRows);
    const allBad = final && badRows > 0 && rowsDone === 0;
    if (badRows <= budget && !allBad) return undefined;
    this.place(true);
    const first = this.list[0];
    const where = first ? `; the first: ${urlOf(first.object)}${first.line > 0 ? ` line ${first.line}` : ''}: ${first.message}` : '';
    const limit =
      maxBadRows !== undefined
        ? `more than maxBadRows ${maxBadRows}`
        : `more than the budget of 1 % of the run's ${rows} rows (at least 100; --max-bad-rows sets another)`;
    return allBad ? `every row was bad (${badRows})${where}` : `${badRows} bad rows, ${limit}${where}`;
  }
}
