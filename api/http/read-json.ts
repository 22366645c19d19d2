/** Small request helpers shared by the routes. */
import type { Context } from 'hono';
import { errorMessage, InvalidInputError } from '../../infra/kernel/errors.ts';

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * Deepest nesting of arrays and objects a body may have. A request's real structure is a few
 * levels (a tensor's data nests once per dimension); a body nested thousands deep parses fine
 * but overflows the stack of whatever walks it next (validation, JSON.stringify into Redis),
 * which answered 500 before this bound (found by the chaos suite's fuzzer).
 */
export const MAX_JSON_DEPTH = 64;

/** The body as JSON: 415 for another content type, 400 `malformed_json` for bad or too deeply nested JSON. */
export async function readJson(c: Context): Promise<unknown> {
  const type = c.req.header('content-type') ?? '';
  if (!JSON_TYPE.test(type)) {
    throw new InvalidInputError('unsupported_media_type', `send the body as application/json (got ${type || 'no content type'})`, {
      status: 415,
    });
  }
  const text = await c.req.text();
  const depth = nestingDepth(text);
  if (depth > MAX_JSON_DEPTH) {
    throw new InvalidInputError('malformed_json', `request body nests arrays and objects more than ${MAX_JSON_DEPTH} deep`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const reason = errorMessage(err);
    throw new InvalidInputError('malformed_json', `request body is not valid JSON: ${reason}`, { cause: err });
  }
}

/**
 * The deepest bracket nesting in JSON text, outside strings: one linear pass, no recursion, so
 * it is safe on any input (and stops counting once past the bound). Invalid JSON gives some
 * number; JSON.parse then rejects it.
 */
export function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c)
        i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) {
      inString = true;
    } else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) max = depth;
      if (max > MAX_JSON_DEPTH) return max;
    } else if (ch === 0x5d || ch === 0x7d) {
      depth--;
    }
  }
  return max;
}
