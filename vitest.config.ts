import { defineConfig } from 'vitest/config';

/** Pure logic, beside the code it tests (STYLE.md): run without a fresh module graph per file. */
const UNIT = ['{api,worker,infra,scripts}/**/*.test.ts'];

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
    // CI has 2 cores; more parallel files only add contention.
    fileParallelism: true,
    maxWorkers: 2,
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
          // Servers, processes and clients per file: each file in a process of its own.
          include: ['test/**/*.test.ts'],
        },
      },
    ],
  },
});
