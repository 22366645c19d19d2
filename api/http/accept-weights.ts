/**
 * The q-values of an Accept-style header (Accept, Accept-Encoding): each listed name, lower-cased,
 * with its weight in [0, 1] — 1 when no q is given, 0 (not acceptable) when the q cannot be read,
 * the highest when a name is listed twice. The map keeps the order names were first listed in, so
 * a caller can break a tie by it. Shared by the response coding (content-encoding.ts) and the
 * job resource's form (infer-response.ts).
 */
export function acceptWeights(header: string, canonical: (name: string) => string = (name) => name): Map<string, number> {
  const weights = new Map<string, number>();
  for (const entry of header.split(',')) {
    const [rawName = '', ...params] = entry.split(';');
    const name = rawName.trim().toLowerCase();
    if (name === '') continue;
    const key = canonical(name);
    weights.set(key, Math.max(weights.get(key) ?? 0, qValue(params)));
  }
  return weights;
}

/** An entry's q parameter in [0, 1]: 1 when absent, 0 (not acceptable) when unreadable. */
function qValue(params: string[]): number {
  for (const param of params) {
    const [key = '', value = ''] = param.split('=');
    if (key.trim().toLowerCase() !== 'q') continue;
    const q = Number(value.trim());
    return Number.isFinite(q) && value.trim() !== '' ? Math.min(Math.max(q, 0), 1) : 0;
  }
  return 1;
}
