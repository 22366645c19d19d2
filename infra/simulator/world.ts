/**
 * The simulated world (issue 5 §2): a queue, workers, and a scaler ticking over them, replayed
 * event by event (a heap of events — minute starts, ticks, workers ready, batches done — merged
 * with the sorted arrival times), so a month of per-minute history runs in seconds.
 *
 * Worker states: starting → standby | active (as launched) ; standby ⇄ active (activation takes
 * `activateMs`: a Redis control message) ; any → draining → gone. A draining worker that holds a
 * batch finishes it and leaves; one holding nothing leaves at once. A worker moved to standby
 * while busy finishes its batch and takes no more.
 *
 * Cold start: `coldStartMs`, a fixed time or the n-th launch's draw from a phase model
 * (cold-start.ts: launching, downloading, loading, warming, each a distribution).
 *
 * Serving: an idle active worker takes up to maxBatch waiting jobs, oldest first, the moment
 * any is waiting, and holds them for serviceMs(batch size) (see service.ts).
 *
 * The scaler: every tickMs it is shown an Observation and returns the live controller's actions
 * (ScalerAction). Metric staleness: the observation is the snapshot taken at the end of the
 * previous tick (after its actions), as heartbeats and queue stats lag the world; the first tick
 * sees the present. Actions naming a worker that is gone meanwhile are ignored, as an
 * idempotent provider does. Each observation carries the cold starts that ended since the one
 * before (launch to warmed), as the controller's cold-start meter sees them.
 *
 * Billing: worker-seconds by state — starting, standby, active (draining with a batch counts as
 * active). Jobs still waiting at the end are recorded with the wait they had so far.
 *
 * Jobs delayed by a cold start: a job that waited (wait > 0) while a worker launched as active
 * was starting, i.e. some such worker's [launch, ready or drained) overlaps the job's wait.
 */

import type { Backlog, WorkerCounts } from '../contracts/pool.ts';
import type { ObservedWorker, ScalerAction } from '../scaler/index.ts';
import { type ArrivalPattern, minuteArrivals } from './arrivals.ts';
import { EventQueue } from './event-queue.ts';
import { createRecorder, type PolicyRun, type Recorder } from './recorder.ts';

export const MINUTE_MS = 60_000;
export const COLD_START_PHASES = { launching: 0.2, downloading: 0.3, loading: 0.2, warming: 0.3 } as const;
export const VERSION = 'sim';

export interface Observation {
  now: number;
  backlog: Backlog;
  workers: WorkerCounts;
  /** Workers' busy time over the last tick, in worker-equivalents (busy ms / tick ms). */
  busyWorkers: number;
  /** Jobs workers took over the last tick (what a completions counter reports). */
  servedJobs: number;
  /** Jobs that arrived over the last tick (what the controller's enqueue counter reports). */
  arrivedJobs: number;
  /** Of servedJobs, those that had waited past the SLO (what the workers' late counter reports). */
  lateJobs: number;
  /** Cold starts that ended since the last observation, launch to warmed, in ms (what the controller's meter records). */
  coldStartsMs: number[];
  list: ObservedWorker[];
}

export interface Scaler {
  readonly name: string;
  /** Workers at the start, warm (a run does not begin by paying for a cold start). */
  initial(): { active: number; standby: number };
  tick(observation: Observation): ScalerAction[];
  /** The arrival rate (per second) the scaler planned for on its last tick, for the charts. */
  plannedRatePerSec?(): number | undefined;
}

export interface WorldOptions {
  /** Whole arrivals per minute (realiseCounts), and the epoch ms of minute 0. */
  counts: readonly number[];
  startMs: number;
  /** Replay minutes [fromMinute, toMinute); earlier ones are history only. */
  fromMinute?: number;
  toMinute?: number;
  pattern: ArrivalPattern;
  seed: number;
  /** Launch to warmed: a fixed time, or the n-th cold start's time (cold-start.ts drawColdStart). */
  coldStartMs: number | ((n: number) => number);
  activateMs: number;
  maxBatch: number;
  serviceMs: (batch: number) => number;
  tickMs: number;
  sloMs: number;
  staleMetrics?: boolean;
  /**
   * Exact arrival times (epoch ms, sorted) instead of placing `counts` within each minute, e.g.
   * the submit times a real run recorded (calibration); `counts` must count them per minute.
   */
  arrivalTimes?: Float64Array;
  /** Called for every job as a worker takes it: when it arrived, started, and will be done. */
  onJob?: (arrivedMs: number, startedMs: number, doneMs: number) => void;
}

type State = 'starting' | 'standby' | 'active' | 'draining' | 'gone';

interface Worker {
  id: number;
  state: State;
  startAs: 'active' | 'standby';
  launchedAt: number;
  /** Billing: state billed since `since`. */
  billed: 'starting' | 'standby' | 'active' | undefined;
  since: number;
  busy: boolean;
  held: number;
  /** An activated worker serves from this time. */
  availableAt: number;
}

type Event = { kind: 'minute'; minute: number } | { kind: 'tick' } | { kind: 'ready' | 'done' | 'available'; worker: Worker };

export function simulate(scaler: Scaler, o: WorldOptions): PolicyRun {
  return new World(scaler, o).run();
}

class World {
  private readonly events = new EventQueue<Event>();
  private readonly workers: Worker[] = [];
  private nextId = 0;
  private queue = new Float64Array(1024);
  private head = 0;
  private tail = 0;
  private pending: Float64Array = new Float64Array(0);
  private pendingPos = 0;
  private now: number;
  private readonly endMs: number;
  private readonly from: number;
  private readonly to: number;
  private readonly rec: Recorder;
  private startingActive = 0;
  private coldStarts = 0;
  private lastStartingActiveEnd = Number.NEGATIVE_INFINITY;
  private busyMs = 0;
  private servedJobs = 0;
  private arrivedJobs = 0;
  private lateJobs = 0;
  private coldStartsMs: number[] = [];
  private snapshot: Observation | undefined;

  constructor(
    private readonly scaler: Scaler,
    private readonly o: WorldOptions,
  ) {
    this.from = o.fromMinute ?? 0;
    this.to = o.toMinute ?? o.counts.length;
    this.now = o.startMs + this.from * MINUTE_MS;
    this.endMs = o.startMs + this.to * MINUTE_MS;
    this.rec = createRecorder(scaler.name, o.sloMs, this.to - this.from);
  }

  run(): PolicyRun {
    const init = this.scaler.initial();
    for (let i = 0; i < init.active; i++) this.addWorker('active', 'active');
    for (let i = 0; i < init.standby; i++) this.addWorker('standby', 'standby');
    this.events.push(this.now, { kind: 'minute', minute: this.from });
    this.events.push(this.now, { kind: 'tick' });
    for (;;) {
      const nextArrival = this.pendingPos < this.pending.length ? (this.pending[this.pendingPos] as number) : Infinity;
      const nextEvent = this.events.peekTime();
      const at = Math.min(nextArrival, nextEvent);
      if (at >= this.endMs) break;
      this.now = at;
      if (nextArrival < nextEvent) this.arrive();
      else this.handle((this.events.pop() as { value: Event }).value);
    }
    this.now = this.endMs;
    this.finish();
    return this.rec.result();
  }

  private handle(e: Event): void {
    if (e.kind === 'minute') this.minute(e.minute);
    else if (e.kind === 'tick') this.tick();
    else if (e.kind === 'ready') this.ready(e.worker);
    else if (e.kind === 'available') this.dispatch();
    else this.done(e.worker);
  }

  private minute(m: number): void {
    if (m > this.from) this.sampleMinute(m - 1 - this.from);
    const count = this.o.counts[m] ?? 0;
    this.pending = this.minuteArrivals(m, count);
    this.pendingPos = 0;
    this.rec.arrivals(m - this.from, count);
    if (m + 1 < this.to) this.events.push(this.o.startMs + (m + 1) * MINUTE_MS, { kind: 'minute', minute: m + 1 });
  }

  private minuteArrivals(m: number, count: number): Float64Array {
    const startMs = this.o.startMs + m * MINUTE_MS;
    const given = this.o.arrivalTimes;
    if (!given) return minuteArrivals(count, startMs, m, this.o.pattern, this.o.seed);
    let lo = 0;
    let hi = given.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((given[mid] as number) < startMs) lo = mid + 1;
      else hi = mid;
    }
    let end = lo;
    while (end < given.length && (given[end] as number) < startMs + MINUTE_MS) end++;
    return given.subarray(lo, end);
  }

  private sampleMinute(i: number): void {
    this.rec.minuteEnd(i, this.counts(), this.scaler.plannedRatePerSec?.());
  }

  private arrive(): void {
    if (this.tail === this.queue.length) this.grow();
    this.queue[this.tail++] = this.pending[this.pendingPos++] as number;
    this.arrivedJobs++;
    this.dispatch();
  }

  private grow(): void {
    const live = this.queue.subarray(this.head, this.tail);
    const next = new Float64Array(Math.max(1024, live.length * 2));
    next.set(live);
    this.queue = next;
    this.tail -= this.head;
    this.head = 0;
  }

  /** Idle active workers take batches while jobs wait. */
  private dispatch(): void {
    if (this.head === this.tail) return;
    for (const w of this.workers) {
      if (this.head === this.tail) return;
      if (w.state === 'active' && !w.busy && w.availableAt <= this.now) this.startBatch(w);
    }
  }

  private startBatch(w: Worker): void {
    const n = Math.min(this.o.maxBatch, this.tail - this.head);
    const ms = this.o.serviceMs(n);
    for (let i = 0; i < n; i++) {
      const arrived = this.queue[this.head++] as number;
      const wait = this.now - arrived;
      if (wait > this.o.sloMs) this.lateJobs++;
      const delayed = wait > 0 && (this.startingActive > 0 || this.lastStartingActiveEnd > arrived);
      this.rec.job(wait, delayed);
      this.o.onJob?.(arrived, this.now, this.now + ms);
    }
    w.busy = true;
    w.held = n;
    this.busyMs += ms;
    this.servedJobs += n;
    this.events.push(this.now + ms, { kind: 'done', worker: w });
  }

  private done(w: Worker): void {
    w.busy = false;
    w.held = 0;
    if (w.state === 'draining') this.setState(w, 'gone');
    else if (w.state === 'active') this.dispatch();
  }

  private ready(w: Worker): void {
    if (w.state !== 'starting') return;
    this.coldStartsMs.push(this.now - w.launchedAt);
    this.leaveStarting(w);
    this.setState(w, w.startAs);
    if (w.startAs === 'active') this.dispatch();
  }

  private leaveStarting(w: Worker): void {
    if (w.startAs !== 'active') return;
    this.startingActive--;
    this.lastStartingActiveEnd = this.now;
  }

  private tick(): void {
    // The scaler's clock is now; only what it measures lags.
    const seen = this.o.staleMetrics === false || !this.snapshot ? this.observe() : { ...this.snapshot, now: this.now };
    const actions = this.scaler.tick(seen);
    if (actions.length > 0) this.rec.scaleEvent();
    for (const a of actions) this.apply(a);
    this.snapshot = this.observe();
    this.busyMs = 0;
    this.servedJobs = 0;
    this.arrivedJobs = 0;
    this.lateJobs = 0;
    this.events.push(this.now + this.o.tickMs, { kind: 'tick' });
  }

  private apply(a: ScalerAction): void {
    if (a.action === 'launch') {
      for (let i = 0; i < a.count; i++) this.addWorker('starting', a.startAs);
      return;
    }
    const w = this.workers.find((x) => String(x.id) === a.workerId);
    if (!w || w.state === 'gone' || w.state === 'draining') return;
    if (a.action === 'activate' && w.state === 'standby') {
      this.setState(w, 'active');
      w.availableAt = this.now + this.o.activateMs;
      this.events.push(w.availableAt, { kind: 'available', worker: w });
    } else if (a.action === 'standby' && w.state === 'active') this.setState(w, 'standby');
    else if (a.action === 'drain') this.drain(w);
  }

  private drain(w: Worker): void {
    if (w.state === 'starting') this.leaveStarting(w);
    this.setState(w, w.busy ? 'draining' : 'gone');
  }

  private addWorker(state: 'starting' | 'active' | 'standby', startAs: 'active' | 'standby'): void {
    const w: Worker = {
      id: this.nextId++,
      state,
      startAs,
      launchedAt: this.now,
      billed: undefined,
      since: this.now,
      busy: false,
      held: 0,
      availableAt: this.now,
    };
    this.workers.push(w);
    this.setState(w, state);
    if (state !== 'starting') return;
    this.rec.coldStart();
    if (startAs === 'active') this.startingActive++;
    const cold = this.o.coldStartMs;
    this.events.push(this.now + (typeof cold === 'number' ? cold : cold(this.coldStarts++)), { kind: 'ready', worker: w });
  }

  /** Moves a worker and settles its bill for the state it leaves. */
  private setState(w: Worker, state: State): void {
    if (w.billed) this.rec.bill(w.billed, this.now - w.since);
    w.state = state;
    w.since = this.now;
    w.billed = state === 'draining' ? 'active' : state === 'gone' ? undefined : state;
    if (state === 'gone') this.workers.splice(this.workers.indexOf(w), 1);
  }

  private counts(): WorkerCounts {
    const c: WorkerCounts = { starting: 0, standby: 0, active: 0, draining: 0 };
    for (const w of this.workers) if (w.state !== 'gone') c[w.state]++;
    return c;
  }

  private observe(): Observation {
    const waiting = this.tail - this.head;
    const oldest = waiting > 0 ? this.now - (this.queue[this.head] as number) : 0;
    const list: ObservedWorker[] = this.workers.map((w) => ({
      id: String(w.id),
      version: VERSION,
      state: w.state === 'starting' ? 'launching' : w.state === 'gone' ? 'stopped' : w.state,
      jobsInFlight: w.held,
      startedAt: w.launchedAt,
    }));
    const inService = this.workers.reduce((n, w) => n + w.held, 0);
    const coldStartsMs = this.coldStartsMs;
    this.coldStartsMs = [];
    return {
      now: this.now,
      backlog: { waiting, prioritized: 0, delayed: 0, active: inService, oldestAgeMs: oldest },
      workers: this.counts(),
      busyWorkers: this.busyMs / this.o.tickMs,
      servedJobs: this.servedJobs,
      arrivedJobs: this.arrivedJobs,
      lateJobs: this.lateJobs,
      coldStartsMs,
      list,
    };
  }

  private finish(): void {
    for (let i = this.head; i < this.tail; i++) this.rec.job(this.now - (this.queue[i] as number), false);
    this.head = this.tail;
    this.sampleMinute(this.to - 1 - this.from);
    for (const w of [...this.workers]) this.setState(w, 'gone');
  }
}
