/**
 * The environment a shared pool's worker (`warmpool worker --pool`) should be started with, for
 * whoever launches one (the pool providers, a pod template, tests): `poolWorkerEnv(env)`. The
 * worker warns at start when it runs without it. Both are about memory a released model leaves:
 *
 * - `MALLOC_MMAP_THRESHOLD_=131072` (glibc). glibc raises its mmap threshold each time a large
 *   mmapped block is freed, so after the first eviction a session's weights and arena land in the
 *   heap instead, where a released session's memory stays in the process (fragmented, seldom
 *   trimmed). Measured on the test fixtures (10 models of 13 MB loaded in turn, 5 held): RSS kept
 *   growing to about twice the held set; with the threshold fixed, every block of 128 KiB or more
 *   is its own mapping, returned to the system when the session is released, and RSS stays at the
 *   held set. glibc reads it once, at process start; other C libraries ignore it.
 * - `--expose-gc` in NODE_OPTIONS: the worker collects garbage around each load and after each
 *   eviction, so a load's RSS delta counts live memory, not the garbage of the one before it (a
 *   cache hit re-hashes the whole file: its buffers wait for a GC), and an evicted model's serving
 *   parts are gone when the next load measures. Only then: loads and evictions are rare.
 */
export const MMAP_THRESHOLD = { name: 'MALLOC_MMAP_THRESHOLD_', value: '131072' } as const;
const EXPOSE_GC = '--expose-gc';

/** `env` with what a pool worker should run with (NODE_OPTIONS kept, --expose-gc added). */
export function poolWorkerEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const nodeOptions = env.NODE_OPTIONS?.trim() ?? '';
  const withGc = nodeOptions.split(/\s+/).includes(EXPOSE_GC) ? nodeOptions : `${nodeOptions} ${EXPOSE_GC}`.trim();
  return { ...env, [MMAP_THRESHOLD.name]: MMAP_THRESHOLD.value, NODE_OPTIONS: withGc };
}

/** What this process lacks of poolWorkerEnv, as `NAME=value` words for a warning (empty: nothing). */
export function missingPoolWorkerEnv(env: NodeJS.ProcessEnv, gcExposed: boolean, platform: NodeJS.Platform): string[] {
  const missing: string[] = [];
  if (platform === 'linux' && env[MMAP_THRESHOLD.name] !== MMAP_THRESHOLD.value)
    missing.push(`${MMAP_THRESHOLD.name}=${MMAP_THRESHOLD.value}`);
  if (!gcExposed) missing.push(`NODE_OPTIONS=${EXPOSE_GC}`);
  return missing;
}
