/**
 * The operator dashboard end to end: `warmpool dev` as a user runs it (a child process, real
 * Redis, S3, scaler and worker processes), driven through headless Chromium (Debian's
 * `chromium` through playwright-core). The page loads and signs in, shows the demo deployment's
 * workers and what set the scaler's latest numbers (the pool's terms: SLO sizing, burst standby,
 * holds, the rate's and cold start's sources), a burst of jobs moves the charts (read from the charts' own data), changing standby
 * from the page changes the deployment and then the workers, a read-only tenant is told why it
 * cannot change anything, and the simulator view runs. Switching to another deployment clears
 * every panel of the first at once, and answers for the first that arrive late (held back by
 * the browser's request routing) never repaint the panels. A deployment that joins a shared pool
 * shows in the shared pools panel with the pool's worker, what it holds, its loads and hit ratio.
 *
 * Skipped, saying so, only where /usr/bin/chromium is missing (scripts/test.mjs installs it).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { type Browser, chromium, type Page, type Route } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { CHROMIUM, DEMO, type DevStack, dashboardEnv, KEYS, signIn, startDev, submitJobs } from '../scripts/dashboard-screenshots.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { testEnv, testServices } from './support/services.ts';

const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  console.warn(
    `[dashboard-e2e] SKIPPED: ${CHROMIUM} is not installed (apt-get install chromium; \`npm test\` installs it when run as root)`,
  );
}

type ChartData = Array<Array<number | null>>;
/** The dashboard's state as the page exposes it (window.__dashboard). */
type PageState = {
  model: string;
  polls: number;
  charts: Record<string, { data: ChartData }>;
  last: { series?: { model: string }; pool?: unknown; simulation?: unknown };
};
/** A second deployment for the model switch: min 0, so no worker is started for it. */
const SECOND = 'second-scorer';

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

  it("shows what set the pool's numbers: the latest decision's terms, and the row that set active", async () => {
    await page.waitForSelector('#pool-terms tbody tr[data-term=slo-sizing]', { timeout: 30_000 });
    type Terms = {
      forecast: { burstsBySpan: Array<{ spanS: number; ratePerSec: number }> };
      perWorker: { source: string };
      coldStart: { source: string };
      policy: {
        sloActive: number;
        burstStandby: number;
        stabilisedActive: number;
        heldPool: number;
        activeSetBy: string;
        standbySetBy: string;
        sloFactor: number;
        holdWhy: string;
      };
    };
    // The worker is active (the test before), but the decision on the page may predate its warm-up
    // profile: wait for a decision taken since, as an operator would see on the next tick.
    const rateSource = () =>
      page.evaluate(
        (model) =>
          (
            window as unknown as {
              __dashboard: { last: { pool: { deployments: Array<{ model: string; terms?: { perWorker?: { source?: string } } }> } } };
            }
          ).__dashboard.last.pool.deployments.find((d) => d.model === model)?.terms?.perWorker?.source ?? 'none',
        DEMO,
      );
    await expect.poll(rateSource, { timeout: 30_000 }).toMatch(/^(warm-up|measured)$/);
    // The answer and the table as drawn from it, read at once (a poll may come between two reads).
    const { terms, rows, caption } = await page.evaluate((model) => {
      const s = (window as unknown as { __dashboard: { last: { pool: { deployments: Array<{ model: string; terms: unknown }> } } } })
        .__dashboard;
      const trs = [...document.querySelectorAll<HTMLTableRowElement>('#pool-terms tbody tr')];
      return {
        terms: s.last.pool.deployments.find((d) => d.model === model)?.terms as Terms,
        rows: trs.map((tr) => ({ term: tr.dataset.term, sets: tr.dataset.sets ?? null, cells: [...tr.cells].map((td) => td.textContent) })),
        caption: document.getElementById('pool-terms-note')?.textContent ?? '',
      };
    }, DEMO);
    expect(rows.map((r) => r.term)).toEqual([
      'forecast',
      'per-worker-rate',
      'cold-start',
      'backlog-rows',
      'slo-sizing',
      'backlog',
      'stabilisation',
      'min-lifetime',
      'slo-control',
      'burst-standby',
    ]);
    const value = (term: string) => rows.find((r) => r.term === term)?.cells[1];
    const from = (term: string) => rows.find((r) => r.term === term)?.cells[2];
    const p = terms.policy;
    expect([value('slo-sizing'), value('stabilisation'), value('min-lifetime'), value('burst-standby')]).toEqual([
      `${p.sloActive} active`,
      `${p.stabilisedActive} active`,
      `${p.heldPool} ${p.heldPool === 1 ? 'worker' : 'workers'}`,
      `${p.burstStandby} standby`,
    ]);
    // The SLO control row shows the factor the API gave, the hold row why the hold is what it is.
    expect(value('slo-control')).toBe(`× ${p.sloFactor.toFixed(2)}`);
    expect(from('min-lifetime')).toContain(p.holdWhy);
    // The burst row names the recent peaks by span the standby was weighed against (the forecaster gives them).
    expect(terms.forecast.burstsBySpan.length).toBeGreaterThan(0);
    expect(from('burst-standby')).toContain(`recent peaks: 1 min `);
    // The demo worker has warmed, so its warm-up profile (or a measurement) stands behind the rate.
    expect(terms.perWorker.source).toMatch(/^(warm-up|measured)$/);
    expect(from('per-worker-rate')).toMatch(/^(the warm-up batch profile|measured on busy workers)/);
    expect(from('cold-start')).toMatch(terms.coldStart.source === 'learned' ? /^learnt from the last \d+ starts$/ : /^the setting/);
    // The term that set active is marked; a bound is named in the caption instead.
    const marked = rows.filter((r) => r.sets === 'active').map((r) => r.term);
    if (p.activeSetBy === 'min' || p.activeSetBy === 'max') {
      expect(marked).toEqual([]);
      expect(caption).toContain(`active set by the ${p.activeSetBy} setting`);
    } else expect(marked).toEqual([p.activeSetBy]);
    expect(rows.filter((r) => r.sets === 'standby').map((r) => r.term)).toEqual(p.standbySetBy === 'burst' ? ['burst-standby'] : []);
    expect(caption).toMatch(/^What set the (live|shadow) scaler's decision at /);
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
    await expect
      .poll(() => page.textContent('#settings-result'), { timeout: 30_000 })
      .toContain(`Applied: revision ${before.revision + 1}`);
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
    // The simulated worker is the demo worker as measured (its warm-up profile, and the rate the
    // scaler measured if the burst kept a worker busy), and what was not measured is said in the table.
    type Sim = { world: { source: string; missing: string[] }; actual: { jobs: number; note: string | null } };
    const sim = await page.evaluate(
      () => (window as unknown as { __dashboard: { last: { simulation: Sim } } }).__dashboard.last.simulation,
    );
    // Measured under load only if the scaler saw a busy worker while the burst queued.
    expect(sim.world.source).toMatch(/^profile(\+measured)?$/);
    expect(await page.textContent('#sim-world')).toMatch(/^Simulated worker: .* rows\/s per worker.* from the batch profile/);
    expect(await page.locator('#sim-world [data-missing]').count()).toBe(sim.world.missing.length);
    // The actual row has the sampled waits, or says why it has none.
    if (sim.actual.jobs > 0) expect(await page.textContent('#sim-table tr[data-row=actual] td:nth-child(8)')).toMatch(/^[0-9.]+$/);
    else expect(await page.textContent('#sim-table tr[data-row=actual-note]')).toBe(`actual: ${sim.actual.note}`);
    // The baselines at equal SLO attainment (issue 17's yardsticks).
    await page.waitForSelector('#sim-slo tbody tr[data-baseline=oracle]');
    expect(await page.$$eval('#sim-slo tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-baseline')))).toEqual([
      'static-peak',
      'reactive',
      'oracle',
    ]);
    expect(await page.textContent('#sim-slo-note')).toMatch(/at the cheapest setting that keeps 99 % of jobs within the SLO/);
  }, 60_000);

  it("switching models shows only the new model's data at once, and drops the previous model's late answers", async () => {
    const pageState = () =>
      page.evaluate(() => {
        const s = (window as unknown as { __dashboard: PageState }).__dashboard;
        return { model: s.model, polls: s.polls, seriesModel: s.last.series?.model ?? null, simulation: s.last.simulation !== undefined };
      });
    const panelModels = () => page.$$eval('[data-model]', (els) => els.map((e) => `${e.id}=${e.getAttribute('data-model')}`));
    // What the earlier tests left on demo-scorer's panels.
    expect(await page.textContent('#settings-result')).toContain('Applied: revision');
    expect(await page.isVisible('#sim-table')).toBe(true);
    expect((await states()).length).toBeGreaterThan(0);

    // A second deployment, made while the page is open: the selector offers it at its next poll.
    await publishSecondModel();
    const put = await api(`/v1/deployments/${SECOND}`, {
      method: 'PUT',
      body: JSON.stringify({ version: '1', min: 0, max: 1, standby: 0 }),
    });
    expect(put.status, await put.clone().text()).toBe(200);
    await expect
      .poll(() => page.$$eval('#deployment option', (os) => os.map((o) => (o as HTMLOptionElement).value)), { timeout: 30_000 })
      .toContain(SECOND);

    // Requests are held back by the browser's routing: demo-scorer's simulation and its next chart
    // read until after the switch, and the second model's reads until the empty panels are checked.
    const gate = () => {
      let open = () => {};
      const opened = new Promise<void>((resolve) => {
        open = resolve;
      });
      const hold = async (route: Route) => {
        await opened;
        await route.continue();
      };
      return { open, hold };
    };
    const demoGate = gate();
    const secondGate = gate();
    const isDemo = (url: URL, what: string) => url.pathname.endsWith(`/v1/deployments/${DEMO}/${what}`);
    await page.route((url) => isDemo(url, 'simulation') || isDemo(url, 'series'), demoGate.hold);
    await page.route((url) => url.pathname.includes(`/v1/deployments/${SECOND}`), secondGate.hold);
    try {
      const lateSeries = page.waitForRequest((r) => isDemo(new URL(r.url()), 'series'));
      const lateSimulation = page.waitForEvent('requestfinished', (r) => isDemo(new URL(r.url()), 'simulation'));
      await page.click('#sim-form button[type=submit]');
      expect(await page.textContent('#sim-note')).toBe('Replaying…');
      await lateSeries;

      await page.selectOption('#deployment', SECOND);
      // At once, before any answer: nothing of demo-scorer is left on screen.
      const empty = async () => {
        expect(await page.textContent('#settings-result')).toBe('');
        expect(await page.isVisible('#sim-table')).toBe(false);
        expect(await page.textContent('#sim-note')).toBe('');
        expect(await states()).toEqual([]);
        expect(await page.locator('#decisions tbody tr').count()).toBe(0);
        expect(await page.textContent('#pool-figures')).toBe('');
        expect(await page.locator('#pool-terms tbody tr').count()).toBe(0);
        expect(await page.inputValue('#settings-form input[name=standby]')).toBe('');
        expect(await panelModels()).toEqual(['summary', 'charts', 'settings', 'decisions', 'simulator'].map((id) => `${id}=${SECOND}`));
        expect(await pageState()).toMatchObject({ model: SECOND, seriesModel: null, simulation: false });
      };
      await empty();
      expect(new URL(page.url()).searchParams.get('model')).toBe(SECOND);

      // demo-scorer's late answers arrive while the second model's are still held: dropped, not drawn.
      const lateSeriesDone = page.waitForEvent('requestfinished', (r) => isDemo(new URL(r.url()), 'series'));
      demoGate.open();
      await Promise.all([lateSimulation, lateSeriesDone]);
      await empty();

      // The second model's own data arrives (after demo-scorer's answers were handled).
      secondGate.open();
      await expect.poll(async () => (await pageState()).seriesModel, { timeout: 30_000 }).toBe(SECOND);
      await expect.poll(() => page.inputValue('#settings-form input[name=max]'), { timeout: 30_000 }).toBe('1');
      expect(await page.inputValue('#settings-form input[name=min]')).toBe('0');
      expect(await page.inputValue('#settings-form input[name=standby]')).toBe('0');
      expect(await page.textContent('#settings-note')).toContain(`PUT /v1/deployments/${SECOND}`);
      expect(await pageState()).toMatchObject({ model: SECOND, seriesModel: SECOND, simulation: false });
      expect(await page.isVisible('#sim-table')).toBe(false);
      expect(await page.textContent('#sim-note')).toBe('');
      expect(await page.textContent('#settings-result')).toBe('');
      expect(await states()).toEqual([]); // no worker runs for the second model
      expect(max((await chart('workers'))[3])).toBe(0);
    } finally {
      demoGate.open();
      secondGate.open();
      await page.unrouteAll({ behavior: 'wait' });
    }

    // And back: demo-scorer's panels are its own again.
    await page.selectOption('#deployment', DEMO);
    await expect.poll(async () => (await pageState()).seriesModel, { timeout: 30_000 }).toBe(DEMO);
    await expect.poll(states, { timeout: 30_000 }).toEqual(expect.arrayContaining([expect.stringMatching(/^(active|standby)$/)]));
    expect(await page.textContent('#settings-note')).toContain(`PUT /v1/deployments/${DEMO}`);
  }, 120_000);

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

  it('shows a shared pool: its worker, what it holds, its loads and hit ratio', async () => {
    // SECOND (deployed for the switch above) joins a pool of one worker; its first job places it there.
    expect((await api('/v1/pools/dash', { method: 'PUT', body: JSON.stringify({ max: 1, min: 1, memoryMb: 256 }) })).status).toBe(200);
    expect((await api(`/v1/deployments/${SECOND}`, { method: 'PUT', body: JSON.stringify({ pool: 'dash' }) })).status).toBe(200);
    const card = '#shared-pools [data-pool=dash]';
    await page.waitForSelector(card, { timeout: 30_000 });
    const submitted = await api(`/v1/models/${SECOND}/jobs`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, 4], datatype: 'FP32', data: [0.1, 0.2, 0.3, 0.4] }] }),
    });
    expect(submitted.status).toBe(202);
    const figure = (name: string) => page.textContent(`${card} [data-figure="${name}"] b`);
    // The worker's own counts, summed by GET /v1/pool: a load, and a job finished on it.
    await expect.poll(() => figure('hit ratio'), { timeout: 120_000, interval: 500 }).toMatch(/^\d\.\d{3}$/);
    expect(Number(await figure('loads'))).toBeGreaterThanOrEqual(1);
    expect(await page.$$eval(`${card} .held`, (xs) => xs.map((x) => x.textContent))).toContain(`${SECOND}@1 active`);
    expect(await page.$$eval(`${card} .pool-workers tbody tr`, (rows) => rows.length)).toBe(1);
    expect(await page.textContent(card)).toContain('Latest plan at');
    // Out again, so the pool can go: nothing else in this suite uses it.
    expect((await api(`/v1/deployments/${SECOND}`, { method: 'PUT', body: JSON.stringify({ pool: null }) })).status).toBe(200);
    expect((await api('/v1/pools/dash', { method: 'DELETE' })).status).toBe(200);
    await expect.poll(() => page.isVisible('#shared-pools'), { timeout: 30_000 }).toBe(false);
  }, 180_000);

  it('when the API stops answering, the panels keep what it last said, dimmed, and the status says since when', async () => {
    // Signed in already (the key stays in the tab); the demo deployment has workers to keep.
    await page.selectOption('#deployment', DEMO);
    await page.waitForSelector('#workers tbody tr', { timeout: 30_000 });
    await expect.poll(() => page.textContent('#status'), { timeout: 30_000 }).toMatch(/^updated /);
    const classOf = async () => (await page.getAttribute('#app', 'class')) ?? '';
    expect(await classOf()).not.toContain('stale');
    await page.route(
      (url) => url.pathname.endsWith('/v1/pool'),
      (route) => route.abort('connectionrefused'),
    );
    try {
      await expect.poll(classOf, { timeout: 30_000 }).toContain('stale');
      expect(await page.textContent('#status')).toMatch(/^update failed: .*; the panels show what it said at /);
      expect(await page.$$eval('#workers tbody tr', (rows) => rows.length)).toBeGreaterThan(0); // kept, not cleared
      expect(await page.$eval('#summary', (e) => Number(getComputedStyle(e).opacity))).toBeLessThan(1);
    } finally {
      await page.unrouteAll({ behavior: 'wait' });
    }
    await expect.poll(classOf, { timeout: 30_000 }).not.toContain('stale');
  }, 90_000);

  function api(route: string, init: RequestInit = {}): Promise<Response> {
    const headers = { Authorization: `Bearer ${KEYS.ops}`, ...(init.body ? { 'Content-Type': 'application/json' } : {}) };
    return fetch(`${dev?.url}${route}`, { ...init, headers });
  }

  /** Publishes a small model as SECOND in the dev stack's bucket (the stack uses the suite's S3 server). */
  async function publishSecondModel(): Promise<void> {
    const store = createS3ObjectStore(loadConfig(env).s3);
    try {
      const registry = createModelRegistry({ store, prefix: loadConfig(env).s3.prefix });
      await registry.publish({ name: SECOND, version: '1', bytes: buildMlpModel({ features: 4, hidden: 8, layers: 1 }), maxBatch: 8 });
    } finally {
      store.close();
    }
  }
});
