/**
 * Figures for people, as a status line or a summary shows them: counts (`12,458`), durations
 * (`3m05s`) and rates. One home for the three, shared by the bulk CLI's progress, the
 * simulator's and its report.
 */

/** `12,458`: a count rounded to a whole, with thousands separators. */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** `45s`, `3m05s`, `2h07m`, `3d04h`: short enough for a status line. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86_400)}d${pad(Math.floor((s % 86_400) / 3600))}h`;
}

/**
 * Rates for people: `12,458`, `812`, `45.3`, `2.3`, `0.05`, `0.0033`. A fixed one decimal turns
 * 0.05 rows/s into "0.1" (twice the truth) and 0.004 into "0.0"; below 1 a rate keeps two
 * significant digits instead, and from 100 up the decimals are noise.
 */
export function formatRate(perSecond: number): string {
  if (!Number.isFinite(perSecond)) return String(perSecond);
  const x = Math.abs(perSecond);
  if (x >= 100) return Math.round(perSecond).toLocaleString('en-US');
  // toPrecision keeps trailing zeros (0.050); Number() drops them and never writes an exponent this large.
  const small = Number(perSecond.toPrecision(2));
  if (x >= 1 || x === 0 || Math.abs(small) >= 1) return perSecond.toFixed(1);
  return String(small);
}
