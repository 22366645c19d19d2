/**
 * The environment a shared pool's worker (`warmpool worker --pool`) should be started with, for
 * whoever launches one (the pool providers, a pod template, tests); the worker warns at start
 * when it runs without it.
 *
 * `MALLOC_MMAP_THRESHOLD_` (glibc): a pool worker loads and releases sessions for its whole life.
 * glibc raises its mmap threshold each time a large mmapped block is freed, so after the first
 * eviction a session's weights and arena land in the heap instead, where a released session's
 * memory stays in the process (fragmented, seldom trimmed). Measured on the test fixtures (10
 * models of 13 MB loaded in turn, 5 held): RSS kept growing to about twice the held set; with the
 * threshold fixed at 128 KiB, every block that large is its own mapping, returned to the system
 * when the session is released, and RSS stays at the held set. glibc reads it once, at process
 * start, so it cannot be set from inside; other C libraries ignore it.
 */
export const POOL_WORKER_ENV: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: '131072' };

/** The names of POOL_WORKER_ENV that `env` lacks or sets otherwise. */
export function missingPoolWorkerEnv(env: NodeJS.ProcessEnv): string[] {
  return Object.entries(POOL_WORKER_ENV)
    .filter(([name, value]) => env[name] !== value)
    .map(([name]) => name);
}
