/**
 * Screenshots of the operator dashboard under load, for the README (docs/dashboard*.png):
 *
 *   node --import tsx scripts/dashboard-screenshots.ts [--seconds 90] [--out docs]
 *
 * Starts `warmpool dev` in a temporary folder (its own Redis and S3, unless REDIS_URL/S3_ENDPOINT
 * are set), opens /dashboard in headless Chromium (Debian's `chromium`, driven by playwright-core),
 * signs in, sends waves of jobs for a while so the charts have something to show, runs the
 * simulator view, and saves the page. The helpers are shared with test/dashboard-e2e.test.ts.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium, type Page } from 'playwright-core';
import { freePort } from './dev/free-port.ts';

export const CHROMIUM = '/usr/bin/chromium';
const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
export const DEMO = 'demo-scorer';
export const KEYS = { ops: 'key-ops-0123456789', viewer: 'key-viewer-0123456789', load: 'key-load-0123456789' };

export interface DevStack {
  url: string;
  /** Everything `warmpool dev` printed so far. */
  output(): string;
  /** Ctrl-C, as a user would: drains and stops; SIGKILL if it has not exited after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/** The environment for a dev stack the dashboard tools drive: three tenants (ops is admin), no rate limit in the way of a burst. */
export async function dashboardEnv(base: NodeJS.ProcessEnv): Promise<NodeJS.ProcessEnv> {
  return {
    ...base,
    PORT: String(await freePort()),
    API_KEYS: Object.entries(KEYS)
      .map(([tenant, key]) => `${tenant}:${key}`)
      .join(','),
    ADMIN_TENANTS: 'ops',
    RATE_LIMIT_RPS: '100000',
    RATE_LIMIT_BURST: '100000',
    LOG_LEVEL: 'warn',
  };
}

/** Starts `warmpool dev` in `cwd` and resolves once it prints its URL (a worker is warmed by then). */
export function startDev(cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 240_000): Promise<DevStack> {
  const child = spawn(process.execPath, [BIN, 'dev'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stack = (url: string): DevStack => ({ url, output: () => output, stop: (graceMs = 60_000) => stopChild(child, exited, graceMs) });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`warmpool dev did not come up in ${timeoutMs} ms:\n${output}`)), timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      void stopChild(child, exited, 5_000).then(() => reject(err));
    };
    const onData = (d: Buffer) => {
      output += d.toString();
      const match = /warmpool is up: (http:\/\/\S+)/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(stack(match[1] as string));
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => fail(new Error(`warmpool dev exited (${code}) before it was up:\n${output}`)));
  });
}

async function stopChild(child: ChildProcess, exited: Promise<void>, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Submits `count` one-row jobs of the demo model at once; resolves with how many were accepted. */
export async function submitJobs(url: string, key: string, count: number, seed = 0): Promise<number> {
  const submit = async (i: number) => {
    // A distinct row per (seed, i): equal rows would be answered by the result cache, not the pool.
    const n = seed * 100_003 + i;
    const data = Array.from({ length: 64 }, (_, j) => (((n * 64 + j) * 0.6180339887) % 1) - 0.5);
    const res = await fetch(`${url}/v1/models/${DEMO}/jobs`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, 64], datatype: 'FP32', data }] }),
    });
    await res.body?.cancel();
    return res.status === 202 ? 1 : 0;
  };
  const accepted = await Promise.all(Array.from({ length: count }, (_, i) => submit(i)));
  return accepted.reduce<number>((a, b) => a + b, 0);
}

/** Opens the dashboard and signs in with `key`; resolves once the workers table has a row. */
export async function signIn(page: Page, url: string, key: string, query = 'poll=1000'): Promise<void> {
  await page.goto(`${url}/dashboard?${query}`);
  await page.fill('#api-key', key);
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('#workers tbody tr');
}

async function main(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { seconds: { type: 'string', default: '90' }, out: { type: 'string', default: 'docs' } } });
  const seconds = Number(values.seconds);
  const out = path.resolve(values.out ?? 'docs');
  mkdirSync(out, { recursive: true });
  const cwd = mkdtempSync(path.join(os.tmpdir(), 'warmpool-dashboard-'));
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const dev = await startDev(cwd, await dashboardEnv(process.env));
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  try {
    say(`warmpool dev at ${dev.url}; loading it for ${seconds} s`);
    const page = await browser.newPage({ viewport: { width: 1440, height: 1300 }, deviceScaleFactor: 1 });
    await signIn(page, dev.url, KEYS.ops, 'poll=1000&minutes=5');
    // Waves: a rising and falling rate, so arrivals, queue, workers and waits all move.
    const started = Date.now();
    for (let wave = 0; Date.now() - started < seconds * 1000; wave++) {
      const size = Math.round(150 + 450 * Math.abs(Math.sin(wave / 5)));
      await submitJobs(dev.url, KEYS.load, size, wave);
      await page.waitForTimeout(1_500);
    }
    await page.screenshot({ path: path.join(out, 'dashboard.png') });
    // The simulator replays whole minutes: let the minute the load ended in finish first.
    await page.waitForTimeout(60_000 - (Date.now() % 60_000) + 1_000);
    await page.fill('#sim-form input[name=standby]', '0');
    await page.click('#sim-form button[type=submit]');
    await page.waitForSelector('#sim-table tbody tr');
    await page.locator('#simulator').screenshot({ path: path.join(out, 'dashboard-simulator.png') });
    await page.locator('#decisions').screenshot({ path: path.join(out, 'dashboard-decisions.png') });
    say(
      `saved ${['dashboard.png', 'dashboard-simulator.png', 'dashboard-decisions.png'].map((f) => path.join(values.out ?? 'docs', f)).join(', ')}`,
    );
    return 0;
  } finally {
    await browser.close();
    await dev.stop();
    rmSync(cwd, { recursive: true, force: true });
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err);
      process.exitCode = 1;
    },
  );
}
