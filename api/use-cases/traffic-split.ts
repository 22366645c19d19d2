/**
 * The traffic split, applied per job: a weighted choice among a deployment's versions. Pure and
 * deterministic given `random`, so tests drive it with a seeded generator.
 *
 * `random()` in [0, 1) is scaled to [0, 100) and walks the versions' cumulative weights in the
 * order listed: with 90/10, r < 90 picks the first, 90 ≤ r < 100 the second. A version of
 * weight 0 is never picked (its interval is empty).
 */
import type { VersionWeight } from '../../infra/deployments/deployment-store.ts';

export function chooseVersion(deployment: { versions: readonly VersionWeight[] }, random: () => number): string {
  const r = random() * 100;
  let cumulative = 0;
  let last: string | undefined;
  for (const { version, weight } of deployment.versions) {
    if (weight <= 0) continue;
    cumulative += weight;
    last = version;
    if (r < cumulative) return version;
  }
  // Only reached when weights sum below 100 (never for a validated deployment) or random() broke
  // its [0, 1) contract: the last version with traffic is the safe answer.
  if (last === undefined) throw new Error('a deployment has at least one version with a positive weight');
  return last;
}

/** The versions that take new jobs (weight > 0), in the order listed. */
export function servedVersions(deployment: { versions: readonly VersionWeight[] }): string[] {
  return deployment.versions.filter((v) => v.weight > 0).map((v) => v.version);
}
