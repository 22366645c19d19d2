/**
 * The few error classes warmpool has, each meaning a decision. One place maps them to HTTP
 * (api/http/errors.ts, hono `onError`) and one to BullMQ (worker/intake.ts: InvalidInputError →
 * UnrecoverableError, no retry). Anything else is treated as transient: retried by BullMQ, 5xx
 * at the API. Always pass `cause` when wrapping.
 */
export type ClientErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 429;

abstract class WarmpoolError extends Error {
  abstract readonly status: number;
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * The caller's request is wrong: no retry, a 4xx carrying `code` and `message`. `retryAfterS`:
 * the same request may pass then (a 429 of a budget that frees itself), sent as Retry-After.
 */
export class InvalidInputError extends WarmpoolError {
  readonly status: ClientErrorStatus;
  readonly retryAfterS: number | undefined;
  constructor(code: string, message: string, options?: { status?: ClientErrorStatus; cause?: unknown; retryAfterS?: number }) {
    super(code, message, options);
    this.status = options?.status ?? 400;
    this.retryAfterS = options?.retryAfterS;
  }
}

/** The thing named does not exist (or is not the caller's to see): 404. */
export class NotFoundError extends WarmpoolError {
  readonly status = 404;
}

/** Missing or unknown credentials: 401. */
export class UnauthorizedError extends WarmpoolError {
  readonly status = 401;
}

/** Bytes that do not match their manifest: never served, never retried against the same bytes. */
export class IntegrityError extends WarmpoolError {
  readonly status = 502;
}

/** Too much work queued already: come back after `retryAfterS` (503 + Retry-After). */
export class OverloadedError extends WarmpoolError {
  readonly status = 503;
  constructor(
    code: string,
    message: string,
    readonly retryAfterS: number,
  ) {
    super(code, message);
  }
}

/** Invalid configuration: the process refuses to start, naming the variable. */
export class ConfigError extends WarmpoolError {
  readonly status = 500;
}

export function isClientError(err: unknown): err is InvalidInputError | NotFoundError | UnauthorizedError {
  return err instanceof InvalidInputError || err instanceof NotFoundError || err instanceof UnauthorizedError;
}

/**
 * What went wrong, as text, whatever was thrown: an Error's message, or the thrown value itself
 * (a string, a number, `undefined`) written out. Throwing non-Errors is legal JavaScript, and a
 * cast (`(err as Error).message`) would log `undefined` for them.
 */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The thrown value as an Error: itself when it is one, else a new Error saying it, the value kept as `cause`. */
export function coerceError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err), { cause: err });
}
