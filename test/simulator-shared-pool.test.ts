/**
 * `warmpool simulate --shared-pool` (issue 31 §5) as a user runs it: a generated world and a split
 * trace through the four policies, report.json's fields, and the flags it refuses.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runSimulate } from './support/simulate-cli.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-shared-pool-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('warmpool simulate --shared-pool', () => {
  it('replays a generated world through the four policies and writes their loads and hit ratios', async () => {
    const out = path.join(dir, 'generated');
    const r = await runSimulate(['--shared-pool', '--generate-models', '6', '--rate', '2', '--seed', '3', '--days', '0.02', '--out', out]);
    expect(r.code, r.err).toBe(0);
    for (const name of ['shared', 'per-model', 'keep-alive', 'oracle']) expect(r.out).toMatch(new RegExp(`^\\| ${name} \\| `, 'm'));
    expect(r.out).toMatch(/pooled burst standby [\d.]+ vs [\d.]+ summed per model/);
    const json = JSON.parse(readFileSync(path.join(out, 'report.json'), 'utf8'));
    expect(json.world.models).toBe(6);
    expect(json.policies.map((p: { name: string }) => p.name)).toEqual(['shared', 'per-model', 'keep-alive', 'oracle']);
    for (const p of json.policies) {
      expect(p.modelLoads).toBeGreaterThanOrEqual(0);
      expect(p.hitRatio).toBeGreaterThanOrEqual(0);
      expect(p.hitRatio).toBeLessThanOrEqual(1);
      expect(p.atSlo.report.jobs).toBe(p.jobs);
    }
  }, 120_000);

  it('splits a single-model trace into models', async () => {
    const trace = path.join(dir, 'one.csv');
    const rows = Array.from({ length: 40 }, (_, i) => `${1_767_571_200 + i * 60},${30 + (i % 7)}`);
    writeFileSync(trace, `time,requests\n${rows.join('\n')}\n`);
    const out = path.join(dir, 'split');
    const r = await runSimulate(['--shared-pool', '--trace', trace, '--count-col', 'requests', '--split-models', '4', '--out', out]);
    expect(r.code, r.err).toBe(0);
    const json = JSON.parse(readFileSync(path.join(out, 'report.json'), 'utf8'));
    expect(json.world.models).toBe(4);
    expect(json.world.requests).toBe(rows.reduce((t, row) => t + Number(row.split(',')[1]), 0));
  }, 120_000);

  it('refuses flags of other modes, and a trace without a way to tell its models', async () => {
    expect((await runSimulate(['--trace', 'x.csv', '--model-col', 'model'])).err).toMatch(/--model-col applies to --shared-pool only/);
    expect((await runSimulate(['--shared-pool', '--trace', 'x.csv', '--sweep', 'standby=0,1'])).err).toMatch(
      /--shared-pool does not take --sweep/,
    );
    expect((await runSimulate(['--shared-pool', '--generate-models', '3', '--trace', 'x.csv'])).err).toMatch(
      /--generate-models makes its own world/,
    );
    expect((await runSimulate(['--shared-pool', '--generate-models', '0'])).err).toMatch(/--generate-models must be an integer ≥ 1/);
    const trace = path.join(dir, 'plain.csv');
    writeFileSync(trace, 'time\n1767571200\n');
    const r = await runSimulate(['--shared-pool', '--trace', trace]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/needs --model-col NAME .* or --split-models N/);
  });
});
