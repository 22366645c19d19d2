import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Pure logic, beside the code it tests (STYLE.md): run without a fresh module graph per file. */
const UNIT = ['{api,worker,infra,scripts}/**/*.test.ts'];
/**
 * Integration files that replace a module (vi.mock): a module graph shared with the files before
 * them would hold the real module already, so they run in a fresh one.
 */
const OWN_MODULE_GRAPH = ['test/openapi-served-once.test.ts'];

/**
 * Files that run for minutes from a few lines (each drives scenarios, stacks or worker processes
 * in children), started first. vitest runs the files its timing cache knows to be slow first,
 * but a clean checkout (CI) has no cache and it runs larger files first: the chaos file, 69
 * lines and three minutes, then started last and ran alone for its last minutes, the run's tail.
 * A name here that is no longer slow costs nothing but its place in the order.
 */
const LONG_FIRST = [
  'test/chaos.test.ts',
  'test/pool-scaler-kill.test.ts',
  'test/scaler-e2e.test.ts',
  'test/worker-lifecycle.test.ts',
  'test/worker-entry-crash.test.ts',
  'test/chaos-cluster.test.ts',
];

/** vitest's order (its cache's slowest first, else larger files first), LONG_FIRST before the rest. */
class LongFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (f: TestSpecification) => {
      const i = LONG_FIRST.findIndex((name) => f.moduleId.endsWith(`/${name}`));
      return i < 0 ? LONG_FIRST.length : i;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    // One redis-server and one S3-protocol server for the whole run (see test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    // Fails a file that leaves a Redis connection, a BullMQ worker or a child process running (STYLE.md rule 11).
    setupFiles: ['test/support/leak-check-setup.ts'],
    sequence: { sequencer: LongFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Child processes, not worker_threads: ONNX Runtime's native addon and our own inference
    // worker threads behave better in a process of their own.
    pool: 'forks',
    // CI has 2 cores, yet three files at once: a file spends much of its time waiting (on child
    // processes booting, lock expiries, polls, sleeps), and a third file fills that time. Measured
    // on 2 cores, the whole suite: 764 s with two, 598 s with three (1.66 → 1.75 cores busy).
    fileParallelism: true,
    maxWorkers: 3,
    env: {
      // The AWS SDK warns once per process that it will need Node 22 from 2027: noise in tests.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    },
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: UNIT,
          // The tests beside the code hold no module-level state between files, so one module
          // graph per process serves them all: a fresh one per file (a new process, bullmq and
          // ioredis loaded again for the leak check) was half of their wall time (155 → 73 s
          // for the 166 files on 2 cores). The leak check still runs per file: setupFiles are
          // executed again before each file, and only imported modules are cached.
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          // Servers, processes and clients are each file's own, started and closed by it (the
          // leak check above fails a file that leaves one), and one file runs at a time in a
          // process. The modules it imports are shared with the files the process ran before,
          // as the unit project's are: a fresh graph per file cost 180 s of import and 81 s of
          // setup per run on 2 cores (50 s and 6 s shared), a fifth of the suite's CPU.
          include: ['test/**/*.test.ts'],
          exclude: OWN_MODULE_GRAPH,
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration-isolated',
          include: OWN_MODULE_GRAPH,
        },
      },
    ],
  },
});
