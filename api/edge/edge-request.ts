/**
 * An inference request's body checked at the edge before anything is forwarded: read within the
 * body limit, decoded per Content-Encoding within it (DecompressionStream, no zlib), split when it
 * is binary tensor data, and validated against the specs of every version it may run on. It
 * refuses only what the region would refuse whichever version the traffic split draws, with the
 * region's codes and messages (the same modules make them: json-text.ts, request-coding.ts,
 * infra/contracts/oip-binary.ts and oip-validate.ts). The bytes forwarded are the bytes sent.
 */
import { splitBinaryBody } from '../../infra/contracts/oip-binary.ts';
import { type ValidateLimits, validateInferRequest } from '../../infra/contracts/oip-validate.ts';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import { parseJsonText } from '../http/json-text.ts';
import { requestCoding, zlibHeader } from '../http/request-coding.ts';
import type { EdgeCatalogModel, EdgeCatalogVersion } from '../use-cases/edge-catalog.ts';

function tooLarge(limitBytes: number, coding?: string): InvalidInputError {
  const after = coding ? ` once decompressed (Content-Encoding: ${coding})` : '';
  return new InvalidInputError('body_too_large', `request body is larger than ${limitBytes} bytes${after}`, { status: 413 });
}

/** A stream's bytes, refused with 413 the moment they pass `limitBytes`. */
async function readCapped(stream: ReadableStream<Uint8Array> | null, limitBytes: number, coding?: string): Promise<Uint8Array> {
  if (stream === null) return new Uint8Array(0);
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limitBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(limitBytes, coding);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.byteLength;
  }
  return out;
}

/** The request body as sent, at most `limitBytes` (Content-Length is checked before a byte is read). */
export async function readSentBody(request: Request, limitBytes: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get('content-length') ?? Number.NaN);
  if (Number.isFinite(declared) && declared > limitBytes) throw tooLarge(limitBytes);
  return readCapped(request.body, limitBytes);
}

/** The sent bytes decoded per `Content-Encoding`, at most `limitBytes` once decoded. */
export async function decodedBody(sent: Uint8Array, contentEncoding: string | null, limitBytes: number): Promise<Uint8Array> {
  const coding = requestCoding(contentEncoding ?? undefined);
  if (coding === undefined || sent.byteLength === 0) return sent;
  const format = coding.coding === 'gzip' ? 'gzip' : zlibHeader(sent) ? 'deflate' : 'deflate-raw';
  try {
    const stream = new Blob([sent as BlobPart]).stream().pipeThrough(new DecompressionStream(format));
    return await readCapped(stream, limitBytes, coding.name);
  } catch (err) {
    if (err instanceof InvalidInputError) throw err;
    const why = err instanceof Error ? err.message : String(err);
    throw new InvalidInputError('malformed_body', `request body could not be decompressed as ${coding.name}: ${why}`);
  }
}

export interface ParsedInfer {
  body: unknown;
  binary?: Map<string, Uint8Array>;
}

/** The JSON body, or the binary body's header and tensors (as api/http/infer-body.ts reads them). */
export function parseInferBody(bytes: Uint8Array, headerLength: string | null): ParsedInfer {
  if (headerLength === null) return { body: parseJsonText(new TextDecoder().decode(bytes)) };
  if (bytes.byteLength === 0) {
    throw new InvalidInputError('invalid_header_length', 'Inference-Header-Content-Length is set but the request has no body');
  }
  const { header, tensors } = splitBinaryBody(bytes, headerLength, parseJsonText);
  return tensors.size > 0 ? { body: header, binary: tensors } : { body: header };
}

/** The versions a request may run on: the one it names, else the serving ones; 404 as the region answers. */
export function candidateVersions(model: EdgeCatalogModel, version: string | undefined): EdgeCatalogVersion[] | 'unchecked' {
  if (version === undefined) return model.serving;
  if (!model.versions.includes(version)) throw new NotFoundError('version_not_found', `model ${model.name} has no version ${version}`);
  const serving = model.serving.find((v) => v.version === version);
  // A version out of traffic: its specs are not in the catalog; the region checks it.
  return serving ? [serving] : 'unchecked';
}

/**
 * Refuses the request when it is invalid for every candidate version, with the first version's
 * refusal (the region's answer whichever it draws); passes when any version accepts it.
 */
export function checkAtEdge(versions: EdgeCatalogVersion[], parsed: ParsedInfer, limits: ValidateLimits): void {
  let first: unknown;
  for (const v of versions) {
    try {
      validateInferRequest(parsed.body, v, limits, parsed.binary);
      return;
    } catch (err) {
      if (!(err instanceof InvalidInputError)) throw err;
      first ??= err;
    }
  }
  if (first !== undefined) throw first;
}
