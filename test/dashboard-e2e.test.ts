/**
 * The operator dashboard end to end: `warmpool dev` as a user runs it (a child process, real
 * Redis, S3, scaler and worker processes), driven through headless Chromium (Debian's
 * `chromium` through playwright-core). The page loads and signs in, shows the demo deployment's
 * workers, a burst of jobs moves the charts (read from the charts' own data), changing standby
 * from the page changes the deployment and then the workers, a read-only tenant is told why it
 * cannot change anything, and the simulator view runs.
 *
 * Skipped, saying so, only where /usr/bin/chromium is missing (scripts/test.mjs installs it).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { CHROMIUM, DEMO, type DevStack, dashboardEnv, KEYS, signIn, startDev, submitJobs } from '../scripts/dashboard-screenshots.ts';
import { testEnv, testServices } from './support/services.ts';

const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  console.warn(
    `[dashboard-e2e] SKIPPED: ${CHROMIUM} is not installed (apt-get install chromium; \`npm test\` installs it when run as root)`,
  );
}

type ChartData = Array<Array<number | null>>;

describe.skipIf(!hasChromium)('dashboard against warmpool dev', () => {
  const cwd = hasChromium ? mkdtempSync(path.join(testServices().tmpDir, 'dashboard-dev-')) : '';
  let env: NodeJS.ProcessEnv;
  let dev: DevStack | undefined;
  let browser: Browser | undefined;
  let page: Page;

  beforeAll(async () => {
    // One request per queue entry and one entry at a time: a worker draining whole entries of a
    // burst empties the queue between the chart's samples, and the queue chart is what is tested.
    env = await dashboardEnv(
      testEnv({ HEARTBEAT_INTERVAL_MS: '500', WARMUP_ITERATIONS: '1', COALESCE_MAX_REQUESTS: '1', WORKER_CONCURRENCY: '1' }),
    );
    dev = await startDev(cwd, env);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1400, height: 1200 } });
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await dev?.stop();
    const redis = createRedis(env.REDIS_URL as string);
    try {
      for await (const keys of scanKeys(redis, `${env.QUEUE_PREFIX}:*`)) await deleteMany(redis, keys);
    } finally {
      await closeRedis(redis);
      rmSync(cwd, { recursive: true, force: true });
    }
  }, 120_000);

  const chart = (name: string): Promise<ChartData> =>
    page.evaluate(
      (n) => (window as unknown as { __dashboard: { charts: Record<string, { data: ChartData }> } }).__dashboard.charts[n]?.data ?? [],
      name,
    );
  const max = (xs: Array<number | null> | undefined) => Math.max(0, ...(xs ?? []).filter((x): x is number => x !== null));
  const sum = (xs: Array<number | null> | undefined) => (xs ?? []).reduce<number>((a, x) => a + (x ?? 0), 0);
  const states = () => page.$$eval('#workers tbody tr', (rows) => rows.map((r) => r.getAttribute('data-state')));

  it('the page loads without a key and refuses an unknown one', async () => {
    const res = await page.goto(`${dev?.url}/dashboard`);
    expect(res?.status()).toBe(200);
    expect(await page.isVisible('#login')).toBe(true);
    expect(await page.isVisible('#app')).toBe(false);
    await page.fill('#api-key', 'not-a-key');
    await page.click('#login-form button[type=submit]');
    await expect.poll(() => page.textContent('#login-error')).toContain('not known');
  });

  it('signs in and shows the demo deployment and its warmed workers', async () => {
    await signIn(page, dev?.url as string, KEYS.ops);
    expect(await page.inputValue('#deployment')).toBe(DEMO);
    expect(await page.textContent('#who')).toBe('ops (admin)');
    await expect.poll(states, { timeout: 30_000 }).toEqual(expect.arrayContaining([expect.stringMatching(/^(active|standby)$/)]));
    // The key stays in this tab: a reload signs in again without the form.
    await page.reload();
    await page.waitForSelector('#workers tbody tr');
    expect(await page.isVisible('#login')).toBe(false);
  });

  it('changing standby from the page changes the deployment, then the workers', async () => {
    const before = (await (await api('/v1/deployments/demo-scorer')).json()) as { standby: number; revision: number };
    const target = before.standby + 1;
    await page.fill('#settings-form input[name=standby]', String(target));
    await page.click('#settings-form button[type=submit]');
    expect(await page.textContent('#confirm-text')).toContain(`standby ${before.standby} → ${target}`);
    // Nothing is written before the confirmation.
    expect(((await (await api('/v1/deployments/demo-scorer')).json()) as { revision: number }).revision).toBe(before.revision);
    await page.click('#confirm-apply');
    await expect.poll(() => page.textContent('#settings-result')).toContain(`Applied: revision ${before.revision + 1}`);
    expect(await (await api('/v1/deployments/demo-scorer')).json()).toMatchObject({ standby: target });
    // The scaler launches and warms workers until that many stand by; the page's table shows them.
    await expect
      .poll(async () => (await states()).filter((s) => s === 'standby').length, { timeout: 120_000, interval: 500 })
      .toBeGreaterThanOrEqual(target);
  }, 150_000);

  it('a burst of jobs moves the charts', async () => {
    const arrivalsBefore = sum((await chart('arrivals'))[1]);
    expect(max((await chart('queue'))[1])).toBe(0); // no job was submitted yet
    let submitted = 0;
    // Waves until the queue chart has seen jobs waiting. The worker drains a wave about as fast as
    // the API accepts it, so a sample taken between waves (the page's, at most one per 2 s) can see
    // none: the series route is also read *while* each wave is accepted, as a second open dashboard
    // would, so the due sample falls while jobs wait.
    for (let wave = 0; wave < 20 && max((await chart('queue'))[1]) === 0; wave++) {
      let accepting = true;
      const wave$ = submitJobs(dev?.url as string, KEYS.load, 400, wave).finally(() => {
        accepting = false;
      });
      while (accepting) {
        await (await api(`/v1/deployments/${DEMO}/series`)).body?.cancel();
        await page.waitForTimeout(100);
      }
      submitted += await wave$;
      await page.waitForTimeout(1_000);
    }
    expect(submitted).toBeGreaterThan(0);
    expect(max((await chart('queue'))[1])).toBeGreaterThan(0);
    await expect
      .poll(async () => sum((await chart('arrivals'))[1]) - arrivalsBefore, { timeout: 30_000 })
      .toBeGreaterThanOrEqual(submitted);
    await expect.poll(async () => max((await chart('batch'))[1]), { timeout: 30_000 }).toBeGreaterThan(0);
    await expect.poll(async () => (await chart('latency'))[2]?.some((x) => x !== null), { timeout: 30_000 }).toBe(true);
    expect(max((await chart('workers'))[3])).toBeGreaterThan(0); // active workers took the jobs
  }, 150_000);

  it('shows the decision log with each decision’s inputs, and runs the simulator view', async () => {
    await expect.poll(() => page.locator('#decisions tbody tr').count(), { timeout: 30_000 }).toBeGreaterThan(0);
    expect(await page.locator('#decisions tbody tr details pre').first().textContent()).toContain('"perWorkerRatePerSec"');
    await page.fill('#sim-form input[name=minutes]', '10');
    await page.fill('#sim-form input[name=standby]', '0');
    await page.click('#sim-form button[type=submit]');
    await page.waitForSelector('#sim-table tbody tr');
    const rows = await page.$$eval('#sim-table tbody th', (ths) => ths.map((th) => th.textContent ?? ''));
    expect(rows[0]).toMatch(/^actual/);
    expect(rows.slice(1).map((r) => r.replace(/ \(.*/, ''))).toEqual(['simulated, current settings', 'simulated, chosen settings']);
    expect(rows[2]).toContain('standby 0');
  }, 60_000);

  it('a tenant outside ADMIN_TENANTS sees why it cannot change settings', async () => {
    const viewer = await (browser as Browser).newPage();
    try {
      await signIn(viewer, dev?.url as string, KEYS.viewer);
      expect(await viewer.textContent('#settings-note')).toContain('may not change deployments');
      expect(await viewer.isDisabled('#settings-form button[type=submit]')).toBe(true);
    } finally {
      await viewer.close();
    }
  });

  function api(route: string): Promise<Response> {
    return fetch(`${dev?.url}${route}`, { headers: { Authorization: `Bearer ${KEYS.ops}` } });
  }
});
