/**
 * What the load generator sends to a stack: the route, the headers and request i's body, for a
 * model's single-row requests as JSON numbers or OIP binary tensor data. A target also carries
 * its recipe — the same target as data — so a generator in another process (open-loop-child.ts)
 * makes the very same bodies.
 */
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import type { BodyForm, SubmitTarget, TargetRecipe } from './load.ts';
import { binaryRequestBodies, requestBodies } from './request-bodies.ts';

/** The submit route's target for `manifest`'s single-row requests, in either body form. */
export function submitTarget(
  url: string,
  manifest: Pick<ModelManifest, 'name' | 'inputs'>,
  headers: Record<string, string> = {},
  form: BodyForm = 'json',
): SubmitTarget {
  const path = `/v1/models/${manifest.name}/jobs`;
  const recipe: TargetRecipe = { url, path, manifest: { name: manifest.name, inputs: manifest.inputs }, headers, form, seed: 0 };
  if (form === 'json')
    return { url, path, headers: { ...headers, 'content-type': 'application/json' }, body: requestBodies(manifest, 1), recipe };
  const { headerLength, body } = binaryRequestBodies(manifest, 1);
  const binaryHeaders = { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(headerLength) };
  return { url, path, headers: { ...headers, ...binaryHeaders }, body, recipe };
}

/** `target` sent to sync inference (POST /v2/models/{m}/infer) instead of the async submit route. */
export function inferTarget(target: SubmitTarget, manifest: Pick<ModelManifest, 'name'>): SubmitTarget {
  const path = `/v2/models/${manifest.name}/infer`;
  return { ...target, path, ...(target.recipe ? { recipe: { ...target.recipe, path } } : {}) };
}

/** `target` with request i's body the one of request `offset + i`: a run's rows apart from every other run's. */
export function withSeed(target: SubmitTarget, offset: number): SubmitTarget {
  return {
    ...target,
    body: (i) => target.body(offset + i),
    ...(target.recipe ? { recipe: { ...target.recipe, seed: target.recipe.seed + offset } } : {}),
  };
}

/** The target a recipe describes, made again (in the generator's own process). */
export function targetFrom(recipe: TargetRecipe): SubmitTarget {
  const made = submitTarget(recipe.url, recipe.manifest, recipe.headers, recipe.form);
  return withSeed({ ...made, path: recipe.path }, recipe.seed);
}
