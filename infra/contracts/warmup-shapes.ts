/**
 * The manifest's warm-up shape hints (`batching.warmupShapes`, DESIGN §3): per input, the
 * non-batch dimensions a worker's warm-up runs it with. A vision model takes images of any size
 * (`x` [-1, 3, -1, -1]); warm-up must pick one, and the size its users send is the one whose
 * batch profile means something. One check, used where a manifest is written (the registry's
 * publish) and where a stored one is read back, so a worker never warms up on a shape that
 * cannot fit the model's declared inputs.
 */
import type { TensorSpec } from './manifest.ts';

/**
 * Why `shapes` cannot be the warm-up shapes of a model with `inputs`, or undefined when it can:
 * each names an input, gives one positive integer per dimension after the batch axis, and
 * repeats every dimension the model fixes.
 */
export function warmupShapesProblem(inputs: readonly TensorSpec[], shapes: unknown): string | undefined {
  if (typeof shapes !== 'object' || shapes === null || Array.isArray(shapes)) {
    return `warm-up shapes are an object of dimension lists by input name (got ${JSON.stringify(shapes)})`;
  }
  for (const [name, dims] of Object.entries(shapes)) {
    const input = inputs.find((i) => i.name === name);
    if (!input) return `warm-up shape for ${name}: the model has no such input (its inputs: ${inputs.map((i) => i.name).join(', ')})`;
    const rest = input.shape.slice(1);
    const shown = `[${input.shape.join(', ')}]`;
    if (!Array.isArray(dims) || dims.some((d) => !Number.isInteger(d) || d < 1)) {
      return `warm-up shape for ${name}: dimensions are positive integers (got ${JSON.stringify(dims)})`;
    }
    if (dims.length !== rest.length) {
      return `warm-up shape for ${name} gives ${dims.length} dimension(s); the input has ${rest.length} after the batch axis (shape ${shown})`;
    }
    const fixed = rest.findIndex((d, i) => d >= 0 && d !== dims[i]);
    if (fixed >= 0) {
      return `warm-up shape for ${name}: dimension ${fixed + 1} is fixed at ${rest[fixed]} by the model, not ${dims[fixed]} (shape ${shown})`;
    }
  }
  return undefined;
}

/** `shapes` in the model's input order, each dimension list copied: two publishes of the same hints compare equal. */
export function normaliseWarmupShapes(inputs: readonly TensorSpec[], shapes: Readonly<Record<string, number[]>>): Record<string, number[]> {
  // Own keys only, built with fromEntries: an input may be named `__proto__`.
  return Object.fromEntries(inputs.flatMap((i) => (Object.hasOwn(shapes, i.name) ? [[i.name, [...(shapes[i.name] ?? [])]]] : [])));
}

/**
 * The inputs whose warm-up size is the worker's guess: a dynamic dimension after the batch axis
 * (an image's height and width) and no warm-up shape for it. Publishing such a model without
 * `--warmup-shape` is allowed, but its batch profile is measured at a size nobody sends.
 */
export function inputsWithoutWarmupShape(inputs: readonly TensorSpec[], shapes: Readonly<Record<string, number[]>> = {}): TensorSpec[] {
  return inputs.filter((i) => i.shape.slice(1).some((d) => d < 0) && !Object.hasOwn(shapes, i.name));
}

/**
 * `--warmup-shape x:3,H,W`: the flag that sizes an input for warm-up, its fixed dimensions as
 * the model has them and the dynamic ones named (C, H, W for an image's three, N otherwise).
 */
export function warmupShapeFlag(input: TensorSpec): string {
  const rest = input.shape.slice(1);
  const dims = rest.map((d, i) => (d >= 0 ? String(d) : rest.length === 3 ? (['C', 'H', 'W'][i] ?? 'N') : 'N'));
  return `--warmup-shape ${input.name}:${dims.join(',')}`;
}
