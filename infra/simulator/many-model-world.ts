/**
 * The simulated shared pool (issue 31 §5): workers that hold sets of models within a memory
 * budget, a queue per model, and a scaler ticking over them, replayed event by event as
 * world.ts replays one model's pool.
 *
 * Worker states: starting → warm (a standby: node and the runtime up, no model) ; warm ⇄ warm
 * holding models (a load takes the model's `loadMs` of the worker: creating a session and its
 * warm-up batches run on the engine thread that serves, so a load waits for the batch in hand and
 * the worker serves nothing while it loads; the thread takes its tasks in turn, so with loads and
 * batches both waiting the engine alternates between them, and a load for a model whose jobs wait
 * goes before loads made ahead of demand, as the live worker takes an askLoad's model first) ;
 * any → draining → gone (a draining worker finishes its batch).
 *
 * Routing: a job for model m is served only by a warm worker holding m, loaded. A job for a model
 * nobody holds (none loaded, none loading) waits and triggers a single load at once, as the live
 * router does (single-flight across the fleet): onto a standby, else the warm worker holding the
 * fewest models with room, else the one whose least-recently-used idle models make room; with no
 * warm worker at all, the load waits for the next that warms. The scaler adds its own loads,
 * evictions, launches and drains each tick.
 *
 * Serving: a worker runs one batch at a time; when free it takes up to maxBatch jobs of the held,
 * loaded model whose oldest waiting job is oldest, and holds them for serviceMs(batch).
 *
 * Billing: worker-seconds by state — starting; standby (warm, holding no model); active (holding
 * or loading any, or busy). A job "delayed by a cold start" is one whose model was not loaded on
 * any worker when it arrived (the shared pool's cold start is a load). hitRatio: the share of jobs
 * whose model was loaded somewhere when they arrived.
 */

import type { ArrivalPattern } from './arrivals.ts';
import { minuteArrivals } from './arrivals.ts';
import { EventQueue } from './event-queue.ts';
import { createRecorder, type PolicyRun } from './recorder.ts';

export const MINUTE_MS = 60_000;

export interface ModelSpec {
  name: string;
  /** Load time onto a warm worker (download-if-needed + load + warm-up). */
  loadMs: number;
  /** Resident memory of one loaded session. */
  memoryMb: number;
}

export interface PoolWorld {
  models: readonly ModelSpec[];
  /** Whole arrivals per minute, per model (model-major). */
  counts: readonly (readonly number[])[];
  startMs: number;
  fromMinute: number;
  toMinute: number;
  pattern: ArrivalPattern;
  seed: number;
  /** Launch to warm standby (no model). */
  coldStartMs: number;
  maxBatch: number;
  serviceMs: (batch: number) => number;
  tickMs: number;
  sloMs: number;
  memoryMb: number;
  modelsPerWorker?: number;
}

export interface HeldView {
  model: number;
  lastUsedAt: number;
  inFlight: number;
  loading: boolean;
}

export interface WorkerView {
  id: string;
  state: 'starting' | 'warm' | 'draining';
  models: HeldView[];
  busy: boolean;
  /** Engine-busy ms (batches and loads) within the last tick. */
  busyMs: number;
}

export interface ModelQueueView {
  waiting: number;
  oldestAgeMs: number;
  inService: number;
  arrived: number;
  served: number;
  late: number;
}

export interface PoolObservation {
  now: number;
  models: ModelQueueView[];
  workers: WorkerView[];
  /** Loads that finished since the last tick: model, ms. */
  loads: Array<{ model: number; ms: number }>;
  /** Worker cold starts that ended since the last tick, ms. */
  coldStartsMs: number[];
  /** Busy worker-ms over the last tick, per model. */
  busyMs: number[];
}

export type PoolAction =
  | { action: 'launch'; count: number }
  | { action: 'drain'; workerId: string }
  | { action: 'load'; workerId: string; model: number }
  | { action: 'evict'; workerId: string; model: number };

export interface PoolScaler {
  readonly name: string;
  /** Workers at the start, warm, each with the models it holds loaded (empty: a standby). */
  initial(): number[][];
  tick(observation: PoolObservation): PoolAction[];
}

export interface PoolRun extends PolicyRun {
  modelLoads: number;
  evictions: number;
  hitRatio: number;
}

interface Held {
  lastUsedAt: number;
  inFlight: number;
  loading: boolean;
  loadStartedAt: number;
}

interface Worker {
  id: number;
  state: 'starting' | 'warm' | 'draining' | 'gone';
  launchedAt: number;
  held: Map<number, Held>;
  busy: boolean;
  /** When the task in hand (a batch or a load) began. */
  busyFrom: number;
  /** Engine-busy ms within the current tick, of tasks already ended. */
  busyAcc: number;
  /** Loads waiting for the engine (a batch or another load in hand), oldest first. */
  pendingLoads: number[];
  billed: 'starting' | 'standby' | 'active' | undefined;
  since: number;
}

type Event =
  | { kind: 'minute'; minute: number }
  | { kind: 'tick' }
  | { kind: 'ready' | 'done'; worker: Worker }
  | { kind: 'loaded'; worker: Worker; model: number };

/** A FIFO of arrival times. */
class Fifo {
  private items: number[] = [];
  private head = 0;
  get size(): number {
    return this.items.length - this.head;
  }
  peek(): number | undefined {
    return this.items[this.head];
  }
  push(t: number): void {
    this.items.push(t);
  }
  shift(): number {
    const t = this.items[this.head++] as number;
    if (this.head > 4096 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return t;
  }
  all(): number[] {
    return this.items.slice(this.head);
  }
}

export function simulatePool(scaler: PoolScaler, o: PoolWorld): PoolRun {
  return new ManyModelWorld(scaler, o).run();
}

class ManyModelWorld {
  private readonly events = new EventQueue<Event>();
  private readonly workers: Worker[] = [];
  private readonly queues: Fifo[];
  private readonly holders: Set<Worker>[];
  private readonly tickCounts: ModelQueueView[];
  private readonly busyMs: number[];
  private readonly rec;
  private nextId = 0;
  private now: number;
  private readonly endMs: number;
  private pendingTimes = new Float64Array(0);
  private pendingModels = new Int32Array(0);
  private pos = 0;
  private loadsDone: Array<{ model: number; ms: number }> = [];
  /** When the current tick's window began (the last observation). */
  private tickStart = 0;
  private coldStartsMs: number[] = [];
  private modelLoads = 0;
  private evictions = 0;
  private hits = 0;
  private jobs = 0;

  constructor(
    private readonly scaler: PoolScaler,
    private readonly o: PoolWorld,
  ) {
    const n = o.models.length;
    this.queues = Array.from({ length: n }, () => new Fifo());
    this.holders = Array.from({ length: n }, () => new Set<Worker>());
    this.tickCounts = Array.from({ length: n }, () => blankCounts());
    this.busyMs = new Array<number>(n).fill(0);
    this.now = o.startMs + o.fromMinute * MINUTE_MS;
    this.tickStart = this.now;
    this.endMs = o.startMs + o.toMinute * MINUTE_MS;
    this.rec = createRecorder(scaler.name, o.sloMs, o.toMinute - o.fromMinute);
  }

  run(): PoolRun {
    for (const models of this.scaler.initial()) {
      const w = this.addWorker('warm');
      for (const m of models) this.hold(w, m, false);
      this.rebill(w);
    }
    this.events.push(this.now, { kind: 'minute', minute: this.o.fromMinute });
    this.events.push(this.now, { kind: 'tick' });
    for (;;) {
      const nextArrival = this.pos < this.pendingTimes.length ? (this.pendingTimes[this.pos] as number) : Infinity;
      const nextEvent = this.events.peekTime();
      const at = Math.min(nextArrival, nextEvent);
      if (at >= this.endMs) break;
      this.now = at;
      if (nextArrival < nextEvent) this.arrive();
      else this.handle((this.events.pop() as { value: Event }).value);
    }
    this.now = this.endMs;
    return this.finish();
  }

  private handle(e: Event): void {
    if (e.kind === 'minute') this.minute(e.minute);
    else if (e.kind === 'tick') this.tick();
    else if (e.kind === 'ready') this.ready(e.worker);
    else if (e.kind === 'loaded') this.loaded(e.worker, e.model);
    else this.done(e.worker);
  }

  private minute(m: number): void {
    if (m > this.o.fromMinute) this.rec.minuteEnd(m - 1 - this.o.fromMinute, this.workerCounts(), undefined);
    const times: number[] = [];
    const models: number[] = [];
    let total = 0;
    const startMs = this.o.startMs + m * MINUTE_MS;
    this.o.counts.forEach((series, k) => {
      const count = series[m] ?? 0;
      if (count === 0) return;
      total += count;
      const at = minuteArrivals(count, startMs, m, this.o.pattern, modelSeed(this.o.seed, k));
      for (const t of at) {
        times.push(t);
        models.push(k);
      }
    });
    const order = times.map((_, i) => i).sort((a, b) => (times[a] as number) - (times[b] as number));
    this.pendingTimes = Float64Array.from(order, (i) => times[i] as number);
    this.pendingModels = Int32Array.from(order, (i) => models[i] as number);
    this.pos = 0;
    this.rec.arrivals(m - this.o.fromMinute, total);
    if (m + 1 < this.o.toMinute) this.events.push(this.o.startMs + (m + 1) * MINUTE_MS, { kind: 'minute', minute: m + 1 });
  }

  private arrive(): void {
    const t = this.pendingTimes[this.pos] as number;
    const m = this.pendingModels[this.pos++] as number;
    this.jobs++;
    (this.tickCounts[m] as ModelQueueView).arrived++;
    const holders = this.holders[m] as Set<Worker>;
    let loaded = false;
    for (const w of holders) if (!(w.held.get(m) as Held).loading) loaded = true;
    if (loaded) this.hits++;
    (this.queues[m] as Fifo).push(t);
    if (holders.size === 0) this.placeOnDemand(m);
    else this.dispatchModel(m);
  }

  /** The router's single-flight load for a model no worker holds. */
  private placeOnDemand(m: number): void {
    const spec = this.o.models[m] as ModelSpec;
    const warm = this.workers.filter((w) => w.state === 'warm');
    const standby = warm.find((w) => w.held.size === 0);
    const withRoom = standby ?? warm.filter((w) => this.fits(w, spec, [])).sort((a, b) => a.held.size - b.held.size)[0];
    if (withRoom) {
      this.startLoad(withRoom, m);
      return;
    }
    // Global LRU: the worker whose victims were last used longest ago gives the room.
    let best: { w: Worker; victims: number[]; newest: number } | undefined;
    for (const w of warm) {
      const victims = this.lruRoom(w, spec);
      if (!victims) continue;
      const newest = Math.max(...victims.map((v) => (w.held.get(v) as Held).lastUsedAt));
      if (!best || newest < best.newest) best = { w, victims, newest };
    }
    if (!best) return;
    for (const v of best.victims) this.evict(best.w, v);
    this.startLoad(best.w, m);
  }

  /** Idle models (nothing in flight or queued) least recently used first, as many as make room; undefined when none can. */
  private lruRoom(w: Worker, spec: ModelSpec): number[] | undefined {
    const idle = [...w.held.entries()]
      .filter(([k, h]) => !h.loading && h.inFlight === 0 && (this.queues[k] as Fifo).size === 0)
      .sort((a, b) => a[1].lastUsedAt - b[1].lastUsedAt)
      .map(([k]) => k);
    const victims: number[] = [];
    for (const k of idle) {
      if (this.fits(w, spec, victims)) return victims;
      victims.push(k);
    }
    return this.fits(w, spec, victims) ? victims : undefined;
  }

  private fits(w: Worker, spec: ModelSpec, without: number[]): boolean {
    let mb = 0;
    let n = 0;
    for (const k of w.held.keys()) {
      if (without.includes(k)) continue;
      mb += (this.o.models[k] as ModelSpec).memoryMb;
      n++;
    }
    const cap = this.o.modelsPerWorker ?? Infinity;
    return mb + spec.memoryMb <= this.o.memoryMb && n + 1 <= cap;
  }

  private startLoad(w: Worker, m: number): void {
    if (w.state !== 'warm' || w.held.has(m)) return;
    const spec = this.o.models[m] as ModelSpec;
    if (!this.fits(w, spec, [])) return;
    this.modelLoads++;
    this.hold(w, m, true);
    this.rebill(w);
    w.pendingLoads.push(m);
    if (!w.busy) this.nextLoad(w);
  }

  /** Starts a pending load on an idle engine — the oldest whose model has jobs waiting, else the oldest; false when none is pending. */
  private nextLoad(w: Worker): boolean {
    w.pendingLoads = w.pendingLoads.filter((k) => w.held.get(k)?.loading === true);
    const i = w.pendingLoads.findIndex((k) => (this.queues[k] as Fifo).size > 0);
    const [m] = w.pendingLoads.splice(Math.max(0, i), 1);
    if (m === undefined) return false;
    const h = w.held.get(m);
    if (!h) return this.nextLoad(w);
    h.loadStartedAt = this.now;
    w.busy = true;
    w.busyFrom = this.now;
    this.events.push(this.now + (this.o.models[m] as ModelSpec).loadMs, { kind: 'loaded', worker: w, model: m });
    return true;
  }

  private hold(w: Worker, m: number, loading: boolean): void {
    w.held.set(m, { lastUsedAt: this.now, inFlight: 0, loading, loadStartedAt: this.now });
    (this.holders[m] as Set<Worker>).add(w);
  }

  private loaded(w: Worker, m: number): void {
    this.idle(w);
    if (w.state === 'draining') {
      this.setState(w, 'gone');
      return;
    }
    const h = w.held.get(m);
    if (h?.loading && w.state === 'warm') {
      h.loading = false;
      h.lastUsedAt = this.now;
      this.loadsDone.push({ model: m, ms: this.now - h.loadStartedAt });
    }
    // Tasks in turn: after a load, a waiting batch; after a batch (done()), a waiting load.
    if (!this.dispatchWorker(w)) this.nextLoad(w);
  }

  /** The task in hand ended: its time within this tick is the worker's busy time. */
  private idle(w: Worker): void {
    w.busy = false;
    w.busyAcc += this.now - Math.max(w.busyFrom, this.tickStart);
  }

  private evict(w: Worker, m: number): void {
    const h = w.held.get(m);
    if (!h || h.inFlight > 0) return;
    w.held.delete(m);
    (this.holders[m] as Set<Worker>).delete(w);
    this.evictions++;
    this.rebill(w);
    // Jobs it leaves waiting with no holder need a load elsewhere.
    if ((this.holders[m] as Set<Worker>).size === 0 && (this.queues[m] as Fifo).size > 0) this.placeOnDemand(m);
  }

  private dispatchModel(m: number): void {
    for (const w of this.holders[m] as Set<Worker>) {
      if ((this.queues[m] as Fifo).size === 0) return;
      if (w.state === 'warm' && !w.busy && !(w.held.get(m) as Held).loading) this.startBatch(w, m);
    }
  }

  /** Starts the batch of the held, loaded model whose oldest waiting job is oldest; false when none waits. */
  private dispatchWorker(w: Worker): boolean {
    if (w.busy || w.state !== 'warm') return false;
    let best = -1;
    let oldest = Infinity;
    for (const [k, h] of w.held) {
      if (h.loading) continue;
      const head = (this.queues[k] as Fifo).peek();
      if (head !== undefined && head < oldest) {
        oldest = head;
        best = k;
      }
    }
    if (best < 0) return false;
    this.startBatch(w, best);
    return true;
  }

  private startBatch(w: Worker, m: number): void {
    const q = this.queues[m] as Fifo;
    const n = Math.min(this.o.maxBatch, q.size);
    const ms = this.o.serviceMs(n);
    const counts = this.tickCounts[m] as ModelQueueView;
    for (let i = 0; i < n; i++) {
      const wait = this.now - q.shift();
      if (wait > this.o.sloMs) counts.late++;
      this.rec.job(wait, false);
    }
    counts.served += n;
    const h = w.held.get(m) as Held;
    h.inFlight = n;
    h.lastUsedAt = this.now;
    w.busy = true;
    w.busyFrom = this.now;
    this.busyMs[m] = (this.busyMs[m] ?? 0) + ms;
    this.rebill(w);
    this.events.push(this.now + ms, { kind: 'done', worker: w });
  }

  private done(w: Worker): void {
    this.idle(w);
    for (const h of w.held.values()) h.inFlight = 0;
    if (w.state === 'draining') {
      this.setState(w, 'gone');
      return;
    }
    this.rebill(w);
    if (!this.nextLoad(w)) this.dispatchWorker(w);
  }

  private ready(w: Worker): void {
    if (w.state !== 'starting') return;
    this.coldStartsMs.push(this.now - w.launchedAt);
    this.setState(w, 'warm');
    // Models whose jobs wait with no holder land here first.
    for (let m = 0; m < this.queues.length; m++) {
      if ((this.queues[m] as Fifo).size > 0 && (this.holders[m] as Set<Worker>).size === 0) this.placeOnDemand(m);
    }
  }

  private tick(): void {
    const actions = this.scaler.tick(this.observe());
    this.tickStart = this.now;
    for (const w of this.workers) w.busyAcc = 0;
    if (actions.length > 0) this.rec.scaleEvent();
    for (const a of actions) this.apply(a);
    this.loadsDone = [];
    this.coldStartsMs = [];
    for (let m = 0; m < this.tickCounts.length; m++) {
      this.tickCounts[m] = blankCounts();
      this.busyMs[m] = 0;
    }
    this.events.push(this.now + this.o.tickMs, { kind: 'tick' });
  }

  private apply(a: PoolAction): void {
    if (a.action === 'launch') {
      for (let i = 0; i < a.count; i++) this.addWorker('starting');
      return;
    }
    const w = this.workers.find((x) => String(x.id) === a.workerId);
    if (!w || w.state === 'gone' || w.state === 'draining') return;
    if (a.action === 'drain') this.drain(w);
    else if (a.action === 'load') this.startLoad(w, a.model);
    else this.evict(w, a.model);
  }

  private drain(w: Worker): void {
    const models = [...w.held.keys()];
    for (const m of models) (this.holders[m] as Set<Worker>).delete(w);
    w.held.clear();
    w.pendingLoads = [];
    this.setState(w, w.busy ? 'draining' : 'gone');
    for (const m of models) if ((this.holders[m] as Set<Worker>).size === 0 && (this.queues[m] as Fifo).size > 0) this.placeOnDemand(m);
  }

  private addWorker(state: 'starting' | 'warm'): Worker {
    const w: Worker = {
      id: this.nextId++,
      state,
      launchedAt: this.now,
      held: new Map(),
      busy: false,
      busyFrom: this.now,
      busyAcc: 0,
      pendingLoads: [],
      billed: undefined,
      since: this.now,
    };
    this.workers.push(w);
    this.setState(w, state);
    if (state === 'starting') {
      this.rec.coldStart();
      this.events.push(this.now + this.o.coldStartMs, { kind: 'ready', worker: w });
    }
    return w;
  }

  private billOf(w: Worker): Worker['billed'] {
    if (w.state === 'gone') return undefined;
    if (w.state === 'starting') return 'starting';
    if (w.state === 'draining') return 'active';
    return w.held.size > 0 || w.busy ? 'active' : 'standby';
  }

  /** Settles the bill when what the worker is billed as changes. */
  private rebill(w: Worker): void {
    const next = this.billOf(w);
    if (next === w.billed) return;
    if (w.billed) this.rec.bill(w.billed, this.now - w.since);
    w.billed = next;
    w.since = this.now;
  }

  private setState(w: Worker, state: Worker['state']): void {
    w.state = state;
    this.rebill(w);
    if (state === 'gone') this.workers.splice(this.workers.indexOf(w), 1);
  }

  private workerCounts() {
    const c = { starting: 0, standby: 0, active: 0, draining: 0 };
    for (const w of this.workers) {
      const b = this.billOf(w);
      if (w.state === 'draining') c.draining++;
      else if (b === 'starting') c.starting++;
      else if (b === 'standby') c.standby++;
      else if (b === 'active') c.active++;
    }
    return c;
  }

  private observe(): PoolObservation {
    const models = this.queues.map((q, m) => {
      const head = q.peek();
      const counts = this.tickCounts[m] as ModelQueueView;
      let inService = 0;
      for (const w of this.holders[m] as Set<Worker>) inService += (w.held.get(m) as Held).inFlight;
      return { ...counts, waiting: q.size, oldestAgeMs: head === undefined ? 0 : this.now - head, inService };
    });
    const workers: WorkerView[] = this.workers.map((w) => ({
      id: String(w.id),
      state: w.state === 'starting' ? 'starting' : w.state === 'draining' ? 'draining' : 'warm',
      busy: w.busy,
      busyMs: w.busyAcc + (w.busy ? this.now - Math.max(w.busyFrom, this.tickStart) : 0),
      models: [...w.held.entries()].map(([model, h]) => ({ model, lastUsedAt: h.lastUsedAt, inFlight: h.inFlight, loading: h.loading })),
    }));
    return { now: this.now, models, workers, loads: this.loadsDone, coldStartsMs: this.coldStartsMs, busyMs: [...this.busyMs] };
  }

  private finish(): PoolRun {
    for (const q of this.queues) for (const t of q.all()) this.rec.job(this.now - t, false);
    this.rec.minuteEnd(this.o.toMinute - 1 - this.o.fromMinute, this.workerCounts(), undefined);
    for (const w of [...this.workers]) this.setState(w, 'gone');
    const run = this.rec.result();
    return {
      ...run,
      jobsDelayedByColdStart: this.jobs - this.hits,
      modelLoads: this.modelLoads,
      evictions: this.evictions,
      hitRatio: this.jobs === 0 ? 1 : this.hits / this.jobs,
    };
  }
}

function blankCounts(): ModelQueueView {
  return { waiting: 0, oldestAgeMs: 0, inService: 0, arrived: 0, served: 0, late: 0 };
}

/** Each model's arrivals from its own stream, so adding a model leaves the others' arrivals as they were. */
function modelSeed(seed: number, model: number): number {
  return (Math.imul(seed + 1, 0x9e3779b1) ^ Math.imul(model + 1, 0x85ebca6b)) >>> 0;
}
