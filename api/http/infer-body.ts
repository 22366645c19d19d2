/**
 * An inference request's body as the routes take it: JSON, or the OIP binary tensor extension's
 * JSON header followed by tensor bytes (infra/contracts/oip-binary.ts), either of them possibly
 * compressed (`Content-Encoding: gzip|deflate`, content-encoding.ts; the body limit then holds for
 * the decompressed bytes). Binary when the request sends `Inference-Header-Content-Length`, as
 * Triton decides; its content type may then be anything (tritonclient sends none, curl users
 * send application/octet-stream).
 */
import type { Context } from 'hono';
import { INFERENCE_HEADER_LENGTH, splitBinaryBody } from '../../infra/contracts/oip-binary.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { bodyLimitOf } from './body-limit.ts';
import { readBody } from './content-encoding.ts';
import { parseJsonText } from './json-text.ts';
import { readJson } from './read-json.ts';

export interface InferBody {
  /** The JSON body, or the binary body's JSON header. */
  body: unknown;
  /** Binary inputs' bytes by input name; absent for a JSON body. */
  binary?: Map<string, Uint8Array>;
}

/**
 * JSON bodies of any JSON content type, or with none (tritonclient's JSON requests carry no
 * Content-Type) or application/octet-stream without the header (Triton reads those as JSON too).
 */
const JSON_OR_UNTYPED = /^(?:application\/(?:[\w.+-]+\+)?json|application\/octet-stream)?\s*(?:;|$)/i;

const OCTET_STREAM = /^application\/octet-stream\s*(?:;|$)/i;

export async function readInferBody(c: Context): Promise<InferBody> {
  const headerLength = c.req.header(INFERENCE_HEADER_LENGTH);
  if (headerLength === undefined) {
    const type = c.req.header('content-type') ?? '';
    try {
      return { body: await readJson(c, JSON_OR_UNTYPED.test(type) ? 'any' : 'json') };
    } catch (err) {
      throw OCTET_STREAM.test(type) ? withoutHeaderLength(err) : err;
    }
  }
  const bytes = await readBody(c, bodyLimitOf(c));
  if (bytes.byteLength === 0) {
    throw new InvalidInputError('invalid_header_length', 'Inference-Header-Content-Length is set but the request has no body');
  }
  const { header, tensors } = splitBinaryBody(bytes, headerLength, parseJsonText);
  return tensors.size > 0 ? { body: header, binary: tensors } : { body: header };
}

/**
 * An application/octet-stream body that is not JSON is most likely binary tensor data sent
 * without its framing header (curl with --data-binary and no -H for it): the JSON parser's
 * complaint about the bytes after the header would not say what is missing, so this does.
 */
function withoutHeaderLength(err: unknown): unknown {
  if (!(err instanceof InvalidInputError) || err.code !== 'malformed_json') return err;
  return new InvalidInputError(
    'missing_header_length',
    `an application/octet-stream body that is not JSON needs the Inference-Header-Content-Length header: the byte length of its JSON part, which the tensor bytes follow (docs/PROTOCOLS.md, "Binary tensor data over HTTP"); ${err.message}`,
    { cause: err },
  );
}
