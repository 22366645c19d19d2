/**
 * The pieces config.ts builds its sections from: how a variable's text becomes a value (numbers,
 * booleans, optional strings and ports, lists), how a check across variables fails, and how a
 * secret is kept out of serialisation.
 */
import { z } from 'zod';
import { ConfigError } from './errors.ts';

export const int = (min: number, max = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
export const bool = z.enum(['true', 'false', '1', '0', 'yes', 'no']).transform((v) => v === 'true' || v === '1' || v === 'yes');
export const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));
export const optionalPort = optionalString
  .refine((v) => v === undefined || (/^\d{1,5}$/.test(v) && Number(v) <= 65535), 'a port from 0 to 65535')
  .transform((v) => (v === undefined ? undefined : Number(v)));
/** A comma-separated list, entries trimmed, empty ones dropped. */
export const list = (raw: string) =>
  raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);

/**
 * A failed check across variables. Its message names the variable and shows no value (the
 * values are the caller's, possibly secret); an unparsable value is reported before any check.
 */
export function refuse(ctx: z.RefinementCtx, message: string): never {
  ctx.addIssue({ code: 'custom', message, params: { check: true } });
  return z.NEVER;
}

/** Whether `issue` is a failed check (refuse()'s): its message is complete, with no value to show. */
export function isFailedCheck(issue: z.core.$ZodIssue): boolean {
  return issue.code === 'custom' && issue.params?.check === true;
}

/** `parse()`'s value, or its ConfigError (already `NAME: message`) as a failed check. */
export function checked<T>(ctx: z.RefinementCtx, parse: () => T): T {
  try {
    return parse();
  } catch (err) {
    if (err instanceof ConfigError) return refuse(ctx, err.message);
    throw err;
  }
}

/** `visible` with `hidden`'s defined keys added non-enumerable: readable, but absent from JSON, logs and spreads. */
export function withHidden<T extends object, H extends object>(visible: T, hidden: H): T & Readonly<H> {
  for (const [key, value] of Object.entries(hidden)) {
    if (value !== undefined) Object.defineProperty(visible, key, { value, enumerable: false });
  }
  return visible as T & Readonly<H>;
}
