/**
 * Worker lifecycle states (DESIGN §6, contract):
 *
 *   launching → downloading → loading → warming → standby ⇄ active → draining → stopped
 *                    └──────────┴─────────┴──→ failed (any phase before serving)
 *
 * Only `active` workers take jobs. `standby` holds a warmed session and takes none.
 *
 * A shared pool's worker (worker/pool-worker.ts) boots to `standby` holding no model (launching →
 * standby) and is `active` while it serves at least one; each model it holds has a state of its
 * own in the heartbeat's `models` (infra/fleet/worker-states.ts).
 */
export const WORKER_STATES = [
  'launching',
  'downloading',
  'loading',
  'warming',
  'standby',
  'active',
  'draining',
  'stopped',
  'failed',
] as const;
export type WorkerState = (typeof WORKER_STATES)[number];

const NEXT: Record<WorkerState, readonly WorkerState[]> = {
  launching: ['downloading', 'standby', 'draining', 'failed'],
  downloading: ['loading', 'draining', 'failed'],
  loading: ['warming', 'draining', 'failed'],
  warming: ['standby', 'active', 'draining', 'failed'],
  standby: ['active', 'draining', 'failed'],
  active: ['standby', 'draining', 'failed'],
  draining: ['stopped', 'failed'],
  stopped: [],
  failed: ['stopped'],
};

export function canTransition(from: WorkerState, to: WorkerState): boolean {
  return NEXT[from].includes(to);
}
