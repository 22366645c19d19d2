import { describe, expect, it } from 'vitest';
import { clockTicksPerS, cpuMsOf, type ProcStat, parseProcStat, treeTicks } from './proc-cpu.ts';

describe('parseProcStat', () => {
  it('counts fields from the last parenthesis, so a command name with spaces and parentheses parses', () => {
    const line = '4242 (node (my) app) S 17 4242 17 0 -1 4194560 100 0 0 0 150 25 3 4 20 0 11 0 123 456';
    expect(parseProcStat(line)).toEqual({ pid: 4242, ppid: 17, ticks: 175 });
  });

  it('refuses a line that is not one', () => {
    expect(() => parseProcStat('garbage')).toThrow(/not a \/proc/);
  });
});

describe('treeTicks', () => {
  const stats: ProcStat[] = [
    { pid: 1, ppid: 0, ticks: 1000 },
    { pid: 10, ppid: 1, ticks: 5 },
    { pid: 11, ppid: 10, ticks: 7 },
    { pid: 12, ppid: 10, ticks: 11 },
    { pid: 20, ppid: 1, ticks: 100 },
  ];

  it('sums a process and its live descendants, not its siblings or parent', () => {
    expect(treeTicks(stats, 10)).toBe(23);
    expect(treeTicks(stats, 12)).toBe(11);
  });

  it('is NaN for a process that is not there', () => {
    expect(treeTicks(stats, 99)).toBeNaN();
  });
});

describe('cpuMsOf', () => {
  it.runIf(process.platform === 'linux')('reads this process from /proc, and NaN for no pid', () => {
    const before = cpuMsOf({ self: process.pid, none: undefined });
    let x = 0;
    for (let i = 0; i < 2e7; i++) x += Math.sqrt(i);
    const after = cpuMsOf({ self: process.pid });
    expect(x).toBeGreaterThan(0);
    expect(before.none).toBeNaN();
    expect(after.self).toBeGreaterThan(before.self ?? Number.POSITIVE_INFINITY);
    expect(clockTicksPerS()).toBeGreaterThan(0);
  });
});
