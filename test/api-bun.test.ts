/**
 * The API on Bun, a second regional runtime: `bun bin/warmpool.mjs api` (bun from npm, a dev
 * dependency) as a child process against the same Redis and S3 as the test stack, in front of a
 * worker under Node. The HTTP contract (support/http-contract.ts) runs against it: a job the
 * Bun API enqueues through BullMQ is drained by the Node worker, and its event stream is read
 * through the Bun API's QueueEvents. The API must be on Bun's own server (api/bun-listener.ts),
 * not on Bun's node:http emulation, which its 'api listening' line says.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startApiChild } from './support/api-child.ts';
import { describeHttpContract, startContractStack } from './support/http-contract.ts';
import { KEY_A } from './support/stack.ts';

const BUN = fileURLToPath(new URL('../node_modules/.bin/bun', import.meta.url));
const probe = spawnSync(BUN, ['--version'], { encoding: 'utf8' });
const unavailable = probe.status === 0 ? undefined : (probe.error?.message ?? probe.stderr.trim()) || `exit ${probe.status}`;

if (unavailable !== undefined) {
  describe.skip(`the HTTP contract on Bun: the bun binary cannot run here (${unavailable})`, () => {
    it('is not run', () => {});
  });
} else {
  describeHttpContract(`the HTTP contract on Bun ${probe.stdout.trim()}`, async () => {
    const stack = await startContractStack();
    try {
      const api = await startApiChild({ env: { ...stack.env, LOG_LEVEL: 'info' }, runtime: BUN, label: 'bun api' });
      const listening = api
        .stdout()
        .split('\n')
        .find((line) => line.includes('"api listening"'));
      expect(listening && JSON.parse(listening)).toMatchObject({ runtime: 'bun' });
      return {
        url: api.url,
        apiKey: KEY_A,
        close: async () => {
          await api.close();
          await stack.close();
        },
      };
    } catch (err) {
      await stack.close();
      throw err;
    }
  });
}
