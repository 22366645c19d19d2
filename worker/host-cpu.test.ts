import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { measuredShort, othersCores, parseCpuList, parseProcStat, procStatMeter } from './host-cpu.ts';

const STAT = `cpu  100 5 50 800 20 3 2 0 0 0
cpu0 50 2 25 400 10 1 1 0 0 0
cpu1 50 3 25 400 10 2 1 0 0 0
intr 12345
`;

describe('parseProcStat', () => {
  it('reads busy and total jiffies over every CPU, idle and iowait counted as not busy', () => {
    expect(parseProcStat(STAT)).toEqual({ busy: 160, total: 980, cpus: 2 });
  });

  it('counts only the CPUs allowed', () => {
    expect(parseProcStat(STAT, new Set([1]))).toEqual({ busy: 81, total: 491, cpus: 1 });
    expect(parseProcStat(STAT, new Set([7]))).toBeUndefined();
  });

  it('gives undefined for text that is not /proc/stat', () => {
    expect(parseProcStat('')).toBeUndefined();
    expect(parseProcStat('cpu  1 1 1 1\ncpu0 a b c d\n')).toBeUndefined();
    expect(parseProcStat('cpu  1 1 1 1\n')).toBeUndefined();
  });
});

describe('parseCpuList', () => {
  it('reads ranges and single CPUs', () => {
    expect([...(parseCpuList(' 0-3,8,10-11\n') ?? [])]).toEqual([0, 1, 2, 3, 8, 10, 11]);
  });

  it('gives undefined for anything else', () => {
    for (const bad of ['', 'x', '3-1', '1,,2', '0-999999']) expect(parseCpuList(bad)).toBeUndefined();
  });
});

describe('othersCores', () => {
  const at = (busy: number, total: number, selfMs: number, atMs: number) => ({ busy, total, cpus: 2, selfMs, atMs });

  it("is the host's busy cores less this process's own", () => {
    // Over 1 s: the host was busy 75 % of 2 CPUs (1.5 cores), this process used 500 ms (0.5 core).
    expect(othersCores(at(0, 0, 0, 0), at(150, 200, 500, 1000))).toBeCloseTo(1, 9);
  });

  it('is never below 0, and undefined over no time', () => {
    expect(othersCores(at(0, 0, 0, 0), at(10, 200, 900, 1000))).toBe(0);
    expect(othersCores(at(0, 0, 0, 0), at(0, 0, 0, 1000))).toBeUndefined();
    expect(othersCores(at(0, 0, 0, 5), at(10, 20, 0, 5))).toBeUndefined();
  });
});

describe('measuredShort', () => {
  it('is short when the rest of the host left fewer than threads − ½ cores', () => {
    expect(measuredShort(2, 0.4, 2)).toBe(false);
    expect(measuredShort(2, 0.6, 2)).toBe(true);
    expect(measuredShort(1, 1.4, 2)).toBe(false);
    expect(measuredShort(1, 1.6, 2)).toBe(true);
    // 0 is ONNX Runtime's default, every core; a count above the cores wants them all.
    expect(measuredShort(0, 0.6, 4)).toBe(true);
    expect(measuredShort(8, 0.4, 4)).toBe(false);
  });
});

describe('procStatMeter', () => {
  const files = (allowed: string) => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'host-cpu-'));
    writeFileSync(path.join(dir, 'status'), `Name:\tnode\nCpus_allowed_list:\t${allowed}\n`);
    return { stat: path.join(dir, 'stat'), status: path.join(dir, 'status') };
  };

  it('measures a window on a /proc/stat that moves', async () => {
    const { stat: file, status } = files('0-1');
    writeFileSync(file, 'cpu  0 0 0 0 0 0 0 0\ncpu0 0 0 0 0\ncpu1 0 0 0 0\n');
    const end = procStatMeter(file, status).window();
    // All of both CPUs busy since: 2 cores less what this process used meanwhile.
    writeFileSync(file, 'cpu  200 0 0 0 0 0 0 0\ncpu0 100 0 0 0\ncpu1 100 0 0 0\n');
    await new Promise((r) => setTimeout(r, 20));
    const others = end();
    expect(others).toBeGreaterThan(0);
    expect(others).toBeLessThanOrEqual(2);
  });

  it('sees no contention from a CPU this process may not run on', async () => {
    const { stat, status } = files('1');
    writeFileSync(stat, 'cpu  0 0 0 0\ncpu0 0 0 0 0\ncpu1 0 0 0 0\n');
    const end = procStatMeter(stat, status).window();
    // cpu0 fully busy, cpu1 idle: others took nothing from CPU 1.
    writeFileSync(stat, 'cpu  100 0 0 100\ncpu0 100 0 0 0\ncpu1 0 0 0 100\n');
    await new Promise((r) => setTimeout(r, 20));
    expect(end()).toBe(0);
  });

  it('cannot tell where /proc/stat does not read', async () => {
    const meter = procStatMeter(path.join(os.tmpdir(), 'no-such-dir-warmpool', 'stat'));
    expect(meter.window()()).toBeUndefined();
    expect(await meter.sample(1)).toBeUndefined();
  });

  it.skipIf(process.platform !== 'linux')("reads this host's /proc/stat", async () => {
    const others = await procStatMeter().sample(50);
    expect(others).toBeGreaterThanOrEqual(0);
    expect(others).toBeLessThanOrEqual(os.availableParallelism() + os.cpus().length);
  });
});
