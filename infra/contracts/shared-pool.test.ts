import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../kernel/errors.ts';
import { applyPoolChange, POOL_DEFAULTS, poolNameProblem, type SharedPoolInput, validateSharedPool } from './shared-pool.ts';

const base: SharedPoolInput = { name: 'gpu-a', max: 3, min: 1, standby: 1, memoryMb: 2048 };

function refusal(run: () => unknown): InvalidInputError {
  try {
    run();
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('pool names', () => {
  it.each(['a', 'gpu', 'gpu-a', 'long-tail-2', `a${'b'.repeat(31)}`])('%s is a pool name', (name) => {
    expect(poolNameProblem(name)).toBeUndefined();
  });

  it.each([
    ['', /invalid pool name ""/],
    ['Gpu', /lower-case/],
    ['1gpu', /starting with a letter/],
    ['gpu-', /not ending with '-'/],
    ['gpu_a', /invalid pool name "gpu_a"/],
    ['gpu.a', /invalid pool name/],
    ['{x}', /invalid pool name/],
    [`a${'b'.repeat(32)}`, /1–32/],
    ['none', /reserved/],
  ])('%j is refused', (name, message) => {
    expect(poolNameProblem(name)).toMatch(message);
  });

  it('refuses what is not a string', () => {
    expect(poolNameProblem(7)).toMatch(/invalid pool name 7/);
  });
});

describe('validateSharedPool', () => {
  it('keeps a valid config and only its fields', () => {
    expect(validateSharedPool({ ...base, extra: 1 } as SharedPoolInput)).toEqual(base);
  });

  it.each<[string, Partial<SharedPoolInput>, RegExp]>([
    ['max 0', { max: 0, min: 0, standby: 0 }, /max must be an integer between 1 and 10000 \(got 0\)/],
    ['max past the cap', { max: 10_001 }, /max must be an integer between 1 and 10000/],
    ['a fractional max', { max: 2.5 }, /max must be an integer/],
    ['min above max', { min: 4 }, /min \(4\) is above max \(3\)/],
    ['negative min', { min: -1 }, /min must be a non-negative integer \(got -1\)/],
    ['standby above max', { standby: 5 }, /standby \(5\) is above max \(3\)/],
    ['memory under the floor', { memoryMb: 63 }, /memoryMb must be an integer between 64 and 1048576 \(got 63\)/],
    ['memory not a number', { memoryMb: Number.NaN }, /memoryMb must be an integer/],
    ['a bad name', { name: 'GPU' }, /invalid pool name "GPU"/],
  ])('%s → 400 invalid_pool', (_, change, message) => {
    const err = refusal(() => validateSharedPool({ ...base, ...change }));
    expect(err.code).toBe('invalid_pool');
    expect(err.status).toBe(400);
    expect(err.message).toMatch(message);
  });
});

describe('applyPoolChange', () => {
  it('gives a new pool the defaults, min at most max', () => {
    expect(applyPoolChange('p', null, { max: 4 })).toEqual({ name: 'p', max: 4, ...POOL_DEFAULTS });
    expect(applyPoolChange('p', null, { max: 4, standby: 2, memoryMb: 512, min: 0 })).toEqual({
      name: 'p',
      max: 4,
      min: 0,
      standby: 2,
      memoryMb: 512,
    });
  });

  it('needs max for a new pool', () => {
    expect(refusal(() => applyPoolChange('p', null, { standby: 1 })).message).toMatch(/a new pool needs max/);
  });

  it('keeps what an existing pool was not told', () => {
    expect(applyPoolChange('gpu-a', base, { standby: 0 })).toEqual({ ...base, standby: 0 });
  });
});
