/**
 * Strict request bodies: a top-level field the API does not know is refused (400
 * `unknown_field`) naming it and the known field it most likely meant. A misspelt option
 * ignored in silence is worse than a refusal: `"webhook_url"` for `"webhook"` is a job whose
 * webhook never comes, and nothing says why.
 *
 * Only the top level is checked. What is inside `parameters` and inside each tensor is the Open
 * Inference Protocol's to extend (Triton's binary extension puts `binary_data_size` there, and
 * clients send parameters of their own), so it stays open.
 */
import { InvalidInputError } from '../../infra/kernel/errors.ts';

/**
 * The Open Inference Protocol's own top-level fields of an inference request, and the two its
 * binary extension's example request also carries (`model_name`, `model_version`: the model is
 * the URL's; they are taken and not read).
 */
export const OIP_REQUEST_FIELDS = ['id', 'inputs', 'outputs', 'parameters', 'model_name', 'model_version'] as const;

/** A job submission or sync inference body: the OIP's fields, then warmpool's options. */
export const JOB_REQUEST_FIELDS = [...OIP_REQUEST_FIELDS, 'priority', 'version', 'timeoutMs', 'webhook', 'degradable', 'cache'] as const;

/**
 * Throws 400 `unknown_field` for the first key of `body` not in `known`: `what` names the
 * request in the message ("a job request").
 */
export function rejectUnknownFields(body: Record<string, unknown>, known: readonly string[], what: string): void {
  for (const field of Object.keys(body)) {
    if (known.includes(field)) continue;
    const near = closestField(field, known);
    const hint = near === undefined ? `; its fields are ${known.map((k) => `"${k}"`).join(', ')}` : `; did you mean "${near}"?`;
    throw new InvalidInputError('unknown_field', `"${field}" is not a field of ${what}${hint}`);
  }
}

/**
 * The known field `name` most likely meant, or undefined when none is close. Names are compared
 * without case, `_` or `-` (so `timeout_ms` is `timeoutMs`). A name that contains a known one or
 * is contained in it (`webhook_url`, `webhookUrl`, `input`), or shares its first 4 letters
 * (`params`), means it: the shorter side must have 4 letters, so `width` does not mean `id`.
 * Otherwise the nearest by edit distance, if within a third of the longer name (at least 2 edits).
 */
export function closestField(name: string, known: readonly string[]): string | undefined {
  const wanted = normalise(name);
  if (wanted === '') return undefined;
  let best: { field: string; score: number } | undefined;
  for (const field of known) {
    const score = closeness(wanted, normalise(field));
    if (score !== undefined && (best === undefined || score < best.score)) best = { field, score };
  }
  return best?.field;
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
