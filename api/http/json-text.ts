/**
 * Text as a JSON request body, bounded in nesting: pure, so the regional API (read-json.ts) and
 * the edge gateway (api/edge/) parse bodies with the same rules and the same refusals.
 */
import { errorMessage, InvalidInputError } from '../../infra/kernel/errors.ts';

/**
 * Deepest nesting of arrays and objects a body may have. A request's real structure is a few
 * levels (a tensor's data nests once per dimension); a body nested thousands deep parses fine
 * but overflows the stack of whatever walks it next (validation, JSON.stringify into Redis),
 * which answered 500 before this bound (found by the chaos suite's fuzzer).
 */
export const MAX_JSON_DEPTH = 64;

/** Text as a JSON body: 400 `malformed_json` for bad or too deeply nested JSON. */
export function parseJsonText(text: string): unknown {
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch (err) {
    const reason = errorMessage(err);
    throw new InvalidInputError('malformed_json', `request body is not valid JSON: ${reason}`, { cause: err });
  }
  if (nestingDepth(body) > MAX_JSON_DEPTH) {
    throw new InvalidInputError('malformed_json', `request body nests arrays and objects more than ${MAX_JSON_DEPTH} deep`);
  }
  return body;
}

/**
 * The deepest nesting of arrays and objects in a parsed body, walked with a stack of its own (no
 * recursion, so safe however deep V8's iterative JSON.parse went), stopping once past the bound.
 * Walking the parsed value, not the text: its cost is one step per array element and object
 * member, where a character scan paid for every byte — a 2 MB string is one step, not 2 M (the
 * hostile-tenant chaos scenario's large refused bodies held the event loop twice as long).
 */
export function nestingDepth(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  let max = 0;
  const stack: Array<{ node: object; depth: number }> = [{ node: value, depth: 1 }];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    if (top.depth > max) {
      max = top.depth;
      if (max > MAX_JSON_DEPTH) return max;
    }
    const children = Array.isArray(top.node) ? top.node : Object.values(top.node);
    for (const child of children) if (child !== null && typeof child === 'object') stack.push({ node: child, depth: top.depth + 1 });
  }
  return max;
}
