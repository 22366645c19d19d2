/**
 * Will anything run a job for this model version? Submit asks before it queues one, because a
 * job nothing serves is accepted (202) and then waits in its queue until its retention ends,
 * and a sync call times out saying only "poll": the caller never learns the model was never
 * deployed.
 *
 *   a deployment lists the version (any weight, any `min`)   → served: the scaler keeps or
 *                                                              starts its workers (min 0 too)
 *     … and names a shared pool                              → served, whatever the pool holds: a
 *                                                              pool has max ≥ 1, so it has a worker
 *                                                              or can launch one, and the job's
 *                                                              ring places the model (submit-job.ts
 *                                                              step 4, infra/fleet/pool-demand.ts)
 *   no deployment lists it, a live worker of it heartbeats    → served: a hand-started
 *                                                              `warmpool worker --model M --version V`
 *   neither                                                   → 409 model_not_deployed, naming the fix
 *
 * A model or version missing from the registry is the registry's 404, asked first. Only the
 * second row reads the workers (fleet-view.ts): a deployed version costs nothing here.
 */
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { DeploymentLookup } from '../ports.ts';
import type { FleetView } from './fleet-view.ts';

type Deployed = Pick<NonNullable<Awaited<ReturnType<DeploymentLookup['get']>>>, 'versions'>;

/** Resolves when something serves `manifest`'s version; else throws 409 `model_not_deployed`. */
export async function ensureServed(deps: { fleet?: FleetView }, manifest: ModelManifest, deployment: Deployed | null): Promise<void> {
  if (deployment?.versions.some((v) => v.version === manifest.version)) return;
  const workers = deps.fleet ? await deps.fleet.workers(manifest.name, manifest.version) : [];
  if (workers.length > 0) return;
  throw notDeployed(manifest, deployment);
}

function notDeployed({ name, version }: ModelManifest, deployment: Deployed | null): InvalidInputError {
  const fix = `(or PUT /v1/deployments/${name})`;
  if (!deployment) {
    return new InvalidInputError(
      'model_not_deployed',
      `model ${name} is published but not deployed: run \`warmpool deploy ${name}\` ${fix}`,
      {
        status: 409,
      },
    );
  }
  const served = deployment.versions.map((v) => v.version).join(', ');
  return new InvalidInputError(
    'model_not_deployed',
    `version ${version} of model ${name} is published but not deployed (its deployment serves ${served}): send no version, or run \`warmpool deploy ${name} --version ${version}\` ${fix}`,
    { status: 409 },
  );
}
