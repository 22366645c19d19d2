/**
 * What a drive tells the world about its run: progress saved in the record (at most every
 * progressIntervalMs), the caller's onProgress, `bulk.progress` webhooks (at most every
 * webhookIntervalMs) and the end events; and the deadline rule — once the ETA says the deadline
 * will be missed, the run goes `urgent` for good (its queued chunks too, through the driver's
 * `raise`) and from then on asks the scaler for the rows/s the rest needs.
 */

import type { BadRow, BulkProgress, BulkRunSpec, BulkRunView, BulkWebhookEvent } from '../contracts/bulk.ts';
import { publishCapacityRequest } from '../deployments/capacity-request.ts';
import { type BulkDeps, notifyRun } from './bulk-runs.ts';
import { computeProgress, estimateRowsTotal, RateWindow, rowsPerSecondNeeded } from './progress.ts';
import { type RunStore, viewOf } from './run-store.ts';

/** How often a drive reports (the reporter's part of run-driver.ts's DriveSettings). */
export interface ReportSettings {
  progressIntervalMs: number;
  webhookIntervalMs: number;
  onProgress?: (run: BulkRunView) => void;
}

/** The drive's counts at a moment. */
export interface RunCounters {
  rowsDone: number;
  chunksDone: number;
  /** Good rows of the counted chunks, and the input bytes those chunks cover (bad rows' bytes too). */
  rowsSeen: number;
  bytesSeen: number;
  bytesTotal: number;
  /** The plan's estimate before any chunk was counted. */
  rowsPerByte?: number;
  /** Every chunk counted: rowsSeen is the total. */
  exact: boolean;
  badRows: number;
  /** Known once every object was read. */
  chunksTotal?: number;
  samples: BadRow[];
}

export class RunReporter {
  private readonly rate = new RateWindow();
  private lastProgressAt = Number.NEGATIVE_INFINITY;
  private lastWebhookAt: number;

  constructor(
    private readonly deps: BulkDeps,
    private readonly store: RunStore,
    /** The run's ref (run-store.ts `runRef`). */
    private readonly ref: string,
    private readonly spec: BulkRunSpec,
    private readonly settings: ReportSettings,
    public priority: 'bulk' | 'urgent',
  ) {
    this.lastWebhookAt = deps.clock.now();
  }

  /** The drive starts at `now` with `rowsDone` rows already done (a resumed run): the rate's first point. */
  start(now: number, rowsDone: number): void {
    this.rate.add(now, rowsDone);
  }

  progress(c: RunCounters, now: number): BulkProgress {
    const { exact } = c;
    const estimate = { rowsSeen: c.rowsSeen, bytesSeen: c.bytesSeen, bytesTotal: c.bytesTotal, exact };
    return computeProgress({
      now,
      rowsDone: c.rowsDone,
      rowsTotal: estimateRowsTotal(c.rowsPerByte !== undefined ? { ...estimate, rowsPerByte: c.rowsPerByte } : estimate),
      rowsTotalExact: exact,
      chunksDone: c.chunksDone,
      ...(c.chunksTotal !== undefined ? { chunksTotal: c.chunksTotal } : {}),
      badRows: c.badRows,
      rowsPerSecond: this.rate.rowsPerSecond(),
      ...(this.spec.deadline !== undefined ? { deadline: this.spec.deadline } : {}),
    });
  }

  /** Saves progress (unless it was saved within the interval and not forced), acts on the deadline, tells watchers. */
  async report(c: RunCounters, force: boolean, raise: () => Promise<void>): Promise<void> {
    const now = this.deps.clock.now();
    if (!force && now - this.lastProgressAt < this.settings.progressIntervalMs) return;
    this.lastProgressAt = now;
    this.rate.add(now, c.rowsDone);
    const progress = this.progress(c, now);
    await this.store.saveProgress(this.ref, progress, c.samples);
    await this.actOnDeadline(progress, now, raise);
    const record = await this.store.read(this.ref);
    if (!record) return;
    const view = viewOf(record);
    this.settings.onProgress?.(view);
    if (now - this.lastWebhookAt >= this.settings.webhookIntervalMs && record.status === 'running') {
      this.lastWebhookAt = now;
      await notifyRun(this.deps, 'bulk.progress', view);
    }
  }

  /** The run ended: the last view to the caller, and its end event to the webhook. */
  async told(event: BulkWebhookEvent): Promise<void> {
    const record = await this.store.read(this.ref);
    if (!record) return;
    const view = viewOf(record);
    this.settings.onProgress?.(view);
    await notifyRun(this.deps, event, view);
  }

  private async actOnDeadline(progress: BulkProgress, now: number, raise: () => Promise<void>): Promise<void> {
    const { deps, spec } = this;
    if (spec.deadline === undefined) return;
    if (this.priority === 'bulk' && progress.onTrack === false) {
      this.priority = 'urgent';
      await this.store.setPriority(this.ref, 'urgent');
      await raise();
      deps.log.info({ runId: this.ref, etaAt: progress.etaAt, deadline: spec.deadline }, 'bulk run is late: raised to urgent');
    }
    if (this.priority !== 'urgent') return;
    const needed = rowsPerSecondNeeded(progress, now, spec.deadline);
    const entry = { runId: this.ref, version: spec.version, rowsPerSecondNeeded: needed, deadline: spec.deadline };
    await publishCapacityRequest(deps.redis, deps.prefix, spec.model, entry, now);
  }
}
