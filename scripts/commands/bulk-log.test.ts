import { describe, expect, it } from 'vitest';
import { createBulkLog } from './bulk-log.ts';

function capture(level: string) {
  const lines: string[] = [];
  return { log: createBulkLog(level, (line) => lines.push(line)), lines };
}

describe('createBulkLog', () => {
  it('writes one human line per call: the level in words, the message, the fields; errors by their message', () => {
    const { log, lines } = capture('warn');
    log
      .child({ component: 'bulk' })
      .warn({ runId: 't/nightly', err: new Error('connect ECONNREFUSED'), tries: 3 }, 'bulk lease renewal failed');
    log.error('redis gone');
    expect(lines).toEqual([
      'warning: bulk lease renewal failed (component bulk, runId t/nightly, err connect ECONNREFUSED, tries 3)',
      'error: redis gone',
    ]);
    for (const line of lines) expect(() => JSON.parse(line)).toThrow();
  });

  it('keeps to its level: below it, and at silent, nothing', () => {
    const warn = capture('warn');
    warn.log.info({ runId: 'x' }, 'bulk run failed');
    warn.log.debug('noise');
    expect(warn.lines).toEqual([]);
    const debug = capture('debug');
    debug.log.info({ runId: 'x', code: 'too_many_bad_rows' }, 'bulk run failed');
    expect(debug.lines).toEqual(['info: bulk run failed (runId x, code too_many_bad_rows)']);
    const silent = capture('silent');
    silent.log.error('even this');
    expect(silent.lines).toEqual([]);
  });
});
