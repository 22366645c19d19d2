/**
 * `warmpool simulate --walk-forward`, `--matrix` (issue 17 §3) and `--bank` (issue 28 §4) as a user
 * runs them, on small synthetic traces and worlds: the files each writes, the table each prints,
 * and the flags each refuses.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runSimulate, runSimulateCli } from './support/simulate-cli.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-sim-eval-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Per-minute counts over `days`, a daily swing between `low` and `high`. */
function writeTrace(name: string, days: number, low: number, high: number): string {
  const rows = ['minute,requests'];
  const t0 = Date.UTC(2024, 0, 1);
  for (let m = 0; m < days * 1440; m++) {
    const swing = (1 - Math.cos((2 * Math.PI * m) / 1440)) / 2;
    rows.push(`${new Date(t0 + m * 60_000).toISOString()},${(low + (high - low) * swing).toFixed(2)}`);
  }
  const file = path.join(dir, name);
  writeFileSync(file, `${rows.join('\n')}\n`);
  return file;
}

describe('warmpool simulate --walk-forward', () => {
  it('tunes on the first part, reports the tuned and the default policy on the rest', async () => {
    const trace = writeTrace('two-days.csv', 2, 5, 40);
    const out = path.join(dir, 'wf');
    const r = await runSimulateCli(
      [
        '--trace',
        trace,
        '--walk-forward',
        '--train-fraction',
        '0.5',
        '--worker-rps',
        '1',
        '--max-batch',
        '4',
        '--sweep',
        'standby=0,1',
        '--threads',
        '2',
        '--out',
        out,
      ],
      dir,
    );
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/\| predictive \(default\) \| [\d.]+ % \|/);
    expect(r.out).toMatch(/\| predictive \(tuned: standby=[01]\) \|/);
    const json = JSON.parse(readFileSync(path.join(out, 'report.json'), 'utf8'));
    expect(json.replayedMinutes).toEqual({ from: 1440, to: 2880 });
    expect(json.walkForward.parts.training.minutes).toEqual([0, 1440]);
    expect(json.policies.map((p: { name: string }) => p.name)).toEqual([
      'predictive',
      'predictive-tuned',
      'reactive',
      'static-peak',
      'oracle',
    ]);
    expect(json.atSlo.oracleMeetsTarget).toBe(true);
    const sweep = JSON.parse(readFileSync(path.join(out, 'sweep.json'), 'utf8'));
    expect(sweep.trace.end).toBe('2024-01-02T00:00:00.000Z');
    expect(readdirSync(out)).toEqual(expect.arrayContaining(['report.md', 'sweep.md', 'pareto.svg', 'predictive-tuned-workers.svg']));
  }, 120_000);

  it('refuses a training fraction that leaves nothing to evaluate, and the matrix-only flags', async () => {
    const trace = writeTrace('short.csv', 0.01, 1, 2);
    const tooBig = await runSimulate(['--trace', trace, '--walk-forward', '--train-fraction', '0.99']);
    expect(tooBig.code).toBe(2);
    expect(tooBig.err).toMatch(/--train-fraction 0.99 leaves no minute to evaluate/);
    expect((await runSimulate(['--trace', trace, '--train-fraction', '0.5'])).err).toMatch(
      /--train-fraction applies to --walk-forward, --matrix and --bank only/,
    );
    expect((await runSimulate(['--trace', trace, '--quick'])).err).toMatch(/--quick applies to --matrix and --bank only/);
  });
});

describe('warmpool simulate --matrix', () => {
  it('prints one table over every trace in the folder and world in the grid, and writes it', async () => {
    const traces = path.join(dir, 'traces');
    mkdirSync(traces);
    writeFileSync(path.join(traces, 'notes.txt'), 'not a trace');
    writeTrace('traces/quiet.csv', 2, 0.5, 3);
    const out = path.join(dir, 'matrix');
    const r = await runSimulateCli(['--matrix', '--traces', traces, '--quick', '--threads', '2', '--out', out], dir);
    expect(r.code, r.err).toBe(0);
    const rows = r.out.split('\n').filter((l) => l.startsWith('| quiet |'));
    expect(rows).toHaveLength(18);
    expect(rows[0]).toMatch(/^\| quiet \| 30 s \| 5 s \| short-batched \| [\d.]+ % \| /);
    expect(r.out).toMatch(/18 cells in \d+ s; wrote/);
    expect(r.err.split('\n').filter((l) => /^\[\d+\/18\] quiet.csv/.test(l))).toHaveLength(18);
    const json = JSON.parse(readFileSync(path.join(out, 'matrix.json'), 'utf8'));
    expect(json.quick).toBe(true);
    expect(json.traces).toEqual([{ name: 'quiet.csv', scale: 1, pattern: { kind: 'poisson' }, minutes: 1440 }]);
    expect(json.cells.every((c: { evaluated: { from: number } }) => c.evaluated.from === 720)).toBe(true);
    expect(readFileSync(path.join(out, 'matrix.md'), 'utf8')).toContain('| quiet | 300 s | 120 s | long-unbatched |');
  }, 300_000);

  it('needs traces, and judges the default policy only', async () => {
    expect((await runSimulate(['--matrix'])).err).toMatch(/--matrix needs --traces DIR/);
    const trace = writeTrace('one.csv', 0.1, 1, 2);
    const policy = path.join(dir, 'policy.json');
    writeFileSync(policy, '{"standby": 0}');
    const refused = await runSimulate(['--matrix', '--trace', trace, '--policy', policy]);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/--matrix replays the default policy only/);
    expect((await runSimulate(['--matrix', '--traces', path.join(dir, 'none')])).err).toMatch(/--traces .*none: ENOENT/);
  });
});

describe('warmpool simulate --bank', () => {
  it('generates the worlds, scores each, prints the table by family and writes it', async () => {
    const out = path.join(dir, 'bank');
    // Seed 9: two worlds of a few workers each. Seed 11's second world (0.046 jobs/s a worker,
    // batches of 1) took hundreds of workers and 15 s of replay; what is checked is the same.
    const r = await runSimulateCli(['--bank', '2', '--seed', '9', '--quick', '--threads', '2', '--out', out], dir);
    expect(r.code, r.err).toBe(0);
    expect(r.err.split('\n').filter((l) => /^\[\d\/2\] w00[01]-(diurnal|mmpp) cold start \d+ s, SLO [\d.]+ s: /.test(l))).toHaveLength(2);
    expect(r.out).toMatch(/^# Bank of random worlds \(seed 9\)/m);
    expect(r.out).toMatch(/^\| all \| 2 \| [012] \| /m);
    expect(r.out).toMatch(/[012] of 2 worlds meet every target; \d+ s; wrote/);
    const json = JSON.parse(readFileSync(path.join(out, 'bank.json'), 'utf8'));
    expect(json.seed).toBe(9);
    expect(json.cells.map((c: { world: string }) => c.world)).toEqual(['w000-diurnal', 'w001-mmpp']);
    for (const c of json.cells) {
      expect(c.evaluated).toMatchObject({ from: 720, to: 1440 }); // one-day worlds, split at half
      expect(c.predictive.sloAttainment).toBeGreaterThan(0);
      expect(Array.isArray(c.misses)).toBe(true);
    }
    expect(readFileSync(path.join(out, 'bank.md'), 'utf8')).toContain('| w001-mmpp |');
  }, 280_000);

  it('refuses flags that belong to other modes, and a bank of no worlds', async () => {
    expect((await runSimulate(['--bank', '0'])).err).toMatch(/--bank must be an integer ≥ 1/);
    expect((await runSimulate(['--bank', '3', '--trace', 'x.csv'])).err).toMatch(/--bank generates its worlds/);
    expect((await runSimulate(['--bank', '3', '--traces', 'dir'])).err).toMatch(/--traces applies to --matrix only/);
  });
});
