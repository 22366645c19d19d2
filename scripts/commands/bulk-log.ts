/**
 * The `Log` of `warmpool bulk`: what the run's code logs (a lease lost, Redis retried, a webhook
 * not queued), as one human line each, handed to the display (bulk-display.ts `log`) so it goes
 * to stderr on a line of its own and never into the middle of the progress bar. A service's
 * logs are JSON for machines (infra/kernel/log.ts); a person at a terminal reads these.
 *
 *   warning: bulk lease lost to another driver; stopping (runId tenant-a/nightly)
 */
import { errorMessage } from '../../infra/kernel/errors.ts';
import type { Log, LogFn } from '../../infra/kernel/log.ts';

/** pino's level names, lowest first; `silent` writes nothing. */
const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
type Level = (typeof LEVELS)[number];
const WORD: Record<Level, string> = { trace: 'trace', debug: 'debug', info: 'info', warn: 'warning', error: 'error', fatal: 'error' };

export function createBulkLog(level: string, write: (line: string) => void, bindings: Record<string, unknown> = {}): Log {
  const threshold = LEVELS.indexOf(level as Level);
  const at =
    (name: Level): LogFn =>
    (objOrMsg: object | string, msg?: string) => {
      if (threshold < 0 || LEVELS.indexOf(name) < threshold) return;
      const [fields, text] = typeof objOrMsg === 'string' ? [{}, objOrMsg] : [objOrMsg, msg ?? ''];
      write(formatLogLine(WORD[name], text, { ...bindings, ...fields }));
    };
  return {
    error: at('error'),
    warn: at('warn'),
    info: at('info'),
    debug: at('debug'),
    child: (more) => createBulkLog(level, write, { ...bindings, ...more }),
  };
}

/** `warning: <message> (key value, …)`: errors by their message, other values as JSON when not text. */
export function formatLogLine(word: string, message: string, fields: Record<string, unknown>): string {
  const shown = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k} ${show(k, v)}`);
  return `${word}: ${message}${shown.length > 0 ? ` (${shown.join(', ')})` : ''}`;
}

function show(key: string, value: unknown): string {
  if (value instanceof Error || key === 'err') return errorMessage(value);
  return typeof value === 'string' ? value : JSON.stringify(value);
}
