/**
 * What the short chaos suites share (test/chaos.test.ts on one Redis, test/chaos-cluster.test.ts
 * on a local 3-master cluster): a scenario's folder, removed after each test, and the check that
 * its report names no violation. Two files, so vitest runs the two topologies side by side.
 */
import { appendFileSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, expect } from 'vitest';
import { type ChaosContext, formatReport, type ScenarioReport } from '../../scripts/chaos/report.ts';
import type { RedisTopology } from '../../scripts/chaos/stack.ts';

const dirs: string[] = [];

/** A scenario's context in a folder of its own; call at module level once per file to clean up. */
export function chaosContexts(): (name: string, redis?: RedisTopology) => ChaosContext {
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return (name, redis = 'single') => {
    const dir = mkdtempSync(path.join(os.tmpdir(), `warmpool-chaos-${name}-`));
    dirs.push(dir);
    return { dir, log: () => undefined, redis };
  };
}

/**
 * The report's table is the failure message: it says what broke and how many. Under `npm test`
 * the violations also go to WARMPOOL_TEST_FAILURES_FILE, a line each, which scripts/test.mjs
 * prints after its summary (the end of a CI log is often all that is kept).
 */
export function expectClean(report: ScenarioReport): void {
  const file = process.env.WARMPOOL_TEST_FAILURES_FILE;
  if (file && report.violations.length > 0) {
    const figures = Object.entries(report.figures).map(([name, value]) => `${name}=${value}`);
    appendFileSync(file, `${report.name}: ${report.violations.join('; ')} | ${figures.join(', ')}\n`);
  }
  expect(report.violations, formatReport(report)).toEqual([]);
}
