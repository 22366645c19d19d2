/**
 * The behaviour every PoolProvider must show (infra/contracts/pool.ts), as one shared vitest
 * suite run against each provider (local processes, Kubernetes and AWS fakes), so the fakes stay
 * honest (STYLE §11, hono's `router/common.case.test.ts`).
 *
 * Provider-agnostic and time-tolerant: it only calls the PoolProvider methods and polls `list`
 * with generous deadlines, never asserting how long anything took. Each test gets a fresh
 * fixture from `makeProvider` and calls `cleanup` after it (cleanup must stop whatever the
 * provider started; the suite closes the provider first).
 */
import { afterEach, expect, it } from 'vitest';
import type { PoolProvider, PoolTarget, PoolWorker } from '../../infra/contracts/pool.ts';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';

export interface PoolProviderFixture {
  provider: PoolProvider;
  target: PoolTarget;
  cleanup(): Promise<void>;
}

export interface PoolProviderBehaviourOptions {
  /** Deadline for any one eventual condition (a worker warming up, a drain finishing). */
  waitMs?: number;
  /** How often `list` is polled while waiting. */
  pollMs?: number;
}

/** States a worker may show while a drain is in progress: anything but a failure. */
const ORDERLY: readonly WorkerState[] = ['launching', 'downloading', 'loading', 'warming', 'standby', 'active', 'draining', 'stopped'];

export function poolProviderBehaviour(
  name: string,
  makeProvider: () => Promise<PoolProviderFixture>,
  options: PoolProviderBehaviourOptions = {},
): void {
  const waitMs = options.waitMs ?? 60_000;
  const pollMs = options.pollMs ?? 100;
  // vitest's own limit must outlast a few eventual conditions in a row.
  const testTimeoutMs = waitMs * 4;
  let fixture: PoolProviderFixture | undefined;

  afterEach(async () => {
    const current = fixture;
    fixture = undefined;
    if (!current) return;
    try {
      await current.provider.close();
    } finally {
      await current.cleanup();
    }
  }, testTimeoutMs);

  async function setup(): Promise<PoolProviderFixture> {
    fixture = await makeProvider();
    return fixture;
  }

  /** Polls `list` until `check` holds; `observe` sees every listing (for invariants). */
  async function eventually(
    f: PoolProviderFixture,
    what: string,
    check: (workers: PoolWorker[]) => boolean,
    observe?: (workers: PoolWorker[]) => void,
  ): Promise<PoolWorker[]> {
    const deadline = Date.now() + waitMs;
    let last: PoolWorker[] = [];
    for (;;) {
      last = await f.provider.list(f.target);
      observe?.(last);
      if (check(last)) return last;
      if (Date.now() > deadline) {
        throw new Error(`${name}: ${what} not reached within ${waitMs} ms; last list: ${JSON.stringify(last)}`);
      }
      await new Promise((r) => setTimeout(r, pollMs));
    }
  }

  function inState(workers: PoolWorker[], state: WorkerState): PoolWorker[] {
    return workers.filter((w) => w.state === state);
  }

  it(
    `${name}: launch n → list shows n workers that reach the requested state`,
    async () => {
      const f = await setup();
      expect(await f.provider.list(f.target)).toEqual([]);
      await f.provider.launch(f.target, 2, { startAs: 'active' });
      await f.provider.launch(f.target, 1, { startAs: 'standby' });
      const workers = await eventually(
        f,
        '2 active + 1 standby',
        (ws) => inState(ws, 'active').length === 2 && inState(ws, 'standby').length === 1,
      );
      expect(workers).toHaveLength(3);
      expect(new Set(workers.map((w) => w.id)).size).toBe(3);
      for (const w of workers) expect(w.handle).not.toBe('');
      // launch of zero workers changes nothing.
      await f.provider.launch(f.target, 0, { startAs: 'active' });
      expect(await f.provider.list(f.target)).toHaveLength(3);
    },
    testTimeoutMs,
  );

  it(
    `${name}: setState moves a warmed worker standby → active → standby, idempotently`,
    async () => {
      const f = await setup();
      await f.provider.launch(f.target, 1, { startAs: 'standby' });
      const [worker] = await eventually(f, 'a standby worker', (ws) => inState(ws, 'standby').length === 1);
      const id = worker!.id;
      const only = (state: WorkerState) => (ws: PoolWorker[]) => ws.length === 1 && ws[0]!.id === id && ws[0]!.state === state;

      await f.provider.setState(f.target, id, 'active');
      await f.provider.setState(f.target, id, 'active');
      await eventually(f, `${id} active`, only('active'));

      await f.provider.setState(f.target, id, 'standby');
      await f.provider.setState(f.target, id, 'standby');
      await eventually(f, `${id} back in standby`, only('standby'));
    },
    testTimeoutMs,
  );

  it(
    `${name}: drain removes one worker from list in an orderly way and leaves the others`,
    async () => {
      const f = await setup();
      await f.provider.launch(f.target, 2, { startAs: 'active' });
      const warmed = await eventually(f, '2 active workers', (ws) => inState(ws, 'active').length === 2);
      const [victim, keeper] = warmed as [PoolWorker, PoolWorker];

      await f.provider.drain(f.target, victim.id);
      await f.provider.drain(f.target, victim.id); // idempotent while draining
      await eventually(
        f,
        `${victim.id} gone after drain`,
        (ws) => !ws.some((w) => w.id === victim.id),
        (ws) => {
          // Never abruptly lost: while it is listed it is draining (or not yet told), never failed.
          const seen = ws.find((w) => w.id === victim.id);
          if (seen) expect(ORDERLY).toContain(seen.state);
          // The other worker is untouched.
          expect(ws.find((w) => w.id === keeper.id)?.state).toBe('active');
        },
      );
      await f.provider.drain(f.target, victim.id); // idempotent once gone
      const after = await f.provider.list(f.target);
      expect(after.map((w) => w.id)).toEqual([keeper.id]);
    },
    testTimeoutMs,
  );

  it(
    `${name}: close is idempotent`,
    async () => {
      const f = await setup();
      await f.provider.launch(f.target, 1, { startAs: 'standby' });
      await eventually(f, 'one worker listed', (ws) => ws.length === 1);
      await f.provider.close();
      await f.provider.close();
    },
    testTimeoutMs,
  );
}
