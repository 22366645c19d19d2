/**
 * The verdict on a ManualClock: margins relative to the stable version, the sustain period,
 * flapping, gaps between looks and a clock that goes backwards or jumps forwards.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../kernel/clock.ts';
import { type Breach, type CanaryPolicy, DEFAULT_CANARY_POLICY, judgeCanary, type VerdictOutput, type VersionFigures } from './verdict.ts';

const policy: CanaryPolicy = {
  ...DEFAULT_CANARY_POLICY,
  minRequests: 50,
  sustainMs: 60_000,
  maxErrorRateDelta: 0.05,
  maxLatencyRatio: 1.5,
};

function figures(requests: number, errorRate: number, p95Ms: number | null = 40): VersionFigures {
  return { requests, errorRate, latencySamples: Math.round(requests * (1 - errorRate)), p95Ms };
}

const stable = figures(500, 0.01);
const failingCanary = figures(100, 0.3);
const healthyCanary = figures(100, 0.03);

/** Looks at the canary as a guard would each tick, carrying the breach. */
class Looker {
  breach: Breach | null = null;
  constructor(
    readonly clock: ManualClock,
    readonly maxGapMs = 15_000,
  ) {}
  look(canary: VersionFigures, base: VersionFigures = stable): VerdictOutput {
    const out = judgeCanary({ stable: base, canary, policy, now: this.clock.now(), previous: this.breach, maxGapMs: this.maxGapMs });
    this.breach = out.breach;
    return out;
  }
}

async function lookEvery(looker: Looker, stepMs: number, untilMs: number, canary: VersionFigures): Promise<VerdictOutput[]> {
  const outs: VerdictOutput[] = [];
  for (let t = 0; t <= untilMs; t += stepMs) {
    if (t > 0) await looker.clock.advance(stepMs);
    outs.push(looker.look(canary));
  }
  return outs;
}

describe('judgeCanary', () => {
  it('finds a canary within the margins healthy, and carries no breach', () => {
    const looker = new Looker(new ManualClock(1_000_000));
    expect(looker.look(healthyCanary)).toEqual({ verdict: { state: 'healthy' }, breach: null });
  });

  it('compares with the stable version, not absolutes: 30 % errors beside a stable 28 % is healthy', () => {
    const looker = new Looker(new ManualClock(0));
    expect(looker.look(figures(100, 0.3), figures(500, 0.28)).verdict.state).toBe('healthy');
  });

  it('judges nothing below minRequests on either side, and forgets a breach meanwhile', async () => {
    const looker = new Looker(new ManualClock(0));
    expect(looker.look(failingCanary).verdict.state).toBe('failing');
    await looker.clock.advance(10_000);
    const thin = looker.look(figures(49, 0.5));
    expect(thin.verdict).toMatchObject({ state: 'insufficient_data', reason: expect.stringMatching(/canary has 49 of the 50/) });
    expect(thin.breach).toBeNull();
    expect(looker.look(failingCanary, figures(10, 0)).verdict).toMatchObject({ reason: expect.stringMatching(/stable has 10/) });
  });

  it('calls for a rollback only once an error-rate breach has lasted sustainMs', async () => {
    const looker = new Looker(new ManualClock(1_000_000));
    const outs = await lookEvery(looker, 10_000, 60_000, failingCanary);
    const rollbacks = outs.map((o) => o.verdict.state === 'failing' && o.verdict.rollback);
    expect(rollbacks).toEqual([false, false, false, false, false, false, true]);
    expect(outs.at(-1)?.verdict).toMatchObject({ since: 1_000_000, reasons: [expect.stringMatching(/error rate 30.0% vs stable 1.0%/)] });
  });

  it('restarts the sustain period when the canary recovers in between (flapping)', async () => {
    const looker = new Looker(new ManualClock(0));
    await lookEvery(looker, 10_000, 50_000, failingCanary);
    await looker.clock.advance(10_000);
    expect(looker.look(healthyCanary).verdict.state).toBe('healthy');
    await looker.clock.advance(10_000);
    const again = looker.look(failingCanary);
    expect(again.verdict).toMatchObject({ state: 'failing', since: 70_000, rollback: false });
  });

  it('catches a p95 beyond the ratio, and ignores ratios under the latency floor', () => {
    const looker = new Looker(new ManualClock(0));
    expect(looker.look(figures(100, 0.01, 70), figures(500, 0.01, 40)).verdict).toMatchObject({
      state: 'failing',
      reasons: [expect.stringMatching(/p95 latency 70 ms vs stable 40 ms/)],
    });
    expect(looker.look(figures(100, 0.01, 55), figures(500, 0.01, 40)).verdict.state).toBe('healthy');
    // 6 ms vs 2 ms is ×3, but both are under the 10 ms floor: noise, not a regression.
    expect(looker.look(figures(100, 0.01, 6), figures(500, 0.01, 2)).verdict.state).toBe('healthy');
  });

  it('does not judge latency from too few successes (a mostly failing canary is caught by errors)', () => {
    const looker = new Looker(new ManualClock(0));
    const fewSuccesses: VersionFigures = { requests: 100, errorRate: 0.01, latencySamples: 10, p95Ms: 900 };
    expect(looker.look(fewSuccesses).verdict.state).toBe('healthy');
  });

  it('restarts the sustain period after a gap between looks longer than maxGapMs', async () => {
    const looker = new Looker(new ManualClock(0), 15_000);
    await lookEvery(looker, 10_000, 40_000, failingCanary);
    await looker.clock.advance(30_000); // nobody looked for 30 s
    expect(looker.look(failingCanary).verdict).toMatchObject({ state: 'failing', since: 70_000, rollback: false });
  });

  it('never rolls back early when the clock goes backwards: the sustain period restarts', async () => {
    const clock = new ManualClock(100_000);
    const looker = new Looker(clock);
    await lookEvery(looker, 10_000, 50_000, failingCanary); // breach since 100 s, last seen 150 s
    clock.set(60_000); // 90 s back
    expect(looker.look(failingCanary).verdict).toMatchObject({ state: 'failing', since: 60_000, rollback: false });
    const outs = await lookEvery(looker, 10_000, 60_000, failingCanary);
    expect(outs.map((o) => o.verdict.state === 'failing' && o.verdict.rollback)).toEqual([false, false, false, false, false, false, true]);
  });

  it('never rolls back early when the clock jumps forwards: the jump reads as a gap', async () => {
    const clock = new ManualClock(0);
    const looker = new Looker(clock);
    looker.look(failingCanary);
    clock.set(3_600_000);
    expect(looker.look(failingCanary).verdict).toMatchObject({ state: 'failing', since: 3_600_000, rollback: false });
  });
});
