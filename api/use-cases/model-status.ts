/**
 * OIP model metadata and model readiness, for every transport that speaks the protocol (the
 * HTTP routes in api/routes/oip.ts, the gRPC service in api/grpc/).
 */
import { modelShape } from '../../infra/contracts/batch-axes.ts';
import type { ModelManifest, TensorSpec } from '../../infra/contracts/manifest.ts';
import { NotFoundError } from '../../infra/kernel/errors.ts';
import { resolveManifest } from './job-target.ts';
import type { SubmitJobDeps } from './submit-job.ts';

export type ModelStatusDeps = Pick<SubmitJobDeps, 'catalog' | 'deployments' | 'random'>;

export interface ModelMetadata {
  name: string;
  versions: string[];
  platform: 'onnxruntime_onnx';
  inputs: TensorSpec[];
  outputs: TensorSpec[];
}

/** The version asked for, else the deployed one, else the registry's latest; 404 when unknown. */
export async function modelMetadata(deps: ModelStatusDeps, model: string, version: string | undefined): Promise<ModelMetadata> {
  const manifest = await resolveManifest(deps, model, version);
  return {
    name: manifest.name,
    versions: await deps.catalog.listVersions(manifest.name),
    platform: 'onnxruntime_onnx',
    inputs: manifest.inputs.map(tensorMetadata),
    outputs: manifest.outputs.map(tensorMetadata),
  };
}

/**
 * Ready = deployed (with a traffic share, for a named version), and in the registry. Resolves
 * with the version that is ready; a NotFoundError `model_not_ready` says why not.
 */
export async function modelReady(
  deps: ModelStatusDeps,
  model: string,
  asked: string | undefined,
): Promise<{ name: string; version: string }> {
  const deployment = await deps.deployments.get(model);
  if (!deployment) throw new NotFoundError('model_not_ready', `model ${model} is not deployed`);
  const version = asked ?? deployment.version;
  if (!deployment.versions.some((v) => v.version === version && v.weight > 0)) {
    throw new NotFoundError('model_not_ready', `model ${model} version ${version} takes no traffic in its deployment`);
  }
  const manifest: ModelManifest | null = await deps.catalog.getManifest(model, version).catch((err: unknown) => {
    if (err instanceof NotFoundError) return null;
    throw err;
  });
  if (!manifest) throw new NotFoundError('model_not_ready', `model ${model} version ${version} is not in the registry`);
  return { name: model, version };
}

/** In the model's own layout: a client sends and receives the shapes the model declares (batch-axes.ts). */
function tensorMetadata(t: TensorSpec): TensorSpec {
  return { name: t.name, datatype: t.datatype, shape: modelShape(t.shape, t.batchAxis) };
}
