/**
 * What an edge gateway (api/edge/) needs to refuse a bad request without asking the region: every
 * model's name and versions, the input and output specs of the versions a request without a
 * version may land on (the deployment's traffic split, else the registry's latest), and the bounds
 * submit checks (rows, elements, the body limit). One document for the whole catalog, so an edge
 * refreshing it on a TTL costs the region one request per TTL per edge isolate, however many
 * models or bad requests there are. The specs are public to every tenant already
 * (GET /v2/models/{model}); nothing here is tenant data.
 */
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import type { ValidateLimits } from '../../infra/contracts/oip-validate.ts';
import { NotFoundError } from '../../infra/kernel/errors.ts';
import type { DeploymentLookup, ModelCatalog } from '../ports.ts';

export interface EdgeCatalogVersion {
  version: string;
  /** In warmpool's row layout, with their batch axes: what validateInferRequest reads. */
  inputs: TensorSpec[];
  outputs: TensorSpec[];
}

export interface EdgeCatalogModel {
  name: string;
  /** Every version in the registry: a request naming another one is refused at the edge. */
  versions: string[];
  /** The versions an unversioned request may run on, with their specs (one for an undeployed model: the latest). */
  serving: EdgeCatalogVersion[];
}

export interface EdgeCatalog {
  models: EdgeCatalogModel[];
  limits: ValidateLimits & { bodyLimitBytes: number };
  /** How long an edge may answer from this document before it asks again. */
  ttlS: number;
}

export interface EdgeCatalogDeps {
  catalog: ModelCatalog;
  deployments: DeploymentLookup;
  limits: EdgeCatalog['limits'];
  ttlS: number;
}

export async function edgeCatalog(deps: EdgeCatalogDeps): Promise<EdgeCatalog> {
  const listed = await deps.catalog.list();
  const models = await Promise.all(listed.map((m) => catalogModel(deps, m.name, m.versions)));
  return { models: models.filter((m) => m !== undefined), limits: deps.limits, ttlS: deps.ttlS };
}

async function catalogModel(deps: EdgeCatalogDeps, name: string, versions: string[]): Promise<EdgeCatalogModel | undefined> {
  const deployment = await deps.deployments.get(name);
  const inTraffic = deployment ? deployment.versions.filter((v) => v.weight > 0).map((v) => v.version) : [undefined];
  const serving: EdgeCatalogVersion[] = [];
  for (const version of inTraffic) {
    const manifest = await deps.catalog.getManifest(name, version).catch((err: unknown) => {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    });
    if (manifest) serving.push({ version: manifest.version, inputs: manifest.inputs, outputs: manifest.outputs });
  }
  // A model removed between list and read is left out: the region answers for it.
  return serving.length > 0 || versions.length > 0 ? { name, versions, serving } : undefined;
}
