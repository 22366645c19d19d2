import { describe, expect, it } from 'vitest';
import {
  type BenchReport,
  type BenchRow,
  formatMarkdown,
  formatTable,
  formatValue,
  judge,
  judgedRows,
  measurementOf,
  regime,
  toJson,
} from './report.ts';

const row = (name: string, value: number): BenchRow => ({ name, value, unit: 'ratio', detail: 'd' });

describe('judge', () => {
  it('holds a row to the target of its measurement, whatever the model prefix', () => {
    expect(judge(row('demo.worker_vs_raw_ort', 0.9))).toMatchObject({ target: '≥ 0.85', verdict: 'met' });
    expect(judge(row('mlp-1024.worker_vs_raw_ort', 0.5))).toMatchObject({ target: '≥ 0.85', verdict: 'gap' });
  });

  it('meets an upper bound at or below it, and counts a value that is not a number as a gap', () => {
    expect(judge(row('demo.e2e_latency_p99_ms', 100)).verdict).toBe('met');
    expect(judge(row('demo.e2e_latency_p99_ms', 100.1)).verdict).toBe('gap');
    expect(judge(row('demo.cold_start_vs_raw', Number.NaN)).verdict).toBe('gap');
  });

  it('holds the target of a regime only to the models in it', () => {
    expect(judge(row('demo.e2e_vs_minimal_stack', 0.7))).toMatchObject({ target: '≥ 0.8', verdict: 'gap' });
    expect(judge(row('cnn.e2e_vs_minimal_stack', 0.3)).verdict).toBe('');
    expect(judge(row('cnn.serving_efficiency', 0.75))).toMatchObject({ target: '≥ 0.7', verdict: 'met' });
    expect(judge(row('demo.serving_efficiency', 0.001)).verdict).toBe('');
    expect(judge(row('demo.cpu_ms_per_request_redis', 0.05)).verdict).toBe('met');
    expect(judge(row('my-model.cpu_ms_per_request_api', 9)).verdict).toBe('');
  });

  it('holds bulk scoring to the naive script on the cheap model and to raw ONNX Runtime on the heavy one', () => {
    expect(judge(row('demo.bulk_vs_naive_script_jsonl', 1.2))).toMatchObject({ target: '≥ 1', verdict: 'met' });
    expect(judge(row('demo.bulk_vs_naive_script_parquet', 0.9)).verdict).toBe('gap');
    expect(judge(row('demo.bulk_vs_naive_script_csv', 0.9)).verdict).toBe('');
    expect(judge(row('cnn.bulk_vs_naive_script_jsonl', 0.9)).verdict).toBe('');
    for (const format of ['jsonl', 'csv', 'parquet']) {
      expect(judge(row(`cnn.bulk_vs_raw_ort_${format}`, 0.79))).toMatchObject({ target: '≥ 0.8', verdict: 'gap' });
      expect(judge(row(`demo.bulk_vs_raw_ort_${format}`, 0.01)).verdict).toBe('');
    }
  });

  it('leaves rows without a target unjudged', () => {
    const judged = judge(row('demo.job_in_worker_p50_ms', 3));
    expect(judged.verdict).toBe('');
    expect(judged.target).toBeUndefined();
  });
});

describe('measurementOf', () => {
  it('drops the model prefix only', () => {
    expect(measurementOf('demo.e2e_vs_minimal_stack')).toBe('e2e_vs_minimal_stack');
    expect(measurementOf('plain')).toBe('plain');
  });
});

describe('formatValue', () => {
  it('keeps three significant figures at most and says n/a for non-numbers', () => {
    expect(formatValue(1234.56)).toBe('1235');
    expect(formatValue(3.456)).toBe('3.46');
    expect(formatValue(0.012345)).toBe('0.012');
    expect(formatValue(0)).toBe('0');
    expect(formatValue(Number.POSITIVE_INFINITY)).toBe('n/a');
  });
});

describe('formatTable', () => {
  it('aligns the columns and puts the target and verdict beside each judged row', () => {
    const lines = formatTable([row('demo.worker_vs_raw_ort', 0.5), { ...row('demo.job_in_worker_p50_ms', 12.5), unit: 'ms' }]).split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[1]).toMatch(/^demo\.worker_vs_raw_ort\s+0\.50\s+ratio\s+≥ 0\.85\s+gap\s+d$/);
    expect(lines[2]).toMatch(/^demo\.job_in_worker_p50_ms\s+12\.50\s+ms\s+d$/);
    // Values are right-aligned in one column.
    const end = (line: string | undefined, value: string) => (line ?? '').indexOf(` ${value} `) + value.length + 1;
    expect(end(lines[1], '0.50')).toBe(end(lines[2], '12.50'));
    expect(end(lines[0], 'value')).toBe(end(lines[1], '0.50'));
  });
});

describe('formatMarkdown', () => {
  it('writes one table row per bench row, escaping pipes in details', () => {
    const md = formatMarkdown([{ ...row('demo.e2e_vs_minimal_stack', 0.85), detail: 'a | b' }]).split('\n');
    expect(md).toHaveLength(3);
    expect(md[2]).toBe('| demo.e2e_vs_minimal_stack | 0.85 | ratio | ≥ 0.8 | met | a \\| b |');
  });
});

describe('toJson', () => {
  it('writes NaN as null, which JSON can carry', () => {
    const report: BenchReport = {
      machine: { cpus: 2, cpuModel: 'x', node: 'v20', ort: '1' },
      model: { name: 'demo', bytes: 1, sha256: 'a', inputs: [], outputs: [] },
      models: [],
      options: { quick: true, api: 'child' },
      startedAt: 'now',
      durationS: 1,
      rows: judgedRows([row('cnn.bulk_vs_raw_ort_jsonl', Number.NaN)]),
    };
    const parsed = JSON.parse(toJson(report)) as { rows: Array<{ value: unknown; verdict: string }> };
    expect(parsed.rows[0]).toMatchObject({ value: null, verdict: 'gap' });
  });
});

describe('regime', () => {
  it('names the bound from raw ONNX Runtime rows/s against the minimal stack requests/s', () => {
    expect(regime(600, 1400)).toBe('ONNX Runtime-bound');
    expect(regime(1_000_000, 4000)).toBe('queue-bound');
    expect(regime(3000, 4000)).toBe('neither clearly bound');
    expect(regime(600, Number.NaN)).toBe('regime unknown');
  });
});
