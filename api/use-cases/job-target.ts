/**
 * The model version a job runs on, and the deployment it was drawn from: the version asked
 * for, else one drawn by the deployment's traffic split, else the registry's latest. Apart from
 * submit-job.ts because the OIP metadata routes (model-status.ts) resolve a version the same way
 * without submitting anything, and admission resolves a fallback's.
 */
import { MODEL_NAME_PATTERN, type ModelManifest } from '../../infra/contracts/manifest.ts';
import type { Fallback } from '../../infra/deployments/deployment-store.ts';
import { NotFoundError } from '../../infra/kernel/errors.ts';
import type { DeploymentLookup, ModelCatalog } from '../ports.ts';
import { chooseVersion } from './traffic-split.ts';

/** The deployment as submit reads it: the port's fields plus the fallback, its shared pool (and `min`, which a sync timeout names). */
export type SubmitDeployment = NonNullable<Awaited<ReturnType<DeploymentLookup['get']>>> & {
  fallback?: Fallback;
  min?: number;
  pool?: string;
};

/** What resolving a version reads: the registry, the deployments, and the traffic split's draw. */
export interface TargetDeps {
  catalog: ModelCatalog;
  deployments: { get(model: string): Promise<SubmitDeployment | null> };
  /** Picks a version by the deployment's traffic split; Math.random when absent. */
  random?: () => number;
}

/**
 * The version asked for, else the deployed one, else the registry's latest (the model's
 * metadata is there whether or not it is deployed). Unknown everywhere → 404.
 */
export async function resolveManifest(deps: TargetDeps, model: string, version: string | undefined): Promise<ModelManifest> {
  return (await resolveTarget(deps, model, version)).manifest;
}

/** A resolved model version, and the deployment it was drawn from (null when not deployed). */
export interface Target {
  manifest: ModelManifest;
  deployment: SubmitDeployment | null;
}

/**
 * The version a job runs on: the one asked for, else one drawn by the deployment's traffic
 * split (per job), else the registry's latest (which submit then refuses unless a worker
 * serves it: serving-check.ts). Unknown everywhere → 404.
 */
export async function resolveTarget(deps: TargetDeps, model: string, version: string | undefined): Promise<Target> {
  if (!MODEL_NAME_PATTERN.test(model)) throw new NotFoundError('model_not_found', `no model named "${model}"`);
  const deployment = await deps.deployments.get(model);
  const chosen = version ?? (deployment ? chooseVersion(deployment, deps.random ?? Math.random) : undefined);
  return { manifest: await deps.catalog.getManifest(model, chosen), deployment };
}
