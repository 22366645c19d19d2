import { defineConfig } from 'vitest/config';

/** Pure logic, beside the code it tests (STYLE.md): run without a fresh module graph per file. */
const UNIT = ['{api,worker,infra,scripts}/**/*.test.ts'];
/**
 * Integration files that replace a module (vi.mock): a module graph shared with the files before
 * them would hold the real module already, so they run in a fresh one.
 */
const OWN_MODULE_GRAPH = ['test/openapi-served-once.test.ts'];

export default defineConfig({
  test: {
    // One redis-server and one S3-protocol server for the whole run (see test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    // Fails a file that leaves a Redis connection, a BullMQ worker or a child process running (STYLE.md rule 11).
    setupFiles: ['test/support/leak-check-setup.ts'],
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
