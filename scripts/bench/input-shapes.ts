/**
 * `warmpool bench --model FILE --input-shape …`: the non-batch dimensions the bench gives a
 * model's dynamic axes. Users' vision models take images of any size ([batch, 3, H, W]), but the
 * bench has to make up rows, and the worker's warm-up has to run batches, of one size. The text
 * is `3,48,192` for the model's single input, or `NAME:3,48,192;NAME2:16` for several. A
 * dimension the model fixes may be repeated, never changed.
 *
 * The bench then publishes the model with those dimensions fixed in its graph inputs (what
 * onnxruntime's `make_dynamic_shape_fixed` tool does), so raw ONNX Runtime, the worker's
 * warm-up and every request run the same shape.
 */
import { createRequire } from 'node:module';
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';

const require = createRequire(import.meta.url);
const { onnx } = require('onnx-proto') as typeof import('onnx-proto');

/** The unnamed entry of a shape list: the model's single input. */
export const SINGLE_INPUT = '';

const invalid = (message: string) => new InvalidInputError('invalid_input_shape', message);

/** `3,48,192` or `NAME:3,48,192;NAME2:16` → dims per input name (SINGLE_INPUT for the unnamed form). */
export function parseInputShapes(text: string): Map<string, number[]> {
  const shapes = new Map<string, number[]>();
  const parts = text
    .split(';')
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.length === 0) throw invalid('--input-shape is empty: give the non-batch dimensions, e.g. 3,48,192');
  for (const part of parts) {
    const colon = part.lastIndexOf(':');
    const name = colon < 0 ? SINGLE_INPUT : part.slice(0, colon).trim();
    const dims = (colon < 0 ? part : part.slice(colon + 1)).split(',').map((d) => d.trim());
    if (colon >= 0 && !name) throw invalid(`--input-shape '${part}': the input name before ':' is empty`);
    if (dims.some((d) => !/^[1-9]\d*$/.test(d))) {
      throw invalid(`--input-shape '${part}': dimensions are positive integers separated by commas, e.g. 3,48,192`);
    }
    if (shapes.has(name)) throw invalid(`--input-shape gives ${name ? `input ${name}` : 'the unnamed shape'} twice`);
    shapes.set(
      name,
      dims.map((d) => Number(d)),
    );
  }
  if (shapes.has(SINGLE_INPUT) && shapes.size > 1)
    throw invalid('--input-shape: name every input (NAME:dims;NAME2:dims) when giving several');
  return shapes;
}

/**
 * The inputs with their dynamic non-batch dimensions replaced by `shapes`. Throws, naming the
 * input, when one is still dynamic, a shape names no input, has the wrong rank, or changes a
 * dimension the model fixes.
 */
export function pinInputShapes(inputs: readonly TensorSpec[], shapes: ReadonlyMap<string, number[]> = new Map()): TensorSpec[] {
  const names = inputs.map((i) => i.name);
  if (shapes.has(SINGLE_INPUT) && inputs.length !== 1) {
    throw invalid(`the model has ${inputs.length} inputs (${names.join(', ')}): name each, --input-shape 'NAME:dims;NAME2:dims'`);
  }
  for (const name of shapes.keys()) {
    if (name !== SINGLE_INPUT && !names.includes(name))
      throw invalid(`--input-shape names input ${name}; the model's inputs are ${names.join(', ')}`);
  }
  return inputs.map((input) => {
    const rest = input.shape.slice(1);
    const given = shapes.get(input.name) ?? (inputs.length === 1 ? shapes.get(SINGLE_INPUT) : undefined);
    const shown = `[${input.shape.join(', ')}]`;
    if (!given) {
      if (rest.some((d) => d < 1)) {
        const example = rest.map((d, i) => (d < 1 ? ['C', 'H', 'W', 'D'][i % 4] : String(d))).join(',');
        const flag = inputs.length === 1 ? example : `${input.name}:${example}`;
        throw invalid(`input ${input.name} has dynamic non-batch dimensions (shape ${shown}); give them with --input-shape ${flag}`);
      }
      return { ...input, shape: [...input.shape] };
    }
    if (given.length !== rest.length) {
      throw invalid(
        `--input-shape gives ${given.length} dimension(s) for input ${input.name}, which has ${rest.length} after the batch axis (shape ${shown})`,
      );
    }
    rest.forEach((d, i) => {
      if (d >= 1 && d !== given[i])
        throw invalid(`--input-shape: dimension ${i + 1} of input ${input.name} is fixed at ${d} by the model, not ${given[i]}`);
    });
    return { ...input, shape: [input.shape[0] ?? -1, ...given] };
  });
}

/** The model with each named graph input's non-batch dimensions fixed to `inputs`' shapes (the batch axis untouched). */
export function pinModelInputs(bytes: Uint8Array, inputs: readonly TensorSpec[]): Uint8Array {
  const model = onnx.ModelProto.decode(bytes);
  const byName = new Map(inputs.map((i) => [i.name, i.shape]));
  for (const value of model.graph?.input ?? []) {
    const shape = byName.get(value.name ?? '');
    const dims = value.type?.tensorType?.shape?.dim;
    if (!shape || !dims) continue;
    for (let i = 1; i < dims.length; i++) {
      const d = shape[i];
      if (d !== undefined && d >= 1) dims[i] = onnx.TensorShapeProto.Dimension.create({ dimValue: d });
    }
  }
  return onnx.ModelProto.encode(model).finish();
}
