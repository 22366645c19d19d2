/** Canary with automatic rollback (issue 3 §8): the folder's public surface. */
export { splitOf, type Assessment, type CanaryStanding, type Split } from './assessment.ts';
export { CANARY_EVENTS_KEPT, listCanaryEvents, type CanaryEvent, type VersionSnapshot } from './event-log.ts';
export {
  canaryMaxGapMs,
  createCanaryGuard,
  DEFAULT_CANARY_TICK_MS,
  type CanaryGuard,
  type CanaryGuardDeps,
} from './guard.ts';
export { BUCKET_MS, createOutcomeStore, IGNORED_FAILURE_CODES, type OutcomeStore, type WindowStats } from './outcomes.ts';
export { createCanaryStatusReader, type CanaryStatus, type CanaryStatusDeps } from './status.ts';
export { DEFAULT_CANARY_POLICY, judgeCanary, type CanaryPolicy, type Verdict } from './verdict.ts';
