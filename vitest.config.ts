import { defineConfig } from 'vitest/config';

/** What both projects below run with. */
const common = {
  // Fails a file that leaves a Redis connection, a BullMQ worker or a child process running (STYLE.md rule 11).
  setupFiles: ['test/support/leak-check-setup.ts'],
  testTimeout: 60_000,
  hookTimeout: 120_000,
  // Child processes, not worker_threads: ONNX Runtime's native addon and our own inference
  // worker threads behave better in a process of their own.
  pool: 'forks',
  env: {
    // The AWS SDK warns once per process that it will need Node 22 from 2027: noise in tests.
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  },
} as const;

export default defineConfig({
  test: {
    // One redis-server and one S3-protocol server for the whole run (see test/global-setup.ts).
    // Here, not in the projects: a project's own globalSetup would start a second pair.
    globalSetup: ['test/global-setup.ts'],
    // CI has 2 cores; more parallel files only add contention.
    fileParallelism: true,
    maxWorkers: 2,
    projects: [
      // The integration tests: real processes, stacks and servers, each file in a fresh process.
      { test: { ...common, name: 'integration', include: ['test/**/*.test.ts'] } },
      // The unit tests beside the code: one process runs file after file (isolate: false), so a
      // file costs its tests, not a process start and the imports again (≈ 0.6 s each, 162 files).
      // None mocks modules, fakes globals or sets the environment; the leak check still runs per file.
      {
        test: { ...common, name: 'unit', include: ['{api,worker,infra,scripts}/**/*.test.ts'], isolate: false },
      },
    ],
  },
});
