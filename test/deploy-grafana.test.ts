/**
 * The Grafana dashboard (deploy/grafana/warmpool.json) loads as a dashboard — the fields of
 * Grafana's dashboard JSON model with the right types, unique panel ids, panels on the 24-column
 * grid without overlapping, every query bound to the Prometheus data source variable — and every
 * PromQL expression parses (Prometheus's own Lezer grammar) and asks only for series that exist:
 * each metric is registered by warmpool's real metric factories (API, worker, scaler, webhook
 * dispatcher), each label it matches or groups by is one of that metric's labels.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createWebhookMetrics } from '../api/webhooks/delivery-metrics.ts';
import { createScalerMetrics } from '../infra/scaler/controller-metrics.ts';
import { createApiMetrics, createWorkerMetrics } from '../infra/telemetry/metrics.ts';

interface Target {
  refId: string;
  expr: string;
  datasource: { type: string; uid: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: { type: string; uid: string };
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating: { list: Array<{ name: string; type: string; query: unknown; definition?: string }> };
  time: { from: string; to: string };
  tags: string[];
  editable: boolean;
  refresh: string;
}

const ROOT = path.resolve(import.meta.dirname, '..');
const dashboard = JSON.parse(readFileSync(path.join(ROOT, 'deploy/grafana/warmpool.json'), 'utf8')) as Dashboard;
const queryPanels = dashboard.panels.filter((p) => p.type !== 'row');

/** Every metric warmpool registers, with its label names (histograms also get `le`). */
function registeredMetrics(): Map<string, { type: string; labels: Set<string> }> {
  const registry = new Registry();
  createApiMetrics(registry);
  createWorkerMetrics(registry, { model: 'm', version: 'v' });
  createScalerMetrics(registry);
  createWebhookMetrics(registry);
  const out = new Map<string, { type: string; labels: Set<string> }>();
  for (const metric of registry.getMetricsAsArray()) {
    // prom-client keeps each metric's configuration on it; its types leave the fields out.
    const m = metric as unknown as { name: string; labelNames?: readonly string[] };
    out.set(m.name, { type: metric instanceof Histogram ? 'histogram' : 'other', labels: new Set(m.labelNames ?? []) });
  }
  return out;
}

/** The series a PromQL expression reads: metric names with the labels matched, and grouping labels. */
function analyse(expr: string): { errors: number[]; selectors: Array<{ metric: string; labels: string[] }>; grouping: string[] } {
  const tree = parser.parse(expr);
  const errors: number[] = [];
  const selectors: Array<{ metric: string; labels: string[] }> = [];
  const grouping: string[] = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors.push(node.from);
      if (node.name === 'VectorSelector') {
        const id = node.node.getChild('Identifier');
        const matchers = node.node.getChild('LabelMatchers');
        const labels = (matchers?.getChildren('UnquotedLabelMatcher') ?? []).map((m) => {
          const name = m.getChild('LabelName');
          return name ? expr.slice(name.from, name.to) : '';
        });
        selectors.push({ metric: id ? expr.slice(id.from, id.to) : '', labels });
      }
      if (node.name === 'GroupingLabels') {
        for (const l of node.node.getChildren('LabelName')) grouping.push(expr.slice(l.from, l.to));
      }
    },
  });
  return { errors, selectors, grouping };
}

/** Grafana's variables as a query would see them once substituted. */
const substitute = (expr: string) => expr.replaceAll('$__rate_interval', '5m').replaceAll('$model', '.*');

describe('the dashboard JSON model', () => {
  it('has the fields Grafana reads, with their types', () => {
    expect(typeof dashboard.uid).toBe('string');
    expect(dashboard.uid).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
    expect(typeof dashboard.title).toBe('string');
    expect(Number.isInteger(dashboard.schemaVersion) && dashboard.schemaVersion >= 36).toBe(true);
    expect(Array.isArray(dashboard.panels)).toBe(true);
    expect(Array.isArray(dashboard.templating.list)).toBe(true);
    expect(dashboard.time).toEqual({ from: expect.stringMatching(/^now-/), to: 'now' });
    expect(dashboard.tags).toContain('warmpool');
  });

  it('gives every panel a unique id and a place on the 24-column grid, none overlapping', () => {
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const p of dashboard.panels) {
      expect(['row', 'timeseries', 'stat', 'gauge', 'table'], p.title).toContain(p.type);
      const { h, w, x, y } = p.gridPos;
      expect(x >= 0 && w > 0 && x + w <= 24 && y >= 0 && h > 0, p.title).toBe(true);
      for (let r = y; r < y + h; r++) {
        for (let c = x; c < x + w; c++) {
          expect(cells.has(`${r}:${c}`), `${p.title} overlaps at row ${r}, column ${c}`).toBe(false);
          cells.add(`${r}:${c}`);
        }
      }
    }
  });

  it('binds every query to the Prometheus data source variable, with unique refIds per panel', () => {
    const ds = dashboard.templating.list.find((v) => v.type === 'datasource');
    expect(ds).toMatchObject({ name: 'datasource', query: 'prometheus' });
    for (const p of queryPanels) {
      // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's ${…} variable syntax
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      const refIds = (p.targets ?? []).map((t) => t.refId);
      expect(refIds.length, p.title).toBeGreaterThan(0);
      expect(new Set(refIds).size).toBe(refIds.length);
      for (const t of p.targets ?? []) expect(t.datasource).toEqual(p.datasource);
    }
  });

  it('shows what operators asked for on day one', () => {
    const titles = queryPanels.map((p) => p.title);
    for (const t of [
      'Queue depth',
      'Forecast vs arrivals',
      'Workers by state',
      'Batch size',
      'Queue wait percentiles',
      'Webhook failures',
    ]) {
      expect(titles).toContain(t);
    }
  });
});

describe('the PromQL', () => {
  const metrics = registeredMetrics();
  const exprs = queryPanels.flatMap((p) => (p.targets ?? []).map((t) => [p.title, t.expr] as const));
  const variableQueries = dashboard.templating.list.flatMap((v) => (v.definition ? [['variable', v.definition] as const] : []));

  /** The registered metric a series name belongs to (`x_bucket` → histogram `x`), and its extra labels. */
  function resolve(series: string): { labels: Set<string> } | undefined {
    const direct = metrics.get(series);
    if (direct) return direct;
    const m = /^(.+)_(bucket|sum|count)$/.exec(series);
    const base = m ? metrics.get(m[1] as string) : undefined;
    if (base?.type !== 'histogram') return undefined;
    return { labels: new Set([...base.labels, ...(m?.[2] === 'bucket' ? ['le'] : [])]) };
  }

  it('parses every expression', () => {
    expect(exprs.length).toBeGreaterThan(15);
    for (const [title, expr] of exprs) expect(analyse(substitute(expr)).errors, `${title}: ${expr}`).toEqual([]);
    // The parser does report errors: the check above can fail.
    expect(analyse('sum(rate(warmpool_batch_rows_count[5m])').errors.length).toBeGreaterThan(0);
  });

  it('reads only metrics warmpool registers, matching and grouping only by their labels', () => {
    for (const [title, expr] of exprs) {
      const { selectors, grouping } = analyse(substitute(expr));
      expect(selectors.length, title).toBeGreaterThan(0);
      const known = new Set<string>();
      for (const s of selectors) {
        const metric = resolve(s.metric);
        expect(metric, `${title}: ${s.metric} is not a warmpool metric`).toBeDefined();
        for (const l of s.labels) expect(metric?.labels.has(l), `${title}: ${s.metric} has no label ${l}`).toBe(true);
        for (const l of metric?.labels ?? []) known.add(l);
      }
      for (const l of grouping) expect(known.has(l), `${title}: grouping by ${l}, which none of its series has`).toBe(true);
    }
  });

  it('fills the model variable from a metric that carries the label', () => {
    expect(variableQueries).toHaveLength(1);
    const [, definition] = variableQueries[0] ?? [];
    const [, metric, label] = /^label_values\((\w+), (\w+)\)$/.exec(definition ?? '') ?? [];
    expect(metrics.get(metric ?? '')?.labels.has(label ?? '')).toBe(true);
  });
});
