/** Small request helpers shared by the routes. */
import type { Context } from 'hono';
import { InvalidInputError } from '../../infra/errors.ts';

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;

/** The body as JSON: 415 for another content type, 400 `malformed_json` for bad JSON. */
export async function readJson(c: Context): Promise<unknown> {
  const type = c.req.header('content-type') ?? '';
  if (!JSON_TYPE.test(type)) {
    throw new InvalidInputError('unsupported_media_type', `send the body as application/json (got ${type || 'no content type'})`, {
      status: 415,
    });
  }
  const text = await c.req.text();
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new InvalidInputError('malformed_json', `request body is not valid JSON: ${reason}`, { cause: err });
  }
}
