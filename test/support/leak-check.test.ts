// The leak check sees what a test file leaves running, and sees it go once closed. Each test
// takes its own baseline and cleans up before it ends, so this file itself leaks nothing: the
// setup file's check (leak-check-setup.ts) runs over it like any other.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { Worker } from 'bullmq';
import { beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, hashTag } from '../../infra/redis/client.ts';
import { findLeaks, formatLeaks, settleLeaks, takeBaseline } from './leak-check.ts';
import { testServices, uniqueId } from './services.ts';

const { redisUrl } = testServices();
const redisPort = Number(/:(\d+)(?:,|\/?$)/.exec(redisUrl)?.[1]);

describe('leak check', () => {
  it('reports an ioredis client that is not closed, naming where it was created', async () => {
    const baseline = takeBaseline([redisPort]);
    const client = createRedis(redisUrl);
    await client.ping();
    const leaks = findLeaks(baseline).filter((leak) => leak.kind === 'redis-client');
    // One client; on a Redis Cluster (WARMPOOL_TEST_REDIS=cluster), the Cluster client first, then its node connections.
    expect(leaks.length).toBeGreaterThanOrEqual(1);
    expect(leaks[0]?.description).toMatch(/status (ready|connect)/);
    expect(leaks[0]?.description).toContain('leak-check.test.ts');
    await closeRedis(client);
    expect(await settleLeaks(baseline)).toEqual([]);
  });

  it('reports a child process still running, with its pid and command line', async () => {
    const baseline = takeBaseline();
    // Waits for the child's first output, not just 'spawn': 'spawn' can come before the exec has
    // given the process its command line, and /proc/<pid>/cmdline then reads empty.
    const child = spawn(process.execPath, ['-e', "process.stdout.write('up'); setTimeout(() => {}, 60_000)", 'leak-check-probe'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    await once(child.stdout, 'data');
    try {
      const leaks = findLeaks(baseline).filter((leak) => leak.kind === 'child-process');
      expect(leaks).toEqual([{ kind: 'child-process', description: expect.stringContaining(`${child.pid}`), pid: child.pid }]);
      expect(leaks[0]?.description).toContain('leak-check-probe');
    } finally {
      child.kill();
    }
    expect(await settleLeaks(baseline)).toEqual([]);
  });

  it('reports a BullMQ Worker that is not closed, and the connections it holds', async () => {
    const baseline = takeBaseline([redisPort]);
    const connection = createRedis(redisUrl);
    const worker = new Worker('leaky', null, { connection, prefix: hashTag(uniqueId('leak-check')), autorun: false });
    await worker.waitUntilReady();
    const leaks = findLeaks(baseline);
    expect(leaks.filter((leak) => leak.kind === 'bullmq').map((leak) => leak.description)).toEqual([
      expect.stringMatching(/^bullmq Worker "leaky" .* not closed/),
    ]);
    // The test's own client and the blocking connection BullMQ made from it.
    expect(leaks.filter((leak) => leak.kind === 'redis-client').length).toBeGreaterThanOrEqual(2);
    expect(formatLeaks(leaks)).toMatch(/^this test file left running what it started \(1 bullmq, \d+ redis-client\)/);
    await worker.close();
    await closeRedis(connection);
    expect(await settleLeaks(baseline)).toEqual([]);
  });

  it('reports a socket to the test Redis that no ioredis client owns', async () => {
    const baseline = takeBaseline([redisPort]);
    const socket = connect(redisPort, '127.0.0.1');
    await once(socket, 'connect');
    expect(findLeaks(baseline)).toEqual([{ kind: 'redis-socket', description: expect.stringContaining(`port ${redisPort}`) }]);
    socket.destroy();
    expect(await settleLeaks(baseline)).toEqual([]);
  });
});

describe('the setup file checks after every cleanup of the file', () => {
  // Closed only by the cleanup this beforeAll returns, which vitest runs after every afterAll:
  // were the file's check to run before it, this file would fail.
  let client: ReturnType<typeof createRedis> | undefined;
  beforeAll(() => {
    client = createRedis(redisUrl);
    return () => closeRedis(client as ReturnType<typeof createRedis>);
  });

  it('leaves a client open until the end of the file', async () => {
    expect(await client?.ping()).toBe('PONG');
  });
});
