/** Canary with automatic rollback (issue 3 §8): the folder's public surface. */
export { type Assessment, type CanaryStanding, type Split, splitOf } from './assessment.ts';
export { CANARY_EVENTS_KEPT, type CanaryEvent, listCanaryEvents, type VersionSnapshot } from './event-log.ts';
export {
  type CanaryGuard,
  type CanaryGuardDeps,
  canaryMaxGapMs,
  createCanaryGuard,
  DEFAULT_CANARY_TICK_MS,
} from './guard.ts';
export { BUCKET_MS, createOutcomeStore, IGNORED_FAILURE_CODES, type OutcomeStore, type WindowStats } from './outcomes.ts';
export { type CanaryStatus, type CanaryStatusDeps, createCanaryStatusReader } from './status.ts';
export { type CanaryPolicy, DEFAULT_CANARY_POLICY, judgeCanary, type Verdict } from './verdict.ts';
