/**
 * A job request's options, each checked on its own before the model is looked up: `priority`,
 * `timeoutMs` (the start deadline), `version`, and the `degradable` and `cache` flags. Apart
 * from submit-job.ts because they are the body's field rules (400 `invalid_body`, naming the
 * field), not the placing of a job.
 */
import { PRIORITIES, type Priority } from '../../infra/contracts/job.ts';
import { VERSION_PATTERN } from '../../infra/contracts/manifest.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';

/** The longest start deadline a job may ask for: a day. */
export const MAX_TIMEOUT_MS = 86_400_000;

export function parseFlag(raw: unknown, name: string, absent: boolean): boolean {
  if (raw === undefined) return absent;
  if (typeof raw === 'boolean') return raw;
  throw new InvalidInputError('invalid_body', `"${name}" must be true or false, got ${JSON.stringify(raw)}`);
}

export function parsePriority(raw: unknown): Priority {
  if (raw === undefined) return 'normal';
  if (typeof raw === 'string' && Object.hasOwn(PRIORITIES, raw)) return raw as Priority;
  throw new InvalidInputError('invalid_body', `"priority" must be one of ${Object.keys(PRIORITIES).join(', ')}`);
}

export function parseTimeoutMs(raw: unknown): number | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw === 'number' && Number.isInteger(raw) && raw >= 1 && raw <= MAX_TIMEOUT_MS) return raw;
  throw new InvalidInputError(
    'invalid_body',
    `"timeoutMs" must be an integer number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got ${JSON.stringify(raw)}`,
  );
}

export function parseVersion(raw: unknown): string | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw === 'string' && VERSION_PATTERN.test(raw)) return raw;
  throw new InvalidInputError('invalid_body', '"version" must be a version name such as "1" or "2024-05-01"');
}
