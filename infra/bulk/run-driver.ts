/**
 * One drive of one run, while its driver holds the lease (driver.ts). Steps:
 *
 *   pin the input listing (first drive) or check it is unchanged (a resume) → read each object
 *   in key order, rows → chunks (chunker.ts) → for each chunk not yet counted: wait for room in
 *   the window, then count it if BullMQ or S3 already has its part, adopt its job if one is
 *   pending, or enqueue it → once every object is read, wait for the window to empty → write
 *   `_manifest.json` → succeeded.
 *
 * Ends: `failed` (input changed, too many bad rows, a chunk failed after its retries), or
 * `canceled` seen in the record; either removes the run's queued chunks. Abort (the signal: the
 * CLI interrupted, the lease lost) just stops: queued chunks stay and the next drive counts them.
 *
 * Idempotent under any crash: a chunk is counted once (run-store.ts), its job id is fixed
 * (`bulk:<ref>:<chunk>`), its part is one S3 put by key. Objects read whole by an earlier drive
 * whose chunks are all counted are skipped from their recorded stats instead of being re-read.
 */

import { type BadRow, type BulkPartResult, partKey } from '../contracts/bulk.ts';
import { BULK_PRIORITIES } from '../contracts/job.ts';
import type { ModelManifest } from '../contracts/manifest.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { Wakeup } from '../kernel/wakeup.ts';
import { type ChunkQueue, createChunkQueue } from '../queue/index.ts';
import { type BulkDeps, chunkJobOptions, removeQueuedChunks } from './bulk-runs.ts';
import { clearCapacityRequest } from './capacity-request.ts';
import { type Chunk, chunkJobData, chunkRows } from './chunker.ts';
import { describeListingChange, listInput, readPart } from './listing.ts';
import { type BadLine, createRowSchema, formatOf, readRows } from './row-reader.ts';
import { writeRunManifest } from './run-manifest.ts';
import { type ReportSettings, type RunCounters, RunReporter } from './run-reporter.ts';
import type { ObjectStats, PinnedObject, RunRecord, RunStore } from './run-store.ts';
import { formatS3Url } from './s3-url.ts';

export const MAX_BAD_ROW_SAMPLES = 20;

/** How a drive paces itself (driver.ts fills in the defaults). */
export interface DriveSettings extends ReportSettings {
  /** Chunks enqueued and not yet counted, at most: what the run holds in Redis. */
  windowChunks: number;
  /** Longest wait between looks at the outstanding chunks (a finished chunk wakes the driver sooner). */
  pollMs: number;
}

/** Unwinds the drive once the run reached an end (written by whoever ended it). */
class RunEnded extends Error {}

export class RunDriver {
  private readonly spec: RunRecord['spec'];
  /** The run's name in Redis and in its chunk job ids (run-store.ts `runRef`). */
  private readonly ref: string;
  private readonly outstanding = new Set<number>();
  private readonly wakeup = new Wakeup();
  private queue?: ChunkQueue;
  private manifest?: ModelManifest;
  private listing: PinnedObject[] = [];
  private existingParts = new Set<string>();
  private samples: BadRow[];
  private readonly reporter: RunReporter;
  private rowsDone: number;
  private chunksDone: number;
  private rowsSeen = 0;
  private bytesSeen = 0;
  private badRows = 0;
  private chunksTotal?: number;

  constructor(
    private readonly deps: BulkDeps,
    private readonly store: RunStore,
    record: RunRecord,
    private readonly settings: DriveSettings,
    private readonly signal: AbortSignal,
  ) {
    this.spec = record.spec;
    this.ref = record.ref;
    this.samples = [...record.samples];
    this.reporter = new RunReporter(deps, store, record.ref, record.spec, settings, record.priority);
    this.rowsDone = record.rowsDone;
    this.chunksDone = record.chunksDone;
  }

  /** Resolves when the run ended or the drive was aborted (then with the signal's reason thrown). */
  async run(): Promise<void> {
    try {
      await this.drive();
    } catch (err) {
      if (!(err instanceof RunEnded)) throw err;
    } finally {
      await this.queue?.close();
    }
  }

  private async drive(): Promise<void> {
    const { deps, spec } = this;
    await this.checkLocations();
    this.manifest = await deps.getManifest(spec.model, spec.version);
    this.listing = await this.pinListing();
    await this.store.markStarted(this.ref, deps.clock.now());
    // The rate counts from here, not from the first progress save (after the first chunks
    // finished), which left the run's start-up out and showed up to twice the real rate.
    this.reporter.start(deps.clock.now(), this.rowsDone);
    this.queue = createChunkQueue(deps.redis, deps.prefix, spec.model, spec.version, {
      ...chunkJobOptions(deps),
      onFinished: this.wakeup.fire,
    });
    const written = await deps.storeFor(spec.output.bucket).list(spec.output.prefix);
    this.existingParts = new Set(written.map((o) => o.key));
    const stats = await this.store.objectStats(this.ref);
    let next = 0;
    for (const object of this.listing) next = await this.feedObject(object, next, stats.get(object.key));
    this.chunksTotal = next;
    while (this.outstanding.size > 0) await this.poll();
    await this.succeed();
  }

  /**
   * The run's locations are asked again at every drive, before any S3 call: a location an
   * operator took back from BULK_LOCATIONS, or a run recorded before locations existed, ends the
   * run instead of reading or writing on.
   */
  private async checkLocations(): Promise<void> {
    const { deps, spec } = this;
    try {
      deps.locations.check(spec.tenant, spec.input, 'input');
      deps.locations.check(spec.tenant, spec.output, 'output');
    } catch (err) {
      if (!(err instanceof InvalidInputError)) throw err;
      await this.fail(err.code, err.message);
    }
  }

  private async pinListing(): Promise<PinnedObject[]> {
    const { spec } = this;
    const listed = await listInput(this.deps.storeFor(spec.input.bucket), spec.input.prefix);
    const pinned = await this.store.pinListing(this.ref, listed);
    const change = describeListingChange(pinned, listed, (key) => formatS3Url(spec.input, key));
    if (change) {
      await this.fail('input_changed', `the input changed since the run started: ${change}; start a new run to score the new input`);
    }
    return pinned;
  }

  /** Reads one object (or skips it whole when an earlier drive counted all its chunks); returns the next chunk number. */
  private async feedObject(object: PinnedObject, first: number, stats: ObjectStats | undefined): Promise<number> {
    const { spec, deps } = this;
    if (stats && stats.firstChunk === first && (await this.allCounted(first, stats.chunks))) {
      this.rowsSeen += stats.rows;
      this.bytesSeen += object.sizeBytes;
      this.badRows += stats.badRows;
      return first + stats.chunks;
    }
    const url = formatS3Url(spec.input, object.key);
    const format = formatOf(object.key, spec.format);
    if (!format) return this.fail('unknown_format', `cannot tell the format of ${url}`);
    const stream = await deps.storeFor(spec.input.bucket).get(object.key);
    if (!stream) return this.fail('input_changed', `${url} disappeared since the run started`);
    const before = this.bytesSeen;
    const found = { next: first, rows: 0, bad: 0 };
    try {
      const rows = readRows(stream, {
        format,
        manifest: this.manifest as ModelManifest,
        schema: createRowSchema(this.manifest?.inputs ?? []),
      });
      for await (const event of chunkRows(rows, spec.chunkRows, first)) {
        if (event.kind === 'bad') {
          found.bad++;
          await this.badRow(object.key, event);
          continue;
        }
        found.rows += event.rows.length;
        found.next = event.index + 1;
        this.rowsSeen += event.rows.length;
        this.bytesSeen = before + event.offset;
        await this.submit(event);
      }
    } finally {
      stream.destroy();
    }
    this.bytesSeen = before + object.sizeBytes;
    const objectStats = { firstChunk: first, chunks: found.next - first, rows: found.rows, badRows: found.bad, bytes: object.sizeBytes };
    await this.store.saveObjectStats(this.ref, object.key, objectStats);
    return found.next;
  }

  private async allCounted(first: number, chunks: number): Promise<boolean> {
    const done = await this.store.partsDone(
      this.ref,
      Array.from({ length: chunks }, (_, i) => first + i),
    );
    return done.every(Boolean);
  }

  private async badRow(object: string, bad: BadLine): Promise<void> {
    this.badRows++;
    const seen = this.samples.some((s) => s.object === object && s.line === bad.line);
    if (!seen && this.samples.length < MAX_BAD_ROW_SAMPLES) this.samples.push({ object, line: bad.line, message: bad.message });
    const max = this.spec.maxBadRows;
    if (max !== undefined && this.badRows > max) {
      const where = `${formatS3Url(this.spec.input, object)} line ${bad.line}: ${bad.message}`;
      await this.fail('too_many_bad_rows', `${this.badRows} bad rows, more than maxBadRows ${max} (the last at ${where})`);
    }
  }

  /** Counts a chunk already done, adopts its pending job, or enqueues it; waits for room first. */
  private async submit(chunk: Chunk): Promise<void> {
    const { spec } = this;
    const queue = this.queue as ChunkQueue;
    if ((await this.store.partsDone(this.ref, [chunk.index]))[0]) return;
    while (this.outstanding.size >= this.settings.windowChunks) await this.poll();
    const state = await queue.state(this.ref, chunk.index);
    if (state.kind === 'done') return this.count(chunk.index, state.part);
    if (state.kind === 'pending') return this.track(chunk.index);
    // A failed job left by an earlier drive gets a fresh set of attempts.
    if (state.kind === 'failed') await queue.remove(this.ref, chunk.index);
    const key = partKey(spec.output, chunk.index);
    const part = this.existingParts.has(key) ? await readPart(this.deps.storeFor(this.spec.output.bucket), key) : undefined;
    if (part) return this.count(chunk.index, part);
    await this.track(chunk.index);
    const data = chunkJobData(this.ref, spec, this.manifest as ModelManifest, chunk, this.deps.clock.now());
    await queue.add(data, BULK_PRIORITIES[this.reporter.priority]);
  }

  private async track(chunk: number): Promise<void> {
    // In the record first: a cancel finds every job that may be queued.
    await this.store.addOutstanding(this.ref, chunk);
    this.outstanding.add(chunk);
  }

  private async count(chunk: number, part: BulkPartResult): Promise<void> {
    if (await this.store.recordPart(this.ref, chunk, part)) {
      this.rowsDone += part.rows;
      this.chunksDone++;
    }
    this.outstanding.delete(chunk);
    // Counted: the job (with its rows) need not stay in Redis.
    await this.queue?.remove(this.ref, chunk);
  }

  /** Waits for a chunk to finish (or the poll interval), then reads every outstanding chunk's state. */
  private async poll(): Promise<void> {
    await this.sleep();
    this.signal.throwIfAborted();
    const status = await this.store.status(this.ref);
    if (status !== 'running') return this.ended(status);
    const queue = this.queue as ChunkQueue;
    const chunks = [...this.outstanding];
    const states = await Promise.all(chunks.map((c) => queue.state(this.ref, c)));
    for (const [i, state] of states.entries()) {
      const chunk = chunks[i] as number;
      if (state.kind === 'done') await this.count(chunk, state.part);
      else if (state.kind === 'failed') await this.fail('chunk_failed', `chunk ${chunk} failed after its retries: ${state.reason}`);
      else if (state.kind === 'missing') await this.recover(chunk);
    }
    await this.report(false);
  }

  /** A job that vanished without being counted (removed by hand, or aged out): its part, else run it again. */
  private async recover(chunk: number): Promise<void> {
    const part = await readPart(this.deps.storeFor(this.spec.output.bucket), partKey(this.spec.output, chunk));
    if (part) return this.count(chunk, part);
    this.outstanding.delete(chunk);
    await this.fail(
      'chunk_lost',
      `chunk ${chunk}'s job disappeared from the queue without writing its part; start the run again to redo it`,
    );
  }

  private async sleep(): Promise<void> {
    const timer = new AbortController();
    const onAbort = () => timer.abort();
    this.signal.addEventListener('abort', onAbort, { once: true });
    try {
      await Promise.race([this.deps.clock.sleep(this.settings.pollMs, timer.signal).catch(() => undefined), this.wakeup.next()]);
    } finally {
      this.wakeup.cancel();
      timer.abort();
      this.signal.removeEventListener('abort', onAbort);
    }
  }

  private counters(): RunCounters {
    return {
      rowsDone: this.rowsDone,
      chunksDone: this.chunksDone,
      rowsSeen: this.rowsSeen,
      bytesSeen: this.bytesSeen,
      bytesTotal: this.listing.reduce((sum, o) => sum + o.sizeBytes, 0),
      badRows: this.badRows,
      ...(this.chunksTotal !== undefined ? { chunksTotal: this.chunksTotal } : {}),
      samples: this.samples,
    };
  }

  private report(force: boolean): Promise<void> {
    // Raised to urgent: the chunks already queued move up too (a worker's held ones keep their place).
    const raise = async () => {
      for (const chunk of this.outstanding) await this.queue?.changePriority(this.ref, chunk, BULK_PRIORITIES.urgent);
    };
    return this.reporter.report(this.counters(), force, raise);
  }

  private async succeed(): Promise<void> {
    const { deps, spec } = this;
    const parts = await this.store.parts(this.ref);
    const missing = Array.from({ length: this.chunksTotal ?? 0 }, (_, i) => i).filter((i) => !parts.has(i));
    if (missing.length > 0) return this.fail('chunk_lost', `chunks ${missing.slice(0, 10).join(', ')} have no part`);
    const now = deps.clock.now();
    await this.report(true);
    const record = await this.store.read(this.ref);
    const manifest = await writeRunManifest(deps.storeFor(spec.output.bucket), {
      spec,
      model: this.manifest as ModelManifest,
      listing: this.listing,
      parts,
      badRows: this.badRows,
      samples: this.samples,
      startedAt: record?.startedAt ?? now,
      finishedAt: now,
    });
    if (await this.store.finish(this.ref, 'succeeded', now, { manifest })) {
      await clearCapacityRequest(deps.redis, deps.prefix, spec.model, this.ref);
      deps.log.info({ runId: this.ref, rows: this.rowsDone, badRows: this.badRows, manifest }, 'bulk run succeeded');
      await this.reporter.told('bulk.succeeded');
    }
    throw new RunEnded();
  }

  private async fail(code: string, message: string): Promise<never> {
    const { deps, spec } = this;
    if (await this.store.finish(this.ref, 'failed', deps.clock.now(), { error: { code, message } })) {
      deps.log.warn({ runId: this.ref, code, message }, 'bulk run failed');
      await this.store.saveProgress(this.ref, this.reporter.progress(this.counters(), deps.clock.now()), this.samples);
      await removeQueuedChunks(deps, this.store, this.ref, spec);
      await this.reporter.told('bulk.failed');
    }
    throw new RunEnded();
  }

  /** Someone else ended the run (a cancel): take back what is still queued, then stop. */
  private async ended(status: string | null): Promise<never> {
    if (status === 'canceled') await removeQueuedChunks(this.deps, this.store, this.ref, this.spec);
    throw new RunEnded();
  }
}
