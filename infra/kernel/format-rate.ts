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
