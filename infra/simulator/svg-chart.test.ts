import { describe, expect, it } from 'vitest';
import { escapeXml, formatTick, lineChart, niceTicks, scatterChart, timeTicks } from './svg-chart.ts';

/**
 * Well-formedness, checked by hand (no XML dependency): every tag closes in order, attributes
 * are quoted, and text holds no raw `<` or bare `&`.
 */
function checkWellFormed(svg: string): void {
  const stack: string[] = [];
  const tag = /<(\/?)([A-Za-z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/y;
  let i = 0;
  while (i < svg.length) {
    const lt = svg.indexOf('<', i);
    const text = svg.slice(i, lt < 0 ? svg.length : lt);
    expect(text, 'text between tags').not.toMatch(/&(?!(lt|gt|amp|apos|quot);)/);
    if (lt < 0) break;
    tag.lastIndex = lt;
    const m = tag.exec(svg);
    if (!m) throw new Error(`malformed tag at ${lt}: ${svg.slice(lt, lt + 80)}`);
    const [, close, name = '', , selfClose] = m;
    if (close) expect(stack.pop(), `closing </${name}>`).toBe(name);
    else if (!selfClose) stack.push(name);
    i = tag.lastIndex;
  }
  expect(stack).toEqual([]);
  expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
}

const polylines = (svg: string) => [...svg.matchAll(/<polyline points="([^"]+)"/g)].map((m) => m[1]);

describe('svg charts', () => {
  it('maps data to the plot area: x from the left margin to the right, y = 0 at the bottom', () => {
    // 900 × 360 with margins left 70, right 20, top 40, bottom 80: the plot is x 70–880, y 40–280.
    const svg = lineChart({
      title: 't',
      x: { values: [0, 1], label: 'x' },
      y: { label: 'y', min: 0, max: 10 },
      lines: [{ name: 'a', values: [0, 10], color: '#000' }],
    });
    checkWellFormed(svg);
    expect(polylines(svg)).toEqual(['70.0,280.0 880.0,40.0']);
  });

  it('breaks a line at nulls, stacks areas, draws rules, and escapes text', () => {
    const svg = lineChart({
      title: 'a < b & "c"',
      x: { values: [0, 1, 2, 3], label: 'x' },
      y: { label: 'y', min: 0, max: 10 },
      lines: [{ name: 'gappy', values: [1, null, 2, 3], color: '#111' }],
      stacked: [
        { name: 'low', values: [1, 1, 1, 1], color: '#222' },
        { name: 'high', values: [2, 2, null, 2], color: '#333' },
      ],
      rules: [{ y: 5, label: 'SLO', color: '#444' }],
    });
    checkWellFormed(svg);
    expect(polylines(svg)).toHaveLength(2);
    expect(svg).toContain('a &lt; b &amp; &quot;c&quot;');
    // The second area's top is 1 + 2 = 3 (y = 280 − 3/10 × 240 = 208) and 1 + 0 where null.
    const polygons = [...svg.matchAll(/<polygon points="([^"]+)"/g)].map((m) => m[1] ?? '');
    expect(polygons[1]?.split(' ').slice(0, 4)).toEqual(['70.0,208.0', '340.0,208.0', '610.0,256.0', '880.0,208.0']);
    // The rule at y = 5 sits half-way up.
    expect(svg).toContain('y1="160.0"');
  });

  it('draws the frame and says "no data" for empty or all-null series', () => {
    for (const svg of [
      lineChart({ title: 'empty', x: { values: [], label: 'x' }, y: { label: 'y' }, lines: [{ name: 'a', values: [], color: '#000' }] }),
      lineChart({
        title: 'nulls',
        x: { values: [0, 1], label: 'x' },
        y: { label: 'y' },
        lines: [{ name: 'a', values: [null, null], color: '#000' }],
      }),
      scatterChart({ title: 'none', x: { label: 'x' }, y: { label: 'y' }, groups: [{ name: 'g', color: '#000', points: [] }] }),
    ]) {
      checkWellFormed(svg);
      expect(svg).toContain('no data');
      expect(svg).not.toContain('NaN');
    }
  });

  it('scatter: markers at their points, a line through a group in x order', () => {
    const svg = scatterChart({
      title: 's',
      x: { label: 'x', min: 0, max: 10 },
      y: { label: 'y', min: 0, max: 10 },
      groups: [
        {
          name: 'front',
          color: '#00f',
          line: true,
          points: [
            { x: 10, y: 10, label: '#2' },
            { x: 0, y: 0, label: '#1' },
          ],
        },
      ],
      width: 800,
      height: 480,
    });
    checkWellFormed(svg);
    // Plot x 70–780, y 40–400.
    expect(polylines(svg)).toEqual(['70.0,400.0 780.0,40.0']);
    expect(svg).toContain('<circle cx="780.0" cy="40.0"');
  });

  it('picks round ticks and time ticks on whole hours or days', () => {
    expect(niceTicks(0, 10, 5)).toEqual([0, 2, 4, 6, 8, 10]);
    expect(niceTicks(0, 0.93, 4)).toEqual([0, 0.25, 0.5, 0.75]);
    expect(niceTicks(3, 3)).toEqual([3]);
    expect(niceTicks(Number.NaN, 1)).toEqual([]);
    const day = 86_400_000;
    const ticks = timeTicks(Date.UTC(2024, 0, 1, 5), Date.UTC(2024, 0, 1, 5) + 3 * day);
    expect(ticks.map((t) => t.label)).toEqual(['01-01 12:00', '01-02 00:00', '01-02 12:00', '01-03 00:00', '01-03 12:00', '01-04 00:00']);
    expect(timeTicks(Date.UTC(2024, 0, 1), Date.UTC(2024, 0, 29)).map((t) => t.label)).toEqual([
      '2024-01-01',
      '2024-01-08',
      '2024-01-15',
      '2024-01-22',
      '2024-01-29',
    ]);
    expect([formatTick(2_500_000), formatTick(12_000), formatTick(0.25)]).toEqual(['2.5M', '12k', '0.25']);
    expect(escapeXml(`<&>'"`)).toBe('&lt;&amp;&gt;&apos;&quot;');
  });
});
