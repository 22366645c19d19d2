/**
 * How big the long suites run. `npm test` runs each in its short form, so the whole command
 * stays under 10 minutes on 2 cores; `npm run test:full` (WARMPOOL_TEST_FULL=1) runs the same
 * tests at the sizes they were written for: more rounds, every fault on every topology. Nothing
 * is dropped from `npm test`: a short form checks the same invariants on fewer repetitions.
 */
export const FULL_SIZE = process.env.WARMPOOL_TEST_FULL === '1';

/** `short` under `npm test`, `full` under `npm run test:full`. */
export function sized<T>(short: T, full: T): T {
  return FULL_SIZE ? full : short;
}
