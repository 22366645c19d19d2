/**
 * Answers that carry output tensors (a job resource, a sync inference response) as JSON text,
 * made from the outputs' packed elements (packed-tensors.ts's rowsTensor views) a slice at a
 * time, with no JS array of numbers for the whole tensor: `jsonParts` yields the text in parts
 * of at most `sliceElements` elements, so a caller can hand each part to the socket and let the
 * event loop run between them. Before any of that, `outputElements` and `jsonBytesBound` say
 * from the shapes alone (nothing decoded) how many elements the answer holds and how many bytes
 * its JSON can take at most: what MAX_JSON_OUTPUT_ELEMENTS bounds and what the tenant's byte
 * budget is charged.
 *
 * The text is what JSON.stringify makes of the same body (rowsTensor's `data`: BOOL as booleans,
 * FP16 decoded, 64-bit past 2^53 as decimal strings, NaN and ±inf as null), keys in the body's
 * order. Pure, no I/O.
 */
import { DATATYPE_INFO, type Datatype, type PackedArray } from './datatypes.ts';
import type { OipTensor } from './oip.ts';
import { elementsOf, jsonValues, packedView, type TensorData } from './packed-tensors.ts';

/**
 * Elements per part, measured (scripts/bench/json-output.ts, on a shared 2-core machine): 4 Ki
 * FP32 elements are ~75 KB of text and 0.75 ms of one core (4–10 ms at worst under load), where
 * the whole answer of 1 Mi elements held the event loop 610 ms. Smaller parts add a turn of the
 * loop each for nothing a caller notices; the whole answer took 13% longer in parts.
 */
export const JSON_SLICE_ELEMENTS = 4096;

/** The elements of `outputs` (each shape's product), read from the shapes alone. */
export function outputElements(outputs: readonly Pick<OipTensor, 'shape'>[]): number {
  let n = 0;
  for (const t of outputs) n += elementsOf(t.shape);
  return n;
}

/**
 * The most bytes one element of a fixed-size datatype takes as JSON, its comma included, from
 * the datatype table: integers their widest bound (64-bit ones quoted, as past 2^53), BOOL
 * `false`, floats 24 (a sign, 17 significant digits, a point and `e-308`: the longest shortest
 * round-trip form of any double, which every FP16 and FP32 value also is).
 */
export function maxJsonElementBytes(datatype: Exclude<Datatype, 'BYTES'>): number {
  const info = DATATYPE_INFO[datatype];
  switch (info.kind) {
    case 'bool':
      return 'false,'.length;
    case 'int':
    case 'int64': {
      const quotes = info.kind === 'int64' ? 2 : 0;
      return Math.max(String(info.min).length, String(info.max).length) + quotes + 1;
    }
    default:
      return 24 + 1;
  }
}

/**
 * An upper bound of the body's JSON bytes: the rest of the body as it is, plus each output's
 * elements at their widest (BYTES: 6 per UTF-16 unit, `\\u001f` being the longest escape, plus
 * quotes and comma). Reads shapes and string lengths, never a number.
 */
export function jsonBytesBound(body: object): number {
  const outputs = outputsOf(body);
  let bound = Buffer.byteLength(JSON.stringify(skeleton(body, outputs)));
  for (const t of outputs) {
    if (!Object.hasOwn(t, 'data')) continue; // a binary output's entry in a binary answer's header
    if (t.datatype !== 'BYTES') {
      bound += elementsOf(t.shape) * maxJsonElementBytes(t.datatype);
      continue;
    }
    const strings = (packedView(t) ?? t.data) as readonly string[];
    let units = 0;
    for (const s of strings) units += s.length;
    bound += 6 * units + 3 * strings.length;
  }
  return bound;
}

/** The body's JSON text in parts; each output's data a slice of at most `sliceElements` elements at a time. */
export function* jsonParts(body: object, sliceElements = JSON_SLICE_ELEMENTS): Generator<string> {
  let sep = '{';
  for (const key of Object.keys(body)) {
    const value = (body as Record<string, unknown>)[key];
    if (value === undefined) continue;
    yield `${sep}${JSON.stringify(key)}:`;
    sep = ',';
    if (key === 'outputs' && Array.isArray(value)) yield* outputsParts(value as OipTensor[], sliceElements);
    else yield JSON.stringify(value) ?? 'null';
  }
  yield sep === '{' ? '{}' : '}';
}

function* outputsParts(outputs: readonly OipTensor[], sliceElements: number): Generator<string> {
  yield '[';
  for (let i = 0; i < outputs.length; i++) {
    const t = outputs[i] as OipTensor;
    let sep = i === 0 ? '{' : ',{';
    for (const key of Object.keys(t)) {
      if (key !== 'data') {
        const value = (t as unknown as Record<string, unknown>)[key];
        if (value !== undefined) yield `${sep}${JSON.stringify(key)}:${JSON.stringify(value)}`;
      } else {
        yield `${sep}"data":[`;
        yield* dataParts(t, sliceElements);
        yield ']';
      }
      sep = ',';
    }
    yield '}';
  }
  yield ']';
}

/** A tensor's elements as JSON, without brackets, slice by slice. Never reads rowsTensor's `data` accessor. */
function* dataParts(t: OipTensor, sliceElements: number): Generator<string> {
  const kept = packedView(t);
  const data: TensorData | OipTensor['data'] = kept ?? t.data;
  for (let from = 0; from < data.length; from += sliceElements) {
    const to = Math.min(data.length, from + sliceElements);
    const text = kept ? sliceText(t.datatype, kept, from, to) : JSON.stringify(data.slice(from, to)).slice(1, -1);
    yield from === 0 ? text : `,${text}`;
  }
}

/**
 * Elements [from, to) as JSON. Plain numbers (8–32-bit integers, FP32, FP64) by the typed
 * array's own join, which prints each as JSON does, unless the slice holds NaN or ±inf (the
 * only numbers whose text has an N or an I), which JSON writes as null; the rest by their JSON
 * values (datatypes.ts's jsonElement), one slice at a time.
 */
function sliceText(datatype: Datatype, data: TensorData, from: number, to: number): string {
  if (Array.isArray(data)) return JSON.stringify(data.slice(from, to)).slice(1, -1);
  const part = (data as PackedArray).subarray(from, to);
  const kind = DATATYPE_INFO[datatype].kind;
  if (kind === 'int') return part.join(',');
  if (kind === 'float') {
    const text = part.join(',');
    if (!text.includes('N') && !text.includes('I')) return text;
  }
  return JSON.stringify(jsonValues(datatype, part)).slice(1, -1);
}

function outputsOf(body: object): OipTensor[] {
  const outputs = (body as { outputs?: unknown }).outputs;
  return Array.isArray(outputs) ? (outputs as OipTensor[]) : [];
}

/** The body with each output's data left empty: its JSON is the answer's fixed part. */
function skeleton(body: object, outputs: readonly OipTensor[]): object {
  if (outputs.length === 0) return body;
  return {
    ...body,
    outputs: outputs.map((t) => {
      const copy: Record<string, unknown> = {};
      for (const key of Object.keys(t)) copy[key] = key === 'data' ? [] : (t as unknown as Record<string, unknown>)[key];
      return copy;
    }),
  };
}
