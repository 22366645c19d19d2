/** Small request helpers shared by the routes. */
import type { Context } from 'hono';
import type { z } from 'zod';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { bodyLimitOf } from './body-limit.ts';
import { readBody } from './content-encoding.ts';
import { parseJsonText } from './json-text.ts';

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/**
 * The body as JSON: 415 for another content type (unless `types` is 'any': the caller has
 * already decided the body is JSON), 400 `malformed_json` for bad or too deeply nested JSON. A
 * compressed body (Content-Encoding) is decompressed first, within the body limit.
 */
export async function readJson(c: Context, types: 'json' | 'any' = 'json'): Promise<unknown> {
  const type = c.req.header('content-type') ?? '';
  if (types === 'json' && !JSON_TYPE.test(type)) {
    throw new InvalidInputError('unsupported_media_type', `send the body as application/json (got ${type || 'no content type'})`, {
      status: 415,
    });
  }
  // No Content-Encoding (nearly every request): node-server hands the text straight from the socket.
  const text = c.req.header('content-encoding') === undefined ? await c.req.text() : (await readBody(c, bodyLimitOf(c))).toString('utf8');
  return parseJsonText(text);
}

/** A parsed JSON body checked against `schema`: 400 `invalid_body` naming each field that is wrong. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const message = result.error.issues.map((i) => `${i.path.length > 0 ? i.path.join('.') : 'body'}: ${i.message}`).join('; ');
  throw new InvalidInputError('invalid_body', message, { cause: result.error });
}
