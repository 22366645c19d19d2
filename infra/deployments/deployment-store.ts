/**
 * Deployments: which versions of a model serve it and how traffic splits between them (%), the
 * pool's bounds, the scaler's policy (opaque here) and the backlog bound admission enforces. The
 * API, the pool, the CLI and later the scaler read the same record from Redis:
 *
 *   <prefix>:{deployments}                  hash; field = model, value = the current record (JSON)
 *   <prefix>:{deployments}:history:<model>  list, newest first: every revision written, capped
 *
 * (`{deployments}`: one Redis Cluster hash tag for all of them, so the commit script's two keys
 * share a slot.)
 *
 * Each write is a new revision (1, 2, 3… per model, never reused, even across a remove). Writes
 * are compare-and-set in one Lua script (revision-commit.ts, shared with pool-store.ts): the
 * script checks that neither the current record nor the latest revision moved since the writer
 * read them, then sets the record and pushes it onto the history. A writer that lost a race
 * re-reads and tries again, unless it pinned the revision it expected (`ifRevision`): then it
 * gets 409 `revision_conflict`. No WATCH/MULTI: WATCH is
 * per connection, and the connection here is shared by concurrent requests.
 *
 * Rollback restores the config of the revision before the current one, as a new revision; a
 * second rollback therefore undoes the first (as `kubectl rollout undo` does).
 *
 * A deployment may name a `fallback` model (a lighter one) that takes requests marked
 * `degradable` while its backlog is over `backlogMax` (api/use-cases/submit-job.ts). Without a
 * version, the fallback's own deployment (or the registry's latest) picks one per job. It may be
 * another version of the same model, but never one this deployment serves: that queue is the
 * one that is full.
 *
 * A deployment may name a shared `pool` (infra/contracts/shared-pool.ts): its model is then
 * served by that pool's workers, which the scaler sizes per pool. Absent (every record written
 * before pools existed): a pool of its own, sized by this record's min/max/standby. While it is
 * in a shared pool those bounds are kept, unused, and apply again when it leaves. A deployment
 * joins only a pool that exists: the commit script checks it (422 `pool_not_found`), so a pool
 * deleted meanwhile (pool-store.ts refuses while any deployment names it) is never joined.
 */

import { MODEL_NAME_PATTERN, VERSION_PATTERN } from '../contracts/manifest.ts';
import { poolNameProblem } from '../contracts/shared-pool.ts';
import { InvalidInputError, NotFoundError } from '../kernel/errors.ts';
import type { RedisClient } from '../redis/client.ts';
import { deploymentHistoryKey, deploymentsKey, sharedPoolsKey } from '../redis/keys.ts';
import { REVISION_COMMIT_SCRIPT } from './revision-commit.ts';

export interface VersionWeight {
  version: string;
  /** Percent of new jobs (integer, 0–100); the weights of a deployment sum to 100. */
  weight: number;
}

/** The model (and optionally version) that takes degradable requests while the backlog is over its bound. */
export interface Fallback {
  model: string;
  /** Absent: the fallback model's deployed version, else the registry's latest. */
  version?: string;
}

/** What a write sets: everything but the bookkeeping. */
export interface DeploymentConfig {
  /** One entry = no split. A weight of 0 keeps a version listed (its queue still drains) without new jobs. */
  versions: VersionWeight[];
  /** Workers kept running even when idle (the dev pool keeps at least one). */
  min: number;
  max: number;
  /** Warmed workers held in standby beyond those active. */
  standby: number;
  /** The scaler's policy; opaque here. */
  policy?: Record<string, unknown>;
  /** Backlog (jobs not yet running, over all versions) beyond which submissions are refused. */
  backlogMax?: number;
  /** Where degradable requests go while the backlog is over `backlogMax`. */
  fallback?: Fallback;
  /** The shared pool whose workers serve this model; absent: a pool of its own (min/max/standby above). */
  pool?: string;
}

export interface Deployment extends DeploymentConfig {
  model: string;
  /** The stable version: the highest weight, the first listed on a tie. Derived from `versions`. */
  version: string;
  revision: number;
  updatedAt: string;
  /** Set by a rollback: the revision whose config this one restores. */
  restoredFrom?: number;
}

/** A whole config to write. `version` alone is shorthand for `versions: [{ version, weight: 100 }]`. */
export interface DeploymentInput extends Omit<DeploymentConfig, 'versions'> {
  model: string;
  version?: string;
  versions?: VersionWeight[];
}

/** A partial change to a deployment (the API's PUT, the CLI): absent keeps, null clears. */
export interface DeploymentChange {
  version?: string;
  versions?: VersionWeight[];
  min?: number;
  max?: number;
  standby?: number;
  policy?: Record<string, unknown> | null;
  backlogMax?: number | null;
  fallback?: Fallback | null;
  /** Join this shared pool; null leaves it for a pool of the deployment's own. */
  pool?: string | null;
}

export interface WriteOptions {
  /** Write only when the current revision is this one (0 = not deployed yet); else 409 `revision_conflict`. */
  ifRevision?: number;
}

export interface DeploymentStore {
  get(model: string): Promise<Deployment | null>;
  list(): Promise<Deployment[]>;
  /** Replaces the whole config. */
  put(input: DeploymentInput, options?: WriteOptions): Promise<Deployment>;
  /** Read-modify-write: `change` gets the current record (null when none) and returns the whole new config. */
  update(
    model: string,
    change: (current: Deployment | null) => DeploymentInput | Promise<DeploymentInput>,
    options?: WriteOptions,
  ): Promise<Deployment>;
  /** Restores the previous revision's config as a new revision: 404 when not deployed, 409 `no_previous_revision`. */
  rollback(model: string, options?: WriteOptions): Promise<Deployment>;
  /** The kept revisions, newest first (the current one included). */
  history(model: string): Promise<Deployment[]>;
  remove(model: string): Promise<boolean>;
}

export const MAX_VERSIONS = 10;
export const MAX_BACKLOG = 10_000_000;
export const MAX_POLICY_BYTES = 16_384;
export const DEFAULT_HISTORY_LIMIT = 20;
/** Lost races in a row before an unpinned write gives up (only under pathological contention). */
const MAX_WRITE_ATTEMPTS = 10;

const invalid = (message: string) => new InvalidInputError('invalid_deployment', message);

/** Checks a whole config and returns it normalised (`version` shorthand expanded). */
export function validateDeployment(input: DeploymentInput): DeploymentConfig & { model: string } {
  if (!MODEL_NAME_PATTERN.test(input.model)) throw invalid(`invalid model name "${input.model}"`);
  const versions = validateVersions(input);
  for (const key of ['min', 'max', 'standby'] as const) {
    const v = input[key];
    if (!Number.isInteger(v) || v < 0 || v > 10_000) throw invalid(`${key} must be an integer between 0 and 10000 (got ${v})`);
  }
  if (input.max < input.min) throw invalid(`max (${input.max}) is below min (${input.min})`);
  if (input.max < 1) throw invalid('max must be at least 1');
  const config: DeploymentConfig & { model: string } = {
    model: input.model,
    versions,
    min: input.min,
    max: input.max,
    standby: input.standby,
  };
  if (input.backlogMax !== undefined) {
    const b = input.backlogMax;
    if (!Number.isInteger(b) || b < 1 || b > MAX_BACKLOG)
      throw invalid(`backlogMax must be an integer between 1 and ${MAX_BACKLOG} (got ${b})`);
    config.backlogMax = b;
  }
  if (input.policy !== undefined) config.policy = validatePolicy(input.policy);
  if (input.fallback !== undefined) config.fallback = validateFallback(input.model, input.fallback, versions);
  if (input.pool !== undefined) {
    const problem = poolNameProblem(input.pool);
    if (problem) throw invalid(problem);
    config.pool = input.pool;
  }
  return config;
}

function validateFallback(model: string, fallback: unknown, versions: readonly VersionWeight[]): Fallback {
  if (typeof fallback !== 'object' || fallback === null || Array.isArray(fallback)) {
    throw invalid('fallback must be an object {model, version?}');
  }
  const { model: name, version, ...rest } = fallback as Record<string, unknown>;
  const extra = Object.keys(rest);
  if (extra.length > 0) throw invalid(`fallback has unknown field${extra.length > 1 ? 's' : ''} ${extra.join(', ')}`);
  if (typeof name !== 'string' || !MODEL_NAME_PATTERN.test(name)) throw invalid(`invalid fallback model name ${JSON.stringify(name)}`);
  if (version !== undefined && (typeof version !== 'string' || !VERSION_PATTERN.test(version))) {
    throw invalid(`invalid fallback version ${JSON.stringify(version)}`);
  }
  if (name === model && (version === undefined || versions.some((v) => v.version === version))) {
    throw invalid(`the fallback of ${model} must be another model, or a version of ${model} that this deployment does not serve`);
  }
  return version === undefined ? { model: name } : { model: name, version };
}

function validateVersions(input: DeploymentInput): VersionWeight[] {
  if (input.version !== undefined && input.versions !== undefined) {
    throw invalid('give either "version" or "versions", not both');
  }
  const versions = input.versions ?? (input.version === undefined ? [] : [{ version: input.version, weight: 100 }]);
  if (versions.length === 0) throw invalid('name at least one version');
  if (versions.length > MAX_VERSIONS) throw invalid(`at most ${MAX_VERSIONS} versions (got ${versions.length})`);
  const seen = new Set<string>();
  for (const { version, weight } of versions) {
    if (typeof version !== 'string' || !VERSION_PATTERN.test(version)) throw invalid(`invalid version "${version}"`);
    if (seen.has(version)) throw invalid(`version "${version}" is listed twice`);
    seen.add(version);
    if (!Number.isInteger(weight) || weight < 0 || weight > 100) {
      throw invalid(`weight of version "${version}" must be an integer percent between 0 and 100 (got ${weight})`);
    }
  }
  const total = versions.reduce((sum, v) => sum + v.weight, 0);
  if (total !== 100) throw invalid(`version weights must sum to 100 (got ${total})`);
  return versions.map(({ version, weight }) => ({ version, weight }));
}

function validatePolicy(policy: unknown): Record<string, unknown> {
  if (typeof policy !== 'object' || policy === null || Array.isArray(policy)) throw invalid('policy must be a JSON object');
  const size = Buffer.byteLength(JSON.stringify(policy));
  if (size > MAX_POLICY_BYTES) throw invalid(`policy is ${size} bytes; at most ${MAX_POLICY_BYTES}`);
  return policy as Record<string, unknown>;
}

/** The stable version: the highest weight, the first listed on a tie. */
export function stableVersion(versions: readonly VersionWeight[]): string {
  let best: VersionWeight | undefined;
  for (const v of versions) if (!best || v.weight > best.weight) best = v;
  if (!best) throw new Error('a deployment has at least one version');
  return best.version;
}

/**
 * The whole config a change leads to. For a new deployment, absent fields take the defaults the
 * CLI has always had (min 1, max = max(min, 1), standby 0), and `latestVersion` stands in for
 * a missing version; for an existing one they keep their current values.
 */
export function applyChange(
  model: string,
  current: DeploymentConfig | null,
  change: DeploymentChange,
  latestVersion?: string,
): DeploymentInput {
  const min = change.min ?? current?.min ?? 1;
  const input: DeploymentInput = {
    model,
    min,
    max: change.max ?? current?.max ?? Math.max(min, 1),
    standby: change.standby ?? current?.standby ?? 0,
  };
  if (change.versions !== undefined) input.versions = change.versions;
  if (change.version !== undefined) input.version = change.version;
  if (change.version === undefined && change.versions === undefined) {
    if (current) input.versions = current.versions;
    else if (latestVersion !== undefined) input.version = latestVersion;
  }
  const policy = change.policy === undefined ? current?.policy : (change.policy ?? undefined);
  if (policy !== undefined) input.policy = policy;
  const backlogMax = change.backlogMax === undefined ? current?.backlogMax : (change.backlogMax ?? undefined);
  if (backlogMax !== undefined) input.backlogMax = backlogMax;
  const fallback = change.fallback === undefined ? current?.fallback : (change.fallback ?? undefined);
  if (fallback !== undefined) input.fallback = fallback;
  const pool = change.pool === undefined ? current?.pool : (change.pool ?? undefined);
  if (pool !== undefined) input.pool = pool;
  return input;
}

/** The config part of a record (what a rollback restores). */
export function configOf(d: DeploymentConfig): DeploymentConfig {
  const config: DeploymentConfig = { versions: d.versions, min: d.min, max: d.max, standby: d.standby };
  if (d.policy !== undefined) config.policy = d.policy;
  if (d.backlogMax !== undefined) config.backlogMax = d.backlogMax;
  if (d.fallback !== undefined) config.fallback = d.fallback;
  if (d.pool !== undefined) config.pool = d.pool;
  return config;
}

function revisionConflict(model: string, expected: number, actual: number): InvalidInputError {
  return new InvalidInputError(
    'revision_conflict',
    `deployment ${model} is at revision ${actual}, not ${expected}: read it again and reapply your change`,
    { status: 409 },
  );
}

function poolNotFound(model: string, pool: string): InvalidInputError {
  return new InvalidInputError(
    'pool_not_found',
    `deployment ${model} names pool ${pool}, which does not exist: create it first (warmpool pool set ${pool} --max N, or PUT /v1/pools/${pool})`,
    { status: 422 },
  );
}

export interface DeploymentStoreOptions {
  now?: () => number;
  /** Revisions kept per model (default 20). */
  historyLimit?: number;
}

export function createDeploymentStore(
  redis: RedisClient,
  prefix: string,
  options: DeploymentStoreOptions | (() => number) = {},
): DeploymentStore {
  const { now = Date.now, historyLimit = DEFAULT_HISTORY_LIMIT } = typeof options === 'function' ? { now: options } : options;
  const key = deploymentsKey(prefix);
  const historyKey = (model: string) => deploymentHistoryKey(prefix, model);
  const poolsKey = sharedPoolsKey(prefix);

  const get = async (model: string) => {
    const raw = await redis.hget(key, model);
    return raw ? parseDeployment(raw) : null;
  };

  const history = async (model: string) => (await redis.lrange(historyKey(model), 0, -1)).map(parseDeployment);

  const commit = async (
    model: string,
    next: (current: Deployment | null) => Promise<DeploymentConfig & { restoredFrom?: number }>,
    options: WriteOptions = {},
  ): Promise<Deployment> => {
    for (let attempt = 1; ; attempt++) {
      const [current, head] = await Promise.all([get(model), redis.lindex(historyKey(model), 0)]);
      const currentRevision = current?.revision ?? 0;
      if (options.ifRevision !== undefined && options.ifRevision !== currentRevision) {
        throw revisionConflict(model, options.ifRevision, currentRevision);
      }
      const latest = Math.max(currentRevision, head ? parseDeployment(head).revision : 0);
      const record = toRecord(model, await next(current), latest + 1, new Date(now()).toISOString());
      const json = JSON.stringify(record);
      const expectedCurrent = current ? currentRevision : -1;
      const pool = record.pool ?? '';
      const outcome = await redis.eval(
        REVISION_COMMIT_SCRIPT,
        3,
        key,
        historyKey(model),
        poolsKey,
        model,
        json,
        expectedCurrent,
        latest,
        historyLimit,
        pool,
      );
      if (outcome === 'ok') return record;
      if (outcome === 'missing') throw poolNotFound(model, pool);
      // Lost a race: the next pass re-reads (and answers 409 when the caller pinned a revision).
      if (attempt >= MAX_WRITE_ATTEMPTS) throw new Error(`deployment ${model}: ${attempt} writes in a row lost a race`);
    }
  };

  const update: DeploymentStore['update'] = (model, change, options) =>
    commit(
      model,
      async (current) => {
        const input = await change(current);
        if (input.model !== model) throw invalid(`the change is for model "${input.model}", not "${model}"`);
        return configOf(validateDeployment(input));
      },
      options,
    );

  return {
    get,
    history,
    async list() {
      const all = await redis.hgetall(key);
      return Object.values(all)
        .map(parseDeployment)
        .sort((a, b) => a.model.localeCompare(b.model));
    },
    put: (input, options) => update(input.model, () => input, options),
    update,
    rollback: (model, options) =>
      commit(
        model,
        async (current) => {
          if (!current) throw new NotFoundError('deployment_not_found', `model ${model} is not deployed`);
          const previous = (await history(model)).find((r) => r.revision < current.revision);
          if (!previous) {
            throw new InvalidInputError('no_previous_revision', `deployment ${model} has no revision before ${current.revision}`, {
              status: 409,
            });
          }
          return { ...configOf(previous), restoredFrom: previous.revision };
        },
        options,
      ),
    async remove(model) {
      return (await redis.hdel(key, model)) > 0;
    },
  };
}

function toRecord(model: string, config: DeploymentConfig & { restoredFrom?: number }, revision: number, updatedAt: string): Deployment {
  const record: Deployment = { model, version: stableVersion(config.versions), ...configOf(config), revision, updatedAt };
  if (config.restoredFrom !== undefined) record.restoredFrom = config.restoredFrom;
  return record;
}

/** A stored record; records written before versions and revisions existed read as one version at revision 0. */
function parseDeployment(raw: string): Deployment {
  const d = JSON.parse(raw) as Partial<Deployment> & { model: string; min: number; max: number; standby: number };
  const versions = d.versions ?? [{ version: d.version ?? '', weight: 100 }];
  return { ...d, versions, version: stableVersion(versions), revision: d.revision ?? 0, updatedAt: d.updatedAt ?? '' };
}
