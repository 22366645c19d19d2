/**
 * The known name a mistyped one most likely meant: the one did-you-mean of warmpool, for the
 * API's unknown body fields (api/use-cases/known-fields.ts) and the CLI's unknown flags,
 * commands and model names (scripts/commands). Pure; no I/O.
 */

/**
 * The name in `known` that `name` most likely meant, or undefined when none is close. Names are compared
 * without case, `_` or `-` (so `timeout_ms` is `timeoutMs`). A name that contains a known one or
 * is contained in it (`webhook_url`, `webhookUrl`, `input`), or shares its first 4 letters
 * (`params`), means it: the shorter side must have 4 letters, so `width` does not mean `id`.
 * Otherwise the nearest by edit distance, if within a third of the longer name (at least 2 edits).
 */
export function closestName(name: string, known: readonly string[]): string | undefined {
  const wanted = normalise(name);
  if (wanted === '') return undefined;
  let best: { name: string; score: number } | undefined;
  for (const candidate of known) {
    const score = closeness(wanted, normalise(candidate));
    if (score !== undefined && (best === undefined || score < best.score)) best = { name: candidate, score };
  }
  return best?.name;
}

/** Lower is closer: 0 the same, under 1 related by containment or prefix, else edits; undefined when too far. */
function closeness(wanted: string, candidate: string): number | undefined {
  if (wanted === candidate) return 0;
  const shorter = Math.min(wanted.length, candidate.length);
  const related = shorter >= 4 && (wanted.includes(candidate) || candidate.includes(wanted) || commonPrefix(wanted, candidate) >= 4);
  // Related names rank before any edit distance; among them, the closest in length.
  if (related) return 0.5 + Math.abs(wanted.length - candidate.length) / 100;
  const edits = editDistance(wanted, candidate);
  return edits <= Math.max(2, Math.floor(Math.max(wanted.length, candidate.length) / 3)) ? edits : undefined;
}

function commonPrefix(a: string, b: string): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/** Levenshtein distance: insertions, deletions and substitutions, one each. */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitute = (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min((previous[j] as number) + 1, (current[j - 1] as number) + 1, substitute));
    }
    previous = current;
  }
  return previous[b.length] as number;
}

function normalise(name: string): string {
  return name.toLowerCase().replace(/[_-]/g, '');
}
