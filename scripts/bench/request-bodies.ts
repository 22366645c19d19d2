/**
 * The JSON bodies the load generator sends (`{"inputs": [OIP tensors]}`), in bounded memory.
 *
 * Every request's rows must differ from every other's, or the result cache answers them and no
 * job is ever queued. What makes a row distinct is its head: the first HEAD_VALUES values, as
 * `benchValue` makes them for the row's seed (a float row's first value is its index, an integer
 * row's first 20 values its bits). The rest of a row (its tail) carries no identity, so it comes
 * from a small pool of distinct rows, serialized once and cycled. A body is then a few small
 * strings around a cached one: a model of 27,648 floats a row costs the pool's 64 tails (a few
 * MB), never one JSON per request held up front (which took a real PaddleOCR classifier past
 * the 4 GB heap after six minutes).
 */

import { isMoved, modelShape, toModelLayout } from '../../infra/contracts/batch-axes.ts';
import { isNumericDatatype, itemBytes } from '../../infra/contracts/datatypes.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { fromJsonData, wireBytes } from '../../infra/contracts/packed-tensors.ts';
import { benchInputs, benchValue, rowWidth } from './bench-models.ts';

export const BODY_POOL_SIZE = 64;

/** Values at the start of each row made per request: enough for benchValue's distinct rows. */
export const HEAD_VALUES = 20;

/** Seeds of the pool's tails: far from the seeds the bench's runs use, though any would do. */
const POOL_SEED = 900_000_000;

/** Request bodies of `rows` rows each: `body(seed)` is distinct per seed, in memory bounded by the pool. */
export function requestBodies(manifest: Pick<ModelManifest, 'inputs'>, rows: number, poolSize = BODY_POOL_SIZE): (seed: number) => string {
  if (isPlanned(manifest)) return (seed) => JSON.stringify({ inputs: modelLayoutInputs(manifest, rows, seed) });
  const inputs = manifest.inputs.map((spec) => {
    const width = rowWidth(spec);
    const head = Math.min(HEAD_VALUES, width);
    const opening = JSON.stringify({ name: spec.name, datatype: spec.datatype, shape: [rows, ...spec.shape.slice(1)] });
    // One tail per pool slot and row: ",v,v,…" (empty when the head is the whole row).
    const tails = Array.from({ length: poolSize }, (_, slot) =>
      Array.from({ length: rows }, (_, r) => {
        if (head === width) return '';
        const tail = new Array<number | boolean>(width - head);
        for (let j = head; j < width; j++) tail[j - head] = benchValue(spec.datatype, width, POOL_SEED + slot * rows, r * width + j);
        return `,${tail.join(',')}`;
      }),
    );
    return { spec, width, head, prefix: `${opening.slice(0, -1)},"data":[`, tails };
  });
  return (seed) => {
    const slot = ((seed % poolSize) + poolSize) % poolSize;
    const tensors = inputs.map(({ spec, width, head, prefix, tails }) => {
      const rowText: string[] = [];
      for (let r = 0; r < rows; r++) {
        const values = new Array<number | boolean>(head);
        for (let j = 0; j < head; j++) values[j] = benchValue(spec.datatype, width, seed, r * width + j);
        rowText.push(values.join(',') + (tails[slot]?.[r] ?? ''));
      }
      return `${prefix}${rowText.join(',')}]}`;
    });
    return `{"inputs":[${tensors.join(',')}]}`;
  };
}

/**
 * The same requests as `requestBodies` in the OIP binary tensor extension's form (the JSON
 * header, then each input's little-endian bytes): `body(seed)` holds exactly the elements of
 * `requestBodies(…)(seed)`, so `binary_vs_json` compares the two forms of the same rows. The
 * header is the same for every seed, so its length is one header value for the whole run.
 */
export function binaryRequestBodies(
  manifest: Pick<ModelManifest, 'inputs'>,
  rows: number,
  poolSize = BODY_POOL_SIZE,
): {
  headerLength: number;
  /** The inputs as the header names them (the same for every seed). */
  inputs: Array<{ name: string; datatype: string; shape: number[] }>;
  /** Each input's bytes for `seed`, in input order (gRPC's raw_input_contents). */
  parts: (seed: number) => Buffer[];
  body: (seed: number) => Buffer;
} {
  if (isPlanned(manifest)) return plannedBinaryBodies(manifest, rows);
  const tensors = manifest.inputs.map((spec) => {
    const width = rowWidth(spec);
    const head = Math.min(HEAD_VALUES, width);
    if (!isNumericDatatype(spec.datatype))
      throw new Error(`binaryRequestBodies: input "${spec.name}" is ${spec.datatype}; the bench's models are numeric`);
    const item = itemBytes(spec.datatype);
    // One whole tensor per pool slot, as bytes; a request overwrites each row's head.
    const slots = Array.from({ length: poolSize }, (_, slot) => {
      const values = new Array<number | boolean>(rows * width);
      for (let k = 0; k < values.length; k++) values[k] = benchValue(spec.datatype, width, POOL_SEED + slot * rows, k);
      return Buffer.from(wireBytes(spec.datatype, fromJsonData(spec.datatype, values)));
    });
    return { spec, width, head, item, slots };
  });
  const inputs = tensors.map(({ spec }) => ({ name: spec.name, datatype: spec.datatype, shape: [rows, ...spec.shape.slice(1)] }));
  const header = Buffer.from(
    JSON.stringify({
      inputs: tensors.map(({ slots }, i) => ({ ...inputs[i], parameters: { binary_data_size: (slots[0] as Buffer).byteLength } })),
    }),
  );
  const parts = (seed: number) => {
    const slot = ((seed % poolSize) + poolSize) % poolSize;
    return tensors.map(({ spec, width, head, item, slots }) => {
      const bytes = Buffer.from(slots[slot] as Buffer);
      for (let r = 0; r < rows; r++) {
        const values = new Array<number | boolean>(head);
        for (let j = 0; j < head; j++) values[j] = benchValue(spec.datatype, width, seed, r * width + j);
        bytes.set(wireBytes(spec.datatype, fromJsonData(spec.datatype, values)), r * width * item);
      }
      return bytes;
    });
  };
  return { headerLength: header.byteLength, inputs, parts, body: (seed) => Buffer.concat([header, ...parts(seed)]) };
}

/** A model that keeps its rows elsewhere than axis 0 (batch-axes.ts): its bodies are made whole, in its own layout. */
function isPlanned(manifest: Pick<ModelManifest, 'inputs'>): boolean {
  return manifest.inputs.some((s) => isMoved(s.batchAxis));
}

/**
 * `benchInputs`' rows in the model's own layout: a batched input's rows moved to its axis, one with
 * no batch axis given once (its first row's values). Built per request: such models are the rare
 * case, so the pooled tails above are not worth their bookkeeping here.
 */
function modelLayoutInputs(manifest: Pick<ModelManifest, 'inputs'>, rows: number, seed: number) {
  return benchInputs(manifest, rows, seed).map((t, i) => {
    const axis = manifest.inputs[i]?.batchAxis;
    return { ...t, shape: modelShape(t.shape, axis), data: toModelLayout(t.data, t.shape, axis) };
  });
}

function plannedBinaryBodies(manifest: Pick<ModelManifest, 'inputs'>, rows: number): ReturnType<typeof binaryRequestBodies> {
  const bytesOf = (seed: number) =>
    modelLayoutInputs(manifest, rows, seed).map((t) => Buffer.from(wireBytes(t.datatype, fromJsonData(t.datatype, t.data))));
  const first = modelLayoutInputs(manifest, rows, 0);
  const sizes = bytesOf(0).map((b) => b.byteLength);
  const inputs = first.map(({ name, datatype, shape }) => ({ name, datatype, shape }));
  const header = Buffer.from(JSON.stringify({ inputs: inputs.map((t, i) => ({ ...t, parameters: { binary_data_size: sizes[i] } })) }));
  return { headerLength: header.byteLength, inputs, parts: bytesOf, body: (seed) => Buffer.concat([header, ...bytesOf(seed)]) };
}
