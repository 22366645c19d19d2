/**
 * Structured logs (pino), one logger per process, children per component. Modules depend on
 * `Log`, the part of pino's Logger they call, so a test passes a small fake (`silentLog`, or one
 * that records) and only the composition roots know pino.
 */
import { type Logger, pino } from 'pino';

export type { Logger };

/** pino's two call shapes: fields then an optional message, or a message alone. */
export interface LogFn {
  (obj: object, msg?: string): void;
  (msg: string): void;
}

/** The logger every module takes. pino's Logger satisfies it. */
export interface Log {
  error: LogFn;
  warn: LogFn;
  info: LogFn;
  debug: LogFn;
  /** A logger that adds `bindings` to every line (`{ component: 'bulk' }`). */
  child(bindings: Record<string, unknown>): Log;
}

export function createLogger(level: string, base: Record<string, unknown> = {}): Logger {
  return pino({ level, base: { pid: process.pid, ...base } });
}

const ignore = () => undefined;

/** Writes nothing: for tests, and embeddings that log elsewhere. */
export const silentLog: Log = { error: ignore, warn: ignore, info: ignore, debug: ignore, child: () => silentLog };
