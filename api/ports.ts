/**
 * The narrow interfaces the API depends on. The API owns them; infra's implementations
 * (infra/queue/job-queue.ts, infra/registry/model-registry.ts, infra/deployments/deployment-store.ts) satisfy them structurally, and the tests
 * fake them in a few lines.
 */
import type { QueuedRequest } from '../infra/contracts/entry.ts';
import type { JobView, Priority } from '../infra/contracts/job.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import type { Deployment } from '../infra/deployments/deployment-store.ts';

export type { JobView } from '../infra/contracts/job.ts';
export type { Clock } from '../infra/kernel/clock.ts';

export interface JobQueue {
  /** The request joins a queue entry (infra/contracts/entry.ts); resolves once it is in the queue. */
  enqueue(request: QueuedRequest, options: { priority: Priority; jobId: string }): Promise<void>;
  /** null when no such job (or it has expired). */
  get(jobId: string): Promise<JobView | null>;
  /** Resolves when the job is terminal, or with its current view when `timeoutMs` passes first. */
  waitFor(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<JobView>;
  /** Waiting + prioritized + delayed + active. */
  depth(model: string, version: string): Promise<number>;
}

export interface ModelCatalog {
  /** Throws NotFoundError (`model_not_found` / `version_not_found`); no version = the latest. */
  getManifest(name: string, version?: string): Promise<ModelManifest>;
  list(): Promise<Array<{ name: string; versions: string[] }>>;
  listVersions(name: string): Promise<string[]>;
}

export interface DeploymentLookup {
  /** Which version serves `model`, or null when it is not deployed. */
  get(model: string): Promise<Pick<Deployment, 'model' | 'version' | 'versions' | 'backlogMax'> | null>;
}
