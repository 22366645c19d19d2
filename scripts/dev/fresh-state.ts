/**
 * `warmpool dev --fresh`: the folder's dev state removed before the stack starts, so it starts
 * as on a fresh clone. State is what the stack keeps across restarts in `.warmpool/`: Redis's
 * append-only file (deployments, jobs, webhook secrets, bulk runs, the dashboard's changes), the
 * embedded S3's objects (published models, bulk inputs and outputs), the workers' model cache and
 * dev.env. The API key (`dev-key`) is kept, so curls pasted earlier keep working. What the stack
 * does not own is never touched: a Redis given by REDIS_URL, an S3 given by S3_ENDPOINT, a
 * MODEL_CACHE_DIR set by hand.
 *
 * Called with the folder's lock held and nothing started yet (scripts/dev/main.ts).
 */
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';

/** Removes the state `env` leaves to the stack; returns one line saying what it did. */
export function clearDevState(dir: string, env: NodeJS.ProcessEnv): string {
  const owned: Array<[string, boolean]> = [
    ['redis', !env.REDIS_URL],
    ['s3', !env.S3_ENDPOINT],
    ['model-cache', !env.MODEL_CACHE_DIR],
    ['dev.env', true],
  ];
  const removed: string[] = [];
  for (const [name, ours] of owned) {
    const target = path.join(dir, name);
    if (!ours || !existsSync(target)) continue;
    rmSync(target, { recursive: true, force: true });
    removed.push(target);
  }
  const kept = [env.REDIS_URL ? 'REDIS_URL' : '', env.S3_ENDPOINT ? 'S3_ENDPOINT' : '', env.MODEL_CACHE_DIR ? 'MODEL_CACHE_DIR' : '']
    .filter(Boolean)
    .map((name) => `${name} is set: not cleared`);
  const what = removed.length > 0 ? `removed ${removed.join(', ')}` : 'no state to remove';
  return [`--fresh: ${what} (the API key in ${path.join(dir, 'dev-key')} is kept)`, ...kept].join('; ');
}
