/**
 * The sizes warm-up runs a model's dynamic non-batch dimensions at (a vision model's `x`
 * [-1, 3, -1, -1]). The manifest's warm-up shape (`batching.warmupShapes`,
 * `publish --warmup-shape x:3,48,192`) gives them; without one, warm-up tries
 * WARMUP_DIM_CANDIDATES in order, one batch-1 pass each, and profiles with the first that runs.
 * Only when every candidate fails does warm-up fail, naming the input and asking for
 * --warmup-shape. Models without such inputs run no extra pass.
 */
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { warmupShapeFlag } from '../infra/contracts/warmup-shapes.ts';
import type { InputShapes } from './batch-profile.ts';
import { EngineRejectedError, type InferenceEngine } from './engine/engine.ts';
import { representativeInputs } from './representative-inputs.ts';

/**
 * The sizes warm-up tries, in order, for the dynamic non-batch dimensions the manifest gives no
 * warm-up shape. Every such dimension of every input takes the same size at once, so inputs that
 * must agree (token ids and their attention mask) do.
 * - 32: survives the five stride-2 stages of the usual CNN backbones (ResNet, MobileNet,
 *   PaddleOCR's classifier: 32 → 1) and unpadded 3×3 stacks of a few stages, and is a short
 *   sequence for a text model (BERT-family models take up to 512 positions). Warm-up then runs
 *   every batch size at it, so it is tried first while cheap: 224² is 49× the pixels.
 * - 224: the ImageNet size, what most classifiers were trained and exported at, for the ones
 *   that need it (a fixed-size pooling or a Flatten into a dense head, deeper downsampling).
 * - 1: the size of the old warm-up and the smallest any dimension takes: dimensions that count
 *   things (boxes, tokens) of models that accept none of the above.
 * A profile taken at a made-up size is only as good as that size is to real requests: publish
 * the served size with --warmup-shape.
 */
export const WARMUP_DIM_CANDIDATES: readonly number[] = [32, 224, 1];

/** The shapes settled on, where they came from, and the candidates ONNX Runtime refused first. */
export interface SettledShapes {
  inputShapes: InputShapes;
  source: 'manifest' | 'tried';
  rejected: Array<{ inputShapes: InputShapes; error: string }>;
}

export interface ShapePlan {
  /** Per input, its non-batch dimensions: the model's fixed ones, the manifest's warm-up shape, -1 where warm-up picks. */
  template: InputShapes;
  /** Some input has dynamic non-batch dimensions: the shape is settled by a forward pass and recorded. */
  dynamic: boolean;
}

export function shapePlan(manifest: ModelManifest): ShapePlan {
  const hints = manifest.batching.warmupShapes ?? {};
  let dynamic = false;
  const template = Object.fromEntries(
    manifest.inputs.map((spec) => {
      const rest = spec.shape.slice(1);
      if (rest.some((d) => d < 0)) dynamic = true;
      const hint = Object.hasOwn(hints, spec.name) ? hints[spec.name] : undefined;
      // The registry checked the hint against the input; a stored manifest is read back through the same check.
      return [spec.name, hint && hint.length === rest.length ? [...hint] : rest.map((d) => (d < 0 ? -1 : d))];
    }),
  );
  return { template, dynamic };
}

/** Some dimension is still the warm-up's to pick. */
export function isOpen(template: InputShapes): boolean {
  return Object.values(template).some((dims) => dims.some((d) => d < 0));
}

/** The template with every open dimension at `size`. */
function withSize(template: InputShapes, size: number): InputShapes {
  return Object.fromEntries(Object.entries(template).map(([name, dims]) => [name, dims.map((d) => (d < 0 ? size : d))]));
}

/**
 * The input shapes warm-up measures with. A model with dynamic dimensions runs one batch-1 pass
 * per candidate (the manifest's shape alone, or WARMUP_DIM_CANDIDATES) until ONNX Runtime takes
 * one; a refused candidate is the model's answer, any other failure (the engine died) is thrown.
 */
export async function settleShapes(
  model: { engine: InferenceEngine; manifest: ModelManifest },
  plan: ShapePlan,
  onSettled: (settled: SettledShapes) => void,
): Promise<InputShapes> {
  if (!plan.dynamic) return plan.template;
  const open = isOpen(plan.template);
  const tries = open ? WARMUP_DIM_CANDIDATES.map((size) => withSize(plan.template, size)) : [plan.template];
  const rejected: Array<{ inputShapes: InputShapes; error: string }> = [];
  for (const inputShapes of tries) {
    try {
      await model.engine.run(representativeInputs(model.manifest, 1, inputShapes));
    } catch (err) {
      if (!(err instanceof EngineRejectedError)) throw err;
      rejected.push({ inputShapes, error: err.message });
      continue;
    }
    onSettled({ inputShapes, source: open ? 'tried' : 'manifest', rejected });
    return inputShapes;
  }
  throw new Error(noShapeMessage(model.manifest, plan.template, rejected));
}

/** Why warm-up found no shape to run, naming the inputs and the flag that fixes it. */
function noShapeMessage(manifest: ModelManifest, template: InputShapes, rejected: Array<{ inputShapes: InputShapes; error: string }>) {
  const said = (error: string) => error.replace(/\s+/g, ' ').trim().slice(0, 200);
  if (!isOpen(template)) {
    const given = Object.entries(manifest.batching.warmupShapes ?? {}).map(([name, dims]) => `${name}:${dims.join(',')}`);
    return (
      `warm-up: ONNX Runtime refused the manifest's warm-up shape (--warmup-shape ${given.join(' --warmup-shape ')}): ` +
      `${said(rejected[0]?.error ?? '')}; publish a new version with the shape the model serves`
    );
  }
  const open = manifest.inputs.filter((spec) => template[spec.name]?.some((d) => d < 0));
  const named = open.map((spec) => `${spec.name} [${spec.shape.join(', ')}]`).join(', ');
  const tried = rejected.map((r, i) => `${WARMUP_DIM_CANDIDATES[i]}: ${said(r.error)}`).join('; ');
  const flags = open.map(warmupShapeFlag).join(' ');
  return (
    `warm-up: no forward pass ran with input ${named} at any size tried for its dynamic dimensions (${tried}); ` +
    `publish the model with the size it serves: ${flags}`
  );
}
