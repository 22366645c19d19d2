/**
 * README's configuration table and the schema list the same variables with the same defaults.
 *
 * The schema's default of a variable is what its rule gives for an empty environment. README's
 * default cell starts with one of:
 *   `value`  that value: a number compares as a number (`2_000` = 2000), `~/` is the home folder;
 *            a following "(8 MiB)", "(4 Mi)" or "(32 MiB/s)" must be the same number in binary units
 *   empty    the empty string
 *   unset    no value at all (the variable is optional; what its absence means is prose)
 * and anything after it is prose (what `dev` sets, what 0 means), not compared.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_SECTIONS } from './config.ts';

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** Each variable's default in the schema (undefined: none), from every section that reads it. */
function schemaDefaults(): Map<string, unknown> {
  const defaults = new Map<string, unknown>();
  for (const section of Object.values(CONFIG_SECTIONS)) {
    for (const [name, rule] of Object.entries(section.in.shape)) defaults.set(name, rule.parse(undefined));
  }
  return defaults;
}

/** The rows of README's `## Configuration` table: variable → default cell. */
function readmeRows(markdown: string): Array<{ name: string; cell: string }> {
  const section = markdown.split(/^## /m).find((s) => s.startsWith('Configuration\n')) ?? '';
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [, variable = '', cell = ''] = line.split(/(?<!\\)\|/).map((c) => c.trim());
      return { name: variable.replace(/^`|`$/g, ''), cell };
    });
}

const BINARY_UNITS: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30 };

/** Why README's default cell disagrees with the schema's default, or null when it agrees. */
function disagreement(cell: string, schemaDefault: unknown): string | null {
  if (/^unset\b/.test(cell))
    return schemaDefault === undefined ? null : `README says unset; the schema's default is ${JSON.stringify(schemaDefault)}`;
  if (/^empty\b/.test(cell))
    return schemaDefault === '' ? null : `README says empty; the schema's default is ${JSON.stringify(schemaDefault)}`;
  const code = /^`([^`]*)`(.*)$/.exec(cell);
  if (!code) return 'the default cell must start with `value`, empty or unset';
  const [, written = '', rest = ''] = code;
  if (schemaDefault === undefined) return `README says \`${written}\`; the schema has no default (write unset)`;
  if (typeof schemaDefault === 'number') {
    const value = Number(written.replace(/(?<=\d)_(?=\d)/g, ''));
    if (value !== schemaDefault) return `README says ${written}; the schema's default is ${schemaDefault}`;
    const unit = /^ \((\d+(?:\.\d+)?) (Ki|Mi|Gi)B?(?:\/s)?\)/.exec(rest);
    if (unit && Number(unit[1]) * (BINARY_UNITS[unit[2] ?? ''] ?? Number.NaN) !== schemaDefault) {
      return `README's (${unit[1]} ${unit[2]}) is not ${schemaDefault}`;
    }
    return null;
  }
  const value = written.startsWith('~/') ? path.join(os.homedir(), written.slice(2)) : written;
  return value === String(schemaDefault) ? null : `README says ${written}; the schema's default is ${JSON.stringify(schemaDefault)}`;
}

describe("README's configuration table", () => {
  const rows = readmeRows(README);
  const defaults = schemaDefaults();

  it('lists every variable of the schema once, and none that it does not read', () => {
    const names = rows.map((r) => r.name);
    expect(names.filter((n, i) => names.indexOf(n) !== i)).toEqual([]);
    expect([...names].sort()).toEqual([...defaults.keys()].sort());
    expect(names.length).toBeGreaterThan(60);
  });

  it("gives each variable the schema's default", () => {
    const wrong = rows.flatMap(({ name, cell }) => {
      const why = defaults.has(name) ? disagreement(cell, defaults.get(name)) : null;
      return why ? [`${name}: ${why}`] : [];
    });
    expect(wrong).toEqual([]);
  });
});

describe('the default-cell rule', () => {
  it.each([
    ['`2_000`', 2000],
    ['`8388608` (8 MiB)', 8 * 2 ** 20],
    ['`33554432` (32 MiB/s)', 32 * 2 ** 20],
    ['`0` = warm-up chooses', 0],
    ['`true`', true],
    ['`redis://127.0.0.1:6379` (`dev`: starts its own)', 'redis://127.0.0.1:6379'],
    ['`~/.cache/warmpool/models` (`dev`: elsewhere)', path.join(os.homedir(), '.cache', 'warmpool', 'models')],
    ['empty (`dev`: `dev`)', ''],
    ['unset = AWS S3', undefined],
  ])('accepts %s for %j', (cell, value) => {
    expect(disagreement(cell, value)).toBeNull();
  });

  it.each([
    ['`2000`', 3000],
    ['`8388608` (4 MiB)', 8 * 2 ** 20],
    ['`true`', false],
    ['`true` when `S3_ENDPOINT` is set', undefined],
    ['empty', undefined],
    ['unset', ''],
    ['none', 0],
    ['`info`', 'warn'],
  ])('refuses %s for %j', (cell, value) => {
    expect(disagreement(cell, value)).not.toBeNull();
  });
});
