/**
 * Small SVG charts, written as text with no dependency, that any browser opens from disk: line
 * charts (with stacked areas and horizontal rules, e.g. an SLO) over a numeric or time axis, and
 * scatter charts (with an optional line through a group, e.g. a Pareto front).
 *
 * A null value is a gap: the line breaks there (a stacked area counts it as 0). An empty or
 * all-null chart still draws its frame, title and a "no data" note, so a report never lacks a
 * file it promised. Every text is XML-escaped.
 */

export interface LineSeries {
  name: string;
  values: ReadonlyArray<number | null>;
  color: string;
  dashed?: boolean;
}

export interface Rule {
  y: number;
  label: string;
  color: string;
}

export interface Axis {
  label: string;
  /** Bounds; by default from the data (y from 0). */
  min?: number;
  max?: number;
}

export interface LineChartSpec {
  title: string;
  /** x of every point (epoch ms when `time`); series values are parallel to it. */
  x: Axis & { values: readonly number[]; time?: boolean };
  y: Axis;
  lines?: LineSeries[];
  /** Areas stacked bottom-up in this order. */
  stacked?: LineSeries[];
  rules?: Rule[];
  width?: number;
  height?: number;
}

export interface ScatterGroup {
  name: string;
  color: string;
  points: ReadonlyArray<{ x: number; y: number; label?: string }>;
  /** Joins the points in x order (e.g. a front). */
  line?: boolean;
  marker?: 'circle' | 'square' | 'diamond';
}

export interface ScatterChartSpec {
  title: string;
  x: Axis;
  y: Axis;
  groups: ScatterGroup[];
  rules?: Rule[];
  width?: number;
  height?: number;
}

const MARGIN = { left: 70, right: 20, top: 40, bottom: 80 };

export function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', "'": '&apos;', '"': '&quot;' })[c] ?? c);
}

/** About `count` round tick values (1, 2, 2.5, 5 × 10^k steps) covering [min, max]. */
export function niceTicks(min: number, max: number, count = 5): number[] {
  if (!Number.isFinite(min) || !Number.isFinite(max)) return [];
  if (max <= min) return [min];
  const raw = (max - min) / Math.max(1, count);
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 2.5, 5, 10].find((m) => m * magnitude >= raw) ?? 10) * magnitude;
  const ticks: number[] = [];
  for (let v = Math.ceil(min / step - 1e-9) * step; v <= max + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

const HOUR = 3_600_000;
const TIME_STEPS = [HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR, 24 * HOUR, 2 * 24 * HOUR, 7 * 24 * HOUR, 14 * 24 * HOUR];

/** Tick times (UTC, on whole hours, days or Mondays) and their labels, about `count` of them. */
export function timeTicks(minMs: number, maxMs: number, count = 7): Array<{ at: number; label: string }> {
  if (!(maxMs > minMs)) return [];
  const step = TIME_STEPS.find((s) => (maxMs - minMs) / s <= count) ?? (TIME_STEPS.at(-1) as number);
  const out: Array<{ at: number; label: string }> = [];
  // Weekly steps start on Mondays (the epoch began on a Thursday; 1970-01-05 was a Monday).
  const origin = step >= 7 * 24 * HOUR ? 4 * 24 * HOUR : 0;
  for (let at = Math.ceil((minMs - origin) / step) * step + origin; at <= maxMs; at += step) {
    const iso = new Date(at).toISOString();
    out.push({ at, label: step < 24 * HOUR ? `${iso.slice(5, 10)} ${iso.slice(11, 16)}` : iso.slice(0, 10) });
  }
  return out;
}

interface Frame {
  width: number;
  height: number;
  x: (v: number) => number;
  y: (v: number) => number;
}

function frame(width: number, height: number, xs: [number, number], ys: [number, number]): Frame {
  const [x0, x1] = xs[1] > xs[0] ? xs : [xs[0] - 1, xs[0] + 1];
  const [y0, y1] = ys[1] > ys[0] ? ys : [ys[0], ys[0] + 1];
  const w = width - MARGIN.left - MARGIN.right;
  const h = height - MARGIN.top - MARGIN.bottom;
  return {
    width,
    height,
    x: (v) => MARGIN.left + ((v - x0) / (x1 - x0)) * w,
    y: (v) => MARGIN.top + h - ((v - y0) / (y1 - y0)) * h,
  };
}

/** Tick labels: 4 significant digits, thousands as k and millions as M. */
export function formatTick(v: number): string {
  const short = (x: number) => String(Number(x.toPrecision(4)));
  if (Math.abs(v) >= 1e6) return `${short(v / 1e6)}M`;
  if (Math.abs(v) >= 1e4) return `${short(v / 1e3)}k`;
  return short(v);
}
const fmt = formatTick;
const n = (v: number) => v.toFixed(1);

function axes(
  f: Frame,
  spec: { title: string; x: Axis; y: Axis },
  xTicks: Array<{ at: number; label: string }>,
  yTicks: number[],
): string[] {
  const bottom = f.height - MARGIN.bottom;
  const right = f.width - MARGIN.right;
  const out = [
    `<rect x="0" y="0" width="${f.width}" height="${f.height}" fill="white"/>`,
    `<text x="${f.width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(spec.title)}</text>`,
  ];
  for (const t of yTicks) {
    const y = n(f.y(t));
    out.push(`<line x1="${MARGIN.left}" y1="${y}" x2="${right}" y2="${y}" stroke="#e5e5e5"/>`);
    out.push(
      `<text x="${MARGIN.left - 6}" y="${y}" text-anchor="end" dominant-baseline="middle" font-size="11">${escapeXml(fmt(t))}</text>`,
    );
  }
  for (const t of xTicks) {
    const x = n(f.x(t.at));
    out.push(`<line x1="${x}" y1="${bottom}" x2="${x}" y2="${bottom + 5}" stroke="#333"/>`);
    out.push(`<text x="${x}" y="${bottom + 18}" text-anchor="middle" font-size="11">${escapeXml(t.label)}</text>`);
  }
  out.push(`<line x1="${MARGIN.left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#333"/>`);
  out.push(`<line x1="${MARGIN.left}" y1="${MARGIN.top}" x2="${MARGIN.left}" y2="${bottom}" stroke="#333"/>`);
  out.push(
    `<text x="${(MARGIN.left + right) / 2}" y="${bottom + 38}" text-anchor="middle" font-size="12">${escapeXml(spec.x.label)}</text>`,
  );
  const mid = (MARGIN.top + bottom) / 2;
  out.push(
    `<text x="16" y="${mid}" text-anchor="middle" font-size="12" transform="rotate(-90 16 ${mid})">${escapeXml(spec.y.label)}</text>`,
  );
  return out;
}

function legend(f: Frame, items: Array<{ name: string; color: string; dashed?: boolean }>): string[] {
  const out: string[] = [];
  let x = MARGIN.left;
  const y = f.height - 18;
  for (const item of items) {
    const dash = item.dashed ? ' stroke-dasharray="6 4"' : '';
    out.push(`<line x1="${x}" y1="${y}" x2="${x + 22}" y2="${y}" stroke="${item.color}" stroke-width="3"${dash}/>`);
    out.push(`<text x="${x + 28}" y="${y}" dominant-baseline="middle" font-size="11">${escapeXml(item.name)}</text>`);
    x += 40 + item.name.length * 6.5;
  }
  return out;
}

function rules(f: Frame, list: readonly Rule[]): string[] {
  return list.flatMap((r) => {
    const y = n(f.y(r.y));
    return [
      `<line x1="${MARGIN.left}" y1="${y}" x2="${f.width - MARGIN.right}" y2="${y}" stroke="${r.color}" stroke-width="1.5" stroke-dasharray="8 4"/>`,
      `<text x="${f.width - MARGIN.right - 4}" y="${Number(y) - 5}" text-anchor="end" font-size="11" fill="${r.color}">${escapeXml(r.label)}</text>`,
    ];
  });
}

function svg(f: Frame, body: string[], empty: boolean): string {
  const note = empty ? [`<text x="${f.width / 2}" y="${f.height / 2}" text-anchor="middle" font-size="14" fill="#888">no data</text>`] : [];
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${f.width}" height="${f.height}" viewBox="0 0 ${f.width} ${f.height}" font-family="sans-serif">`,
    ...body,
    ...note,
    '</svg>',
    '',
  ].join('\n');
}

/** Polyline segments of one series, broken at nulls. */
function paths(f: Frame, xs: readonly number[], values: ReadonlyArray<number | null>): string[] {
  const segments: string[] = [];
  let current: string[] = [];
  xs.forEach((x, i) => {
    const v = values[i];
    if (v === null || v === undefined || !Number.isFinite(v)) {
      if (current.length > 0) segments.push(current.join(' '));
      current = [];
      return;
    }
    current.push(`${n(f.x(x))},${n(f.y(v))}`);
  });
  if (current.length > 0) segments.push(current.join(' '));
  return segments;
}

export function lineChart(spec: LineChartSpec): string {
  const xs = spec.x.values;
  const stacked = spec.stacked ?? [];
  const lines = spec.lines ?? [];
  const tops = stackTops(stacked, xs.length);
  const finite = [...lines.flatMap((l) => l.values), ...(tops.at(-1) ?? []), ...(spec.rules ?? []).map((r) => r.y)].filter(
    (v): v is number => v !== null && Number.isFinite(v),
  );
  const empty = xs.length === 0 || finite.length === 0;
  const yMax = spec.y.max ?? (finite.length > 0 ? Math.max(...finite) * 1.05 : 1);
  const yMin = spec.y.min ?? Math.min(0, ...finite);
  const xMin = spec.x.min ?? xs[0] ?? 0;
  const xMax = spec.x.max ?? xs.at(-1) ?? 1;
  const f = frame(spec.width ?? 900, spec.height ?? 360, [xMin, xMax], [yMin, yMax > yMin ? yMax : yMin + 1]);
  const xTicks = spec.x.time ? timeTicks(xMin, xMax) : niceTicks(xMin, xMax, 8).map((at) => ({ at, label: fmt(at) }));
  const body = axes(f, spec, xTicks, niceTicks(yMin, yMax > yMin ? yMax : yMin + 1));
  // Draw inside the plot only: a series above an explicit y.max is clipped, not spilled.
  body.push(
    `<clipPath id="plot"><rect x="${MARGIN.left}" y="${MARGIN.top}" width="${f.width - MARGIN.left - MARGIN.right}" height="${f.height - MARGIN.top - MARGIN.bottom}"/></clipPath>`,
    '<g clip-path="url(#plot)">',
  );
  stacked.forEach((s, k) => {
    if (xs.length === 0) return;
    const top = tops[k] ?? [];
    const base = k === 0 ? xs.map(() => yMin) : (tops[k - 1] ?? []);
    const up = xs.map((x, i) => `${n(f.x(x))},${n(f.y(top[i] ?? 0))}`);
    const down = xs.map((x, i) => `${n(f.x(x))},${n(f.y(base[i] ?? 0))}`).reverse();
    body.push(`<polygon points="${[...up, ...down].join(' ')}" fill="${s.color}" fill-opacity="0.75" stroke="none"/>`);
  });
  for (const l of lines) {
    const dash = l.dashed ? ' stroke-dasharray="6 4"' : '';
    for (const points of paths(f, xs, l.values)) {
      body.push(`<polyline points="${points}" fill="none" stroke="${l.color}" stroke-width="1.5"${dash}/>`);
    }
  }
  body.push('</g>', ...rules(f, spec.rules ?? []), ...legend(f, [...stacked, ...lines]));
  return svg(f, body, empty);
}

/** Cumulative tops of stacked series; nulls count as 0. */
function stackTops(stacked: readonly LineSeries[], length: number): number[][] {
  const tops: number[][] = [];
  let below = new Array<number>(length).fill(0);
  for (const s of stacked) {
    const top = below.map((b, i) => b + (s.values[i] ?? 0));
    tops.push(top);
    below = top;
  }
  return tops;
}

export function scatterChart(spec: ScatterChartSpec): string {
  const points = spec.groups.flatMap((g) => g.points).filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
  const empty = points.length === 0;
  const xsAll = points.map((p) => p.x);
  const ysAll = [...points.map((p) => p.y), ...(spec.rules ?? []).map((r) => r.y)];
  const pad = (lo: number, hi: number) => (hi > lo ? (hi - lo) * 0.08 : Math.max(Math.abs(lo) * 0.1, 1));
  const x0 = spec.x.min ?? (empty ? 0 : Math.min(...xsAll) - pad(Math.min(...xsAll), Math.max(...xsAll)));
  const x1 = spec.x.max ?? (empty ? 1 : Math.max(...xsAll) + pad(Math.min(...xsAll), Math.max(...xsAll)));
  const y0 = spec.y.min ?? (ysAll.length === 0 ? 0 : Math.min(...ysAll) - pad(Math.min(...ysAll), Math.max(...ysAll)));
  const y1 = spec.y.max ?? (ysAll.length === 0 ? 1 : Math.max(...ysAll) + pad(Math.min(...ysAll), Math.max(...ysAll)));
  const f = frame(spec.width ?? 800, spec.height ?? 480, [x0, x1], [y0, y1]);
  const body = axes(
    f,
    spec,
    niceTicks(x0, x1, 7).map((at) => ({ at, label: fmt(at) })),
    niceTicks(y0, y1),
  );
  body.push(...rules(f, spec.rules ?? []));
  for (const g of spec.groups) {
    const valid = g.points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
    if (g.line && valid.length > 1) {
      const line = [...valid].sort((a, b) => a.x - b.x).map((p) => `${n(f.x(p.x))},${n(f.y(p.y))}`);
      body.push(`<polyline points="${line.join(' ')}" fill="none" stroke="${g.color}" stroke-width="1.5"/>`);
    }
    for (const p of valid) {
      body.push(marker(g.marker ?? 'circle', f.x(p.x), f.y(p.y), g.color));
      if (p.label) body.push(`<text x="${n(f.x(p.x) + 7)}" y="${n(f.y(p.y) - 6)}" font-size="10" fill="#333">${escapeXml(p.label)}</text>`);
    }
  }
  body.push(...legend(f, spec.groups));
  return svg(f, body, empty);
}

function marker(kind: 'circle' | 'square' | 'diamond', x: number, y: number, color: string): string {
  if (kind === 'square') return `<rect x="${n(x - 5)}" y="${n(y - 5)}" width="10" height="10" fill="${color}"/>`;
  if (kind === 'diamond')
    return `<polygon points="${n(x)},${n(y - 7)} ${n(x + 7)},${n(y)} ${n(x)},${n(y + 7)} ${n(x - 7)},${n(y)}" fill="${color}"/>`;
  return `<circle cx="${n(x)}" cy="${n(y)}" r="4.5" fill="${color}"/>`;
}
