/** A shared pool as a provider target: its workers' flags, its group's name, whose heartbeats are its. */
import { describe, expect, it } from 'vitest';
import { beatBelongsTo, poolTargetKey } from '../contracts/pool.ts';
import { defaultGroupName } from './asg-provider.ts';
import { defaultDeploymentName } from './k8s-provider.ts';
import { workerFlags } from './local-provider.ts';

describe('a shared pool as a provider target', () => {
  it('launches `worker --pool NAME [--memory-mb MB]`, never with a model or --standby', () => {
    expect(workerFlags({ pool: 'tail' }, 'standby')).toEqual(['--pool', 'tail']);
    expect(workerFlags({ pool: 'tail', memoryMb: 2048 }, 'active')).toEqual(['--pool', 'tail', '--memory-mb', '2048']);
    expect(workerFlags({ model: 'm', version: '2' }, 'standby')).toEqual(['--model', 'm', '--version', '2', '--standby']);
  });

  it('names its Deployment and Auto Scaling group warmpool-pool-<name>', () => {
    expect(defaultDeploymentName({ pool: 'Tail_Models' })).toBe('warmpool-pool-tail-models');
    expect(defaultGroupName({ pool: 'tail' })).toBe('warmpool-pool-tail');
    expect(defaultGroupName({ model: 'm', version: '2' })).toBe('warmpool-m-2');
  });

  it("owns the heartbeats that name its pool, and a deployment's target never takes a pool worker's", () => {
    const poolBeat = { model: '', version: '', pool: 'tail' };
    const ownBeat = { model: 'm', version: '2' };
    expect(beatBelongsTo(poolBeat, { pool: 'tail' })).toBe(true);
    expect(beatBelongsTo(poolBeat, { pool: 'other' })).toBe(false);
    expect(beatBelongsTo(ownBeat, { pool: 'tail' })).toBe(false);
    expect(beatBelongsTo(ownBeat, { model: 'm', version: '2' })).toBe(true);
    expect(beatBelongsTo({ ...ownBeat, pool: 'tail' }, { model: 'm', version: '2' })).toBe(false);
  });

  it('keys a pool apart from any model version, and its memory budget is no part of the key', () => {
    expect(poolTargetKey({ pool: 'tail', memoryMb: 512 })).toBe(poolTargetKey({ pool: 'tail' }));
    expect(poolTargetKey({ pool: 'tail' })).not.toBe(poolTargetKey({ model: 'tail', version: '1' }));
  });
});
