/**
 * `warmpool migrate-keys [--dry-run] [--force]`: moves a deployment's Redis keys from the
 * single-node layout to the Redis Cluster layout (infra/redis/key-migration.ts), on the old single
 * node, before its data is moved into a cluster.
 *
 * Prints the plan (renames per family, job index values to rewrite, conflicts), applies it
 * unless `--dry-run`, and prints what it did. Exit codes: 0 done (or nothing to do), 1 conflicts
 * or warmpool processes still running, 2 a usage error (unknown flag, a cluster REDIS_URL, a
 * prefix that cannot take the layout).
 */
import type { Config } from '../../infra/kernel/config.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { isClusterUrl } from '../../infra/kernel/redis-url.ts';
import { closeRedis, createRedis, isCluster } from '../../infra/redis/client.ts';
import {
  applyKeyMigration,
  countByFamily,
  KEY_FAMILIES,
  type KeyFamily,
  type KeyMigrationPlan,
  type KeyMigrationResult,
  planKeyMigration,
} from '../../infra/redis/key-migration.ts';
import { MIGRATE_KEYS } from './cli-options.ts';
import { parseCommand, UsageError } from './cli-spec.ts';
import type { CliIo } from './deploy.ts';

/** Conflicts and live-process signs listed one per line; the rest are counted. */
const LISTED = 20;

const processIo: CliIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

export async function migrateKeysMain(args: string[], config: Config, io: CliIo = processIo): Promise<number> {
  let flags: { dryRun: boolean; force: boolean };
  try {
    flags = parseFlags(args);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`${err.message}\n`);
    return 2;
  }
  if (isClusterUrl(config.redisUrl)) {
    io.err(
      'warmpool migrate-keys: REDIS_URL names a Redis Cluster. The migration runs against the old single ' +
        'Redis node, before its data is moved into a cluster: point REDIS_URL at that node (redis://host:port), ' +
        'migrate, then move the data.\n',
    );
    return 2;
  }
  const redis = createRedis(config.redisUrl, { maxRetriesPerRequest: 2 });
  try {
    // Not a cluster URL, so one node; the check narrows the type for the migration.
    if (isCluster(redis)) throw new Error('REDIS_URL gave a cluster client');
    const plan = await planKeyMigration(redis, config.queuePrefix);
    printPlan(io, plan);
    const conflicts = [...plan.conflicts];
    if (flags.dryRun || (plan.renames.length === 0 && plan.rewrites.length === 0)) {
      io.out(flags.dryRun ? 'dry run: nothing changed\n' : 'nothing to migrate\n');
    } else {
      const result = await applyKeyMigration(redis, plan, { force: flags.force });
      printResult(io, result);
      conflicts.push(...result.conflicts);
    }
    if (conflicts.length === 0) return 0;
    io.err(`warmpool migrate-keys: ${conflicts.length} keys conflict: their new names exist already. Resolve them and run again.\n`);
    return 1;
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    io.err(`warmpool migrate-keys: ${err.message}\n`);
    return err.code === 'processes_running' ? 1 : 2;
  } finally {
    await closeRedis(redis);
  }
}

function parseFlags(args: string[]): { dryRun: boolean; force: boolean } {
  const { values } = parseCommand(MIGRATE_KEYS, args);
  return { dryRun: values['dry-run'] ?? false, force: values.force ?? false };
}

function printPlan(io: CliIo, plan: KeyMigrationPlan): void {
  const counts = countByFamily(plan.renames);
  io.out(`migrate-keys: prefix "${plan.prefix}"\n`);
  io.out(`to rename: ${total(counts)} keys${byFamily(counts)}\n`);
  io.out(`to rewrite: ${plan.rewrites.length} job index values (old queue names)\n`);
  printList(io, 'conflicts (target exists; left as it is)', plan.conflicts);
  printList(io, 'warmpool processes look alive', plan.live);
}

function printResult(io: CliIo, result: KeyMigrationResult): void {
  const skipped = result.skipped > 0 ? `; ${result.skipped} already done or gone meanwhile` : '';
  io.out(`renamed ${total(result.renamed)} keys${byFamily(result.renamed)}, rewrote ${result.rewritten} job index values${skipped}\n`);
  if (result.conflicts.length > 0) printList(io, 'new conflicts (target appeared meanwhile; left as it is)', result.conflicts);
}

function printList(io: CliIo, title: string, items: readonly string[]): void {
  io.out(`${title}: ${items.length}\n`);
  for (const item of items.slice(0, LISTED)) io.out(`  ${item}\n`);
  if (items.length > LISTED) io.out(`  … and ${items.length - LISTED} more\n`);
}

function total(counts: Record<KeyFamily, number>): number {
  return KEY_FAMILIES.reduce((sum, f) => sum + counts[f], 0);
}

/** ` (queue 12, deployments 3)`: the families with any. */
function byFamily(counts: Record<KeyFamily, number>): string {
  const parts = KEY_FAMILIES.filter((f) => counts[f] > 0).map((f) => `${f} ${counts[f]}`);
  return parts.length > 0 ? ` (${parts.join(', ')})` : '';
}
