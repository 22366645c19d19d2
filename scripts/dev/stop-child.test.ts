import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { stopChild } from './stop-child.ts';

/** A node child that prints `ready` once its SIGTERM handler (if any) is installed. */
function child(script: string) {
  const c = spawn(process.execPath, ['-e', `${script}; console.log('ready'); setInterval(() => {}, 1000);`], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const ready = new Promise<void>((resolve) => c.stdout?.once('data', () => resolve()));
  return { c, ready };
}

describe('stopChild', () => {
  it('stops a child that exits on SIGTERM, with that signal', async () => {
    const { c, ready } = child('');
    await ready;
    await stopChild(c, { graceMs: 10_000 });
    expect(c.signalCode).toBe('SIGTERM');
  });

  it('SIGKILLs a child that ignores the first signal once the grace period ends', async () => {
    const { c, ready } = child("process.on('SIGTERM', () => {})");
    await ready;
    await stopChild(c, { graceMs: 200 });
    expect(c.signalCode).toBe('SIGKILL');
  });

  it('resolves at once for a child that has already exited', async () => {
    const c = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
    await new Promise((r) => c.once('exit', r));
    await stopChild(c);
    expect(c.exitCode).toBe(0);
  });
});
