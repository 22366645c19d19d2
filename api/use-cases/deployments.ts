/**
 * Deployment use cases: read, change, roll back. Shared by the HTTP routes and the CLI so both
 * validate and merge the same way. A change is read-modify-write against the current record
 * (absent fields keep their values; see `applyChange`), committed atomically by the store, and
 * every version it names must exist in the registry (422 otherwise: the request is well formed
 * but names something that is not there); so must the fallback model (and its version, when
 * named).
 */

import { MODEL_NAME_PATTERN } from '../../infra/contracts/manifest.ts';
import {
  applyChange,
  type Deployment,
  type DeploymentChange,
  type DeploymentStore,
  type VersionWeight,
  validateDeployment,
} from '../../infra/deployments/deployment-store.ts';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import type { ModelCatalog } from '../ports.ts';

/** The slice of the deployment store these use cases need. */
export type DeploymentAdmin = Pick<DeploymentStore, 'get' | 'list' | 'update' | 'rollback' | 'history'>;

export interface DeploymentUseCaseDeps {
  deployments: DeploymentAdmin;
  catalog: Pick<ModelCatalog, 'getManifest'>;
}

export interface PutDeploymentInput {
  model: string;
  change: DeploymentChange;
  /** Optimistic concurrency: apply only on top of this revision (0 = not deployed yet). */
  ifRevision?: number;
}

export async function getDeployment(deps: DeploymentUseCaseDeps, model: string): Promise<Deployment> {
  const deployment = await deps.deployments.get(model);
  if (!deployment) throw notDeployed(model);
  return deployment;
}

export function listDeployments(deps: DeploymentUseCaseDeps): Promise<Deployment[]> {
  return deps.deployments.list();
}

/** Every kept revision, newest first; 404 when the model was never deployed. */
export async function deploymentHistory(deps: DeploymentUseCaseDeps, model: string): Promise<Deployment[]> {
  const revisions = await deps.deployments.history(model);
  if (revisions.length === 0) throw notDeployed(model);
  return revisions;
}

export function putDeployment(deps: DeploymentUseCaseDeps, input: PutDeploymentInput): Promise<Deployment> {
  const { model, change } = input;
  if (!MODEL_NAME_PATTERN.test(model)) throw new InvalidInputError('invalid_deployment', `invalid model name "${model}"`);
  const names = change.version ?? change.versions;
  return deps.deployments.update(
    model,
    async (current) => {
      // A first deployment that names no version deploys the registry's latest.
      const latest = current || names !== undefined ? undefined : (await manifestOf(deps, model)).version;
      const next = applyChange(model, current, change, latest);
      // Shape and numbers first (400), then existence in the registry (422).
      const valid = validateDeployment(next);
      await ensureVersionsExist(deps, model, valid.versions);
      // Checked only when the change names it, so a deployment whose fallback was later removed
      // from the registry can still be changed (submit then answers 404 for degraded requests).
      if (change.fallback) await manifestOf(deps, change.fallback.model, change.fallback.version);
      return next;
    },
    { ifRevision: input.ifRevision },
  );
}

export function rollbackDeployment(deps: DeploymentUseCaseDeps, model: string, ifRevision?: number): Promise<Deployment> {
  return deps.deployments.rollback(model, { ifRevision });
}

async function ensureVersionsExist(deps: DeploymentUseCaseDeps, model: string, versions: readonly VersionWeight[]): Promise<void> {
  await Promise.all(versions.map((v) => manifestOf(deps, model, v.version)));
}

async function manifestOf(deps: DeploymentUseCaseDeps, model: string, version?: string) {
  try {
    return await deps.catalog.getManifest(model, version);
  } catch (err) {
    if (err instanceof NotFoundError) throw new InvalidInputError(err.code, err.message, { status: 422, cause: err });
    throw err;
  }
}

function notDeployed(model: string): NotFoundError {
  return new NotFoundError('deployment_not_found', `model ${model} is not deployed`);
}
