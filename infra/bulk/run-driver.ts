/**
 * One drive of one run, while its driver holds the lease (driver.ts). The driver lists, plans and
 * counts; it never reads a row (issue 18): workers read their own chunks from S3.
 *
 *   pin the input listing (first drive) or check it is unchanged (a resume) → plan each object
 *   in key order (chunk-plan.ts: byte ranges of text, row ranges of Parquet; chunk numbers count
 *   on across objects) → for each chunk not yet counted: wait for room in the window, then count
 *   it if BullMQ or S3 already has its part, adopt its job if one is pending, or enqueue it →
 *   once every object is planned, wait for the window to empty → the bad-row budget →
 *   `_manifest.json` → succeeded.
 *
 * Ends: `failed` (input changed, too many bad rows, a chunk failed after its retries, a chunk's
 * rows the model cannot take), or `canceled` seen in the record; either removes the run's queued
 * chunks. Abort (the signal: the CLI interrupted, the lease lost) just stops: queued chunks stay
 * and the next drive counts them.
 *
 * Idempotent under any crash: a chunk is counted once (run-store.ts), its job id is fixed
 * (`bulk:<ref>:<chunk>`), its part is one S3 put by key. Objects whose chunks are all counted
 * are skipped from their saved stats without a byte read.
 *
 * Bad rows, the samples kept of them and their budget: bad-row-samples.ts.
 *
 * Chunks are queued in a window (DriveSettings.windowChunks) and each with the priority of its
 * run's turn (infra/queue fair-share.ts, weighed by the tenant's active runs, active-runs.ts),
 * so a tenant's many runs take one tenant's share of the model's bulk capacity, not all of it.
 */
import { type BulkChunkSource, type BulkPartResult, DEFAULT_ID_COLUMN, partKey } from '../contracts/bulk.ts';
import { BULK_PRIORITIES } from '../contracts/job.ts';
import type { ModelManifest } from '../contracts/manifest.ts';
import { clearCapacityRequest } from '../deployments/capacity-request.ts';
import { errorMessage, InvalidInputError } from '../kernel/errors.ts';
import { Wakeup } from '../kernel/wakeup.ts';
import { type ChunkQueue, createChunkQueue } from '../queue/index.ts';
import { formatOf } from '../tabular/index.ts';
import { type ActiveRuns, createActiveRuns } from './active-runs.ts';
import { BadRowSamples, type ChunkSpan } from './bad-row-samples.ts';
import { type BulkDeps, chunkJobOptions, removeQueuedChunks } from './bulk-runs.ts';
import { maxChunkBytesFor, planObject } from './chunk-plan.ts';
import { chunkJobData } from './chunker.ts';
import { describeListingChange, listInput, readPart } from './listing.ts';
import { writeRunManifest } from './run-manifest.ts';
import { type ReportSettings, type RunCounters, RunReporter } from './run-reporter.ts';
import type { ObjectStats, PinnedObject, RunRecord, RunStore } from './run-store.ts';
import { formatS3Url } from './s3-url.ts';

/** How a drive paces itself (driver.ts fills in the defaults). */
export interface DriveSettings extends ReportSettings {
  /** Chunks enqueued and not yet counted, at most: what the run holds in Redis. */
  windowChunks: number;
  /** Longest wait between looks at the outstanding chunks (a finished chunk wakes the driver sooner). */
  pollMs: number;
}

/** Unwinds the drive once the run reached an end (written by whoever ended it). */
class RunEnded extends Error {}

/** A chunk in flight: what the driver needs to count it (its object, its span of the object's bytes). */
interface Tracked extends ChunkSpan {
  /** Input bytes this chunk stands for (Parquet: its share of the file). */
  bytes: number;
}

export class RunDriver {
  private readonly spec: RunRecord['spec'];
  /** The run's name in Redis and in its chunk job ids (run-store.ts `runRef`). */
  private readonly ref: string;
  private readonly outstanding = new Map<number, Tracked>();
  private readonly wakeup = new Wakeup();
  private queue?: ChunkQueue;
  private manifest?: ModelManifest;
  private listing: PinnedObject[] = [];
  /** The pinned listing's bytes. */
  private bytesTotal = 0;
  private existingParts = new Set<string>();
  /** Bad-row samples in input order, with their lines in their objects (bad-row-samples.ts). */
  private readonly samples: BadRowSamples;
  /** Rows of the chunks an earlier drive counted, added to rowsSeen as the plan passes them. */
  private readonly countedBefore = new Map<number, number>();
  private readonly reporter: RunReporter;
  private rowsDone: number;
  private chunksDone: number;
  private rowsSeen = 0;
  private bytesSeen = 0;
  private badRows: number;
  private chunksTotal?: number;
  private plannedRows = 0;
  private plannedBytes = 0;
  private readonly active: ActiveRuns;
  /** The tenant's active runs: this run's weight in the queue's fair share (a tenant's runs share one turn). */
  private weight = 1;

  constructor(
    private readonly deps: BulkDeps,
    private readonly store: RunStore,
    record: RunRecord,
    private readonly settings: DriveSettings,
    private readonly signal: AbortSignal,
  ) {
    this.spec = record.spec;
    this.ref = record.ref;
    this.samples = new BadRowSamples(record.samples);
    this.active = createActiveRuns(deps.redis, deps.prefix);
    this.reporter = new RunReporter(deps, store, record.ref, record.spec, settings, record.priority);
    this.rowsDone = record.rowsDone;
    this.chunksDone = record.chunksDone;
    this.badRows = 0;
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
    this.samples.setOrder(this.listing.map((o) => o.key));
    this.bytesTotal = this.listing.reduce((sum, o) => sum + o.sizeBytes, 0);
    await this.store.markStarted(this.ref, deps.clock.now());
    // The rate counts from here, not from the first progress save (after the first chunks
    // finished), which left the run's start-up out and showed up to twice the real rate.
    this.reporter.start(deps.clock.now(), this.rowsDone);
    this.queue = createChunkQueue(deps.redis, deps.prefix, spec.model, spec.version, {
      ...chunkJobOptions(deps),
      onFinished: this.wakeup.fire,
    });
    this.weight = await this.active.count(spec.tenant);
    const written = await deps.storeFor(spec.output.bucket).list(spec.output.prefix);
    this.existingParts = new Set(written.map((o) => o.key));
    await this.loadCounted();
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

  /** A resume: the counted parts' rows, bad rows and lines (bad rows are recounted here, not trusted from the record). */
  private async loadCounted(): Promise<void> {
    const parts = await this.store.parts(this.ref);
    for (const [chunk, part] of parts) {
      this.badRows += part.badRows ?? 0;
      this.countedBefore.set(chunk, part.rows);
      if (part.lines !== undefined) this.samples.noteLines(chunk, part.lines);
    }
  }

  /** Plans one object (or skips it whole when its chunks are all counted); returns the next chunk number. */
  private async feedObject(object: PinnedObject, first: number, stats: ObjectStats | undefined): Promise<number> {
    const { spec, deps } = this;
    if (stats && stats.firstChunk === first && (await this.allCounted(first, stats.chunks))) {
      this.bytesSeen += object.sizeBytes;
      for (let c = first; c < first + stats.chunks; c++) this.rowsSeen += this.countedBefore.get(c) ?? 0;
      this.plannedBytes += object.sizeBytes;
      return first + stats.chunks;
    }
    const url = formatS3Url(spec.input, object.key);
    const format = formatOf(object.key, spec.format);
    if (!format) return this.fail('unknown_format', `cannot tell the format of ${url}`);
    const store = deps.storeFor(spec.input.bucket);
    let plan: Awaited<ReturnType<typeof planObject>>;
    try {
      plan = await planObject(store, { bucket: spec.input.bucket, ...object }, format, {
        chunkRows: spec.chunkRows,
        idColumn: spec.idColumn ?? DEFAULT_ID_COLUMN,
        maxChunkBytes: maxChunkBytesFor(this.bytesTotal),
        ...(deps.parquetFooterMaxBytes !== undefined ? { parquetFooterMaxBytes: deps.parquetFooterMaxBytes } : {}),
      });
    } catch (err) {
      if (err instanceof InvalidInputError) return this.fail(err.code, `${url}: ${err.message}`);
      if ((await store.head(object.key)) === null) return this.fail('input_changed', `${url} disappeared since the run started`);
      throw err;
    }
    this.plannedRows += plan.rows;
    this.plannedBytes += object.sizeBytes;
    await this.store.saveObjectStats(this.ref, object.key, { firstChunk: first, chunks: plan.chunks.length, bytes: object.sizeBytes });
    const text = format !== 'parquet';
    const fileRows = Math.max(1, plan.rows);
    for (const [i, source] of plan.chunks.entries()) {
      const bytes = text ? source.end - source.start : (object.sizeBytes * (source.end - source.start)) / fileRows;
      await this.submit(first + i, source, { object: object.key, bytes, firstChunk: first, endChunk: first + plan.chunks.length, text });
    }
    return first + plan.chunks.length;
  }

  private async allCounted(first: number, chunks: number): Promise<boolean> {
    const done = await this.store.partsDone(
      this.ref,
      Array.from({ length: chunks }, (_, i) => first + i),
    );
    return done.every(Boolean);
  }

  /** Counts a chunk already done, adopts its pending job, or enqueues it; waits for room first. */
  private async submit(chunk: number, source: BulkChunkSource, info: Tracked): Promise<void> {
    const { spec } = this;
    const queue = this.queue as ChunkQueue;
    if ((await this.store.partsDone(this.ref, [chunk]))[0]) {
      this.bytesSeen += info.bytes;
      this.rowsSeen += this.countedBefore.get(chunk) ?? 0;
      return;
    }
    while (this.outstanding.size >= this.settings.windowChunks) await this.poll();
    const state = await queue.state(this.ref, chunk);
    if (state.kind === 'done') return this.count(chunk, info, state.part);
    if (state.kind === 'pending') return this.track(chunk, info);
    // A failed job left by an earlier drive gets a fresh set of attempts.
    if (state.kind === 'failed') await queue.remove(this.ref, chunk);
    const key = partKey(spec.output, chunk, spec.outputFormat);
    const format = spec.outputFormat ?? 'jsonl';
    const part = this.existingParts.has(key) ? await readPart(this.deps.storeFor(spec.output.bucket), key, format) : undefined;
    if (part) return this.count(chunk, info, part);
    await this.track(chunk, info);
    const data = chunkJobData(this.ref, spec, chunk, source, this.deps.clock.now());
    // A late run's chunks go ahead of all bulk (urgent); the rest take their turn (fair-share.ts).
    const urgent = this.reporter.priority === 'urgent';
    await queue.add(data, urgent ? BULK_PRIORITIES.urgent : await queue.fairPriority(this.ref, this.weight));
  }

  private async track(chunk: number, info: Tracked): Promise<void> {
    // In the record first: a cancel finds every job that may be queued.
    await this.store.addOutstanding(this.ref, chunk);
    this.outstanding.set(chunk, info);
  }

  private async count(chunk: number, info: Tracked, part: BulkPartResult): Promise<void> {
    const { badSamples, ...kept } = part;
    // The samples go to the run's own (bounded) list, not into every part's record.
    if (await this.store.recordPart(this.ref, chunk, kept)) {
      this.rowsDone += part.rows;
      this.chunksDone++;
      this.badRows += part.badRows ?? 0;
      if (part.lines !== undefined) this.samples.noteLines(chunk, part.lines);
      this.samples.advancePrefix(info);
      for (const bad of badSamples ?? []) this.samples.consider({ chunk, info, bad });
    }
    this.rowsSeen += part.rows;
    this.bytesSeen += info.bytes;
    this.outstanding.delete(chunk);
    // Counted: the job need not stay in Redis.
    await this.queue?.remove(this.ref, chunk);
    this.samples.place(false);
    await this.checkBudget(false);
  }

  /** Fails the run when its bad rows passed the budget (bad-row-samples.ts `overBudget`). */
  private async checkBudget(final: boolean): Promise<void> {
    const { spec } = this;
    // Rows good and bad: the good ones expected (exact at the end) and the bad ones seen.
    const good = final ? this.rowsDone : this.reporter.progress(this.counters(), this.deps.clock.now()).rowsTotal;
    const counts = { good, badRows: this.badRows, rowsDone: this.rowsDone, maxBadRows: spec.maxBadRows, final };
    const failure = this.samples.overBudget(counts, (object) => formatS3Url(spec.input, object));
    if (failure !== undefined) await this.fail('too_many_bad_rows', failure);
  }

  /** Waits for a chunk to finish (or the poll interval), then reads every outstanding chunk's state. */
  private async poll(): Promise<void> {
    await this.wakeup.within(this.deps.clock, this.settings.pollMs, this.signal);
    this.signal.throwIfAborted();
    const status = await this.store.status(this.ref);
    if (status !== 'running') return this.ended(status);
    this.weight = await this.active.count(this.spec.tenant);
    const queue = this.queue as ChunkQueue;
    const chunks = [...this.outstanding.entries()];
    const states = await Promise.all(chunks.map(([c]) => queue.state(this.ref, c)));
    for (const [i, state] of states.entries()) {
      const [chunk, info] = chunks[i] as [number, Tracked];
      if (state.kind === 'done') await this.count(chunk, info, state.part);
      else if (state.kind === 'failed') await this.chunkFailed(chunk, info, state.reason);
      else if (state.kind === 'missing') await this.recover(chunk, info);
    }
    await this.report(false);
  }

  /** A chunk failed for good: the run fails, in the words the worker gave (invalid input is the caller's to fix). */
  private async chunkFailed(chunk: number, info: Tracked, reason: string): Promise<never> {
    const url = formatS3Url(this.spec.input, info.object);
    const invalid = /^(invalid_input|invalid_chunk|input_changed): /.exec(reason);
    const code = invalid?.[1] === 'input_changed' ? 'input_changed' : 'invalid_input';
    if (invalid) return this.fail(code, `${url} (chunk ${chunk}): ${reason.slice(invalid[0].length)}`);
    return this.fail('chunk_failed', `chunk ${chunk} (${url}) failed after its retries: ${reason}`);
  }

  /** A job that vanished without being counted (removed by hand, or aged out): its part, else run it again. */
  private async recover(chunk: number, info: Tracked): Promise<void> {
    const { spec } = this;
    const format = spec.outputFormat ?? 'jsonl';
    const part = await readPart(this.deps.storeFor(spec.output.bucket), partKey(spec.output, chunk, format), format);
    if (part) return this.count(chunk, info, part);
    this.outstanding.delete(chunk);
    await this.fail(
      'chunk_lost',
      `chunk ${chunk}'s job disappeared from the queue without writing its part; start a new run (another run id, an empty output prefix) to redo it`,
    );
  }

  private counters(): RunCounters {
    const exact = this.chunksTotal !== undefined && this.outstanding.size === 0;
    return {
      rowsDone: this.rowsDone,
      chunksDone: this.chunksDone,
      rowsSeen: exact ? this.rowsDone : this.rowsSeen,
      bytesSeen: this.bytesSeen,
      bytesTotal: this.bytesTotal,
      ...(this.plannedBytes > 0 && this.plannedRows > 0 ? { rowsPerByte: this.plannedRows / this.plannedBytes } : {}),
      exact,
      badRows: this.badRows,
      ...(this.chunksTotal !== undefined ? { chunksTotal: this.chunksTotal } : {}),
      samples: this.samples.list,
    };
  }

  private report(force: boolean): Promise<void> {
    // Raised to urgent: the chunks already queued move up too (a worker's held ones keep their place).
    const raise = async () => {
      for (const chunk of this.outstanding.keys()) await this.queue?.changePriority(this.ref, chunk, BULK_PRIORITIES.urgent);
    };
    return this.reporter.report(this.counters(), force, raise);
  }

  private async succeed(): Promise<void> {
    const { deps, spec } = this;
    this.samples.place(true);
    await this.checkBudget(true);
    const now = deps.clock.now();
    await this.report(true);
    const record = await this.store.read(this.ref);
    let manifest: string;
    try {
      manifest = await writeRunManifest(deps.storeFor(spec.output.bucket), {
        spec,
        model: this.manifest as ModelManifest,
        listing: this.listing,
        chunks: this.chunksTotal ?? 0,
        parts: (from, to) => this.store.partsRange(this.ref, from, to),
        rows: this.rowsDone,
        badRows: this.badRows,
        samples: this.samples.list,
        startedAt: record?.startedAt ?? now,
        finishedAt: now,
      });
    } catch (err) {
      if (!(err instanceof InvalidInputError)) throw err;
      return this.fail('chunk_lost', errorMessage(err));
    }
    await this.queue?.forgetRun(this.ref);
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
      // An outcome its owner hears of (status, `bulk.failed`, the CLI's summary), like a success: not a fault of the service.
      deps.log.info({ runId: this.ref, code, message }, 'bulk run failed');
      this.samples.place(true);
      await this.store.saveProgress(this.ref, this.reporter.progress(this.counters(), deps.clock.now()), this.samples.list);
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
