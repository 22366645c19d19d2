import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // One redis-server and one S3-protocol server for the whole run (see test/global-setup.ts).
    globalSetup: ['test/global-setup.ts'],
    // Fails a file that leaves a Redis connection, a BullMQ worker or a child process running (STYLE.md rule 11).
    setupFiles: ['test/support/leak-check-setup.ts'],
    include: ['test/**/*.test.ts', '{api,worker,infra,scripts}/**/*.test.ts'],
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
  },
});
