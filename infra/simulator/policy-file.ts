/**
 * The predictive policy's settings as a file (`--policy FILE.json`) and as sweep axes
 * (`--sweep standby=0,1,2 headroom=0.1,0.2`): the PolicySettings fields by name, each with the
 * values it accepts, plus `headroom`, a sweep-friendly alias for 1 − targetUtilization.
 */
import { readFileSync } from 'node:fs';
import type { PolicySettings } from '../contracts/pool.ts';
import { errorMessage, InvalidInputError } from '../kernel/errors.ts';

type Check = { integer?: boolean; min: number; max?: number; minExclusive?: boolean; maxExclusive?: boolean };

export const POLICY_FIELDS: Record<keyof PolicySettings, Check> = {
  min: { integer: true, min: 0 },
  max: { integer: true, min: 1 },
  standby: { integer: true, min: 0 },
  sloQueueWaitMs: { min: 0, minExclusive: true },
  coldStartMs: { min: 0 },
  scaleDownStabilizationMs: { min: 0 },
  targetUtilization: { min: 0, minExclusive: true, max: 1 },
  minLifetimeColdStarts: { min: 0 },
  sloTarget: { min: 0.5, minExclusive: true, max: 1, maxExclusive: true },
  capacityMargin: { min: 0, max: 4 },
};

/** Names a sweep accepts: the file's fields and `headroom`. */
export const SWEEP_FIELDS: Record<string, Check> = { ...POLICY_FIELDS, headroom: { min: 0, max: 1, maxExclusive: true } };

/** Why `value` is not acceptable for `name`, or undefined when it is. */
export function checkField(name: string, value: number, fields: Record<string, Check> = SWEEP_FIELDS): string | undefined {
  const rule = fields[name];
  if (!rule) return `unknown setting "${name}" (known: ${Object.keys(fields).join(', ')})`;
  const low = rule.minExclusive ? value <= rule.min : value < rule.min;
  const high = rule.max !== undefined && (rule.maxExclusive ? value >= rule.max : value > rule.max);
  if (!Number.isFinite(value) || low || high || (rule.integer && !Number.isInteger(value))) {
    const range = `${rule.minExclusive ? '>' : '≥'} ${rule.min}${rule.max === undefined ? '' : ` and ${rule.maxExclusive ? '<' : '≤'} ${rule.max}`}`;
    return `"${name}" must be ${rule.integer ? 'an integer' : 'a number'} ${range}, got ${value}`;
  }
  return undefined;
}

/** Applies sweep values (fields or `headroom`) over `base`. */
export function withSettings(base: PolicySettings, values: Readonly<Record<string, number>>): PolicySettings {
  const out: PolicySettings = { ...base };
  for (const [name, value] of Object.entries(values)) {
    if (name === 'headroom') out.targetUtilization = 1 - value;
    else out[name as keyof PolicySettings] = value;
  }
  return out;
}

export function readPolicyFile(file: string): Partial<PolicySettings> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new InvalidInputError('invalid_flag', `--policy ${file}: ${errorMessage(err)}`, { cause: err });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new InvalidInputError('invalid_flag', `--policy ${file}: expected a JSON object`);
  }
  for (const [key, value] of Object.entries(parsed)) {
    const problem = key in POLICY_FIELDS ? checkField(key, typeof value === 'number' ? value : Number.NaN, POLICY_FIELDS) : undefined;
    if (!(key in POLICY_FIELDS)) {
      throw new InvalidInputError(
        'invalid_flag',
        `--policy ${file}: unknown key "${key}" (known: ${Object.keys(POLICY_FIELDS).join(', ')})`,
      );
    }
    if (problem) throw new InvalidInputError('invalid_flag', `--policy ${file}: ${problem}`);
  }
  return parsed as Partial<PolicySettings>;
}
