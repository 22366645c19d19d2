// The operator dashboard's page module (served by api/dashboard/page.ts). Plain ES module, no
// build step, no framework: it signs in with an API key (kept in sessionStorage, sent as a
// Bearer token), polls the JSON routes and draws them with uPlot (loaded before this module).
// Data from the API is only ever written with textContent, never parsed as HTML.
//
// `window.__dashboard` exposes the state (charts, last answers) to tests and to curious operators.
//
// One model at a time: every panel below the header shows the selected deployment and carries its
// name in `data-model`. Switching models clears every panel at once and bumps `state.generation`;
// each request remembers the generation it was made in and drops its answer if the selection
// moved on meanwhile, so a slow answer for the previous model can never paint over the new one.

const KEY = 'warmpool.apiKey';
const params = new URLSearchParams(location.search);
const POLL_MS = Math.max(500, Number(params.get('poll')) || 2000);
const MINUTES = Math.max(1, Number(params.get('minutes')) || 15);
const COLORS = { blue: '#1f6feb', orange: '#d4700b', green: '#1a7f37', purple: '#8250df', red: '#cf222e', grey: '#6e7781' };

const $ = (id) => document.getElementById(id);
const state = {
  key: sessionStorage.getItem(KEY),
  session: null,
  model: null,
  generation: 0,
  deployment: null,
  charts: {},
  last: {},
  polls: 0,
};
window.__dashboard = state;

/** An element with attributes and children (strings become text nodes). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child ?? '')));
  return node;
}

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(path, init = {}) {
  const headers = { Authorization: `Bearer ${state.key}` };
  if (init.body) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { ...init, headers });
  const text = await res.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!res.ok) throw new ApiError(res.status, body?.error?.code ?? '', body?.error?.message ?? `${res.status} ${res.statusText}`);
  return body;
}

// ---- sign in / out ----

async function signIn(key) {
  state.key = key;
  state.session = await api('v1/session');
  sessionStorage.setItem(KEY, key);
}

function signOut(message = '') {
  sessionStorage.removeItem(KEY);
  state.key = null;
  state.session = null;
  $('app').hidden = true;
  $('logout').hidden = true;
  $('deployment').hidden = true;
  $('who').textContent = '';
  $('login').hidden = false;
  $('login-error').textContent = message;
}

$('login-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('login-error').textContent = '';
  try {
    await signIn($('api-key').value.trim());
    $('api-key').value = '';
    await start();
  } catch (err) {
    state.key = null;
    $('login-error').textContent = err.status === 401 ? 'That API key is not known to this server.' : `Could not sign in: ${err.message}`;
  }
});

$('logout').addEventListener('click', () => signOut());

// ---- polling ----

let timer;

async function start() {
  $('login').hidden = true;
  $('app').hidden = false;
  $('logout').hidden = false;
  $('who').textContent = `${state.session.tenant}${state.session.admin ? ' (admin)' : ' (read-only)'}`;
  const pool = await api('v1/pool');
  const wanted = params.get('model');
  listDeployments(pool.deployments);
  const model = pool.deployments.find((d) => d.model === wanted)?.model ?? pool.deployments[0]?.model ?? null;
  if (!model) $('status').textContent = 'No deployments yet: deploy a model (warmpool deploy M).';
  await selectModel(model);
}

/** The selector's options follow the deployments (one deployed while the page is open appears). */
function listDeployments(deployments) {
  const select = $('deployment');
  const names = deployments.map((d) => d.model);
  const shown = [...select.options].map((o) => o.value);
  if (names.join('\n') !== shown.join('\n')) {
    select.replaceChildren(...names.map((m) => el('option', { value: m }, m)));
    if (state.model) select.value = state.model;
  }
  select.hidden = names.length === 0;
}

$('deployment').addEventListener('change', (event) => selectModel(event.target.value));

/** Shows `model`: every panel of the previous one is cleared first, and its answers still in flight are dropped. */
async function selectModel(model) {
  state.generation++;
  state.model = model;
  if (model) $('deployment').value = model;
  clearModelPanels();
  if (model && params.get('model') !== model) {
    params.set('model', model);
    history.replaceState(null, '', `?${params}`);
  }
  await Promise.all([loadSettings(), poll()]);
}

/** True while `generation` is still the selection a request was made for. */
const current = (generation) => generation === state.generation;

/** Empties every panel that belongs to a model, so nothing of the previous one stays on screen. */
function clearModelPanels() {
  clearTimeout(timer);
  for (const chart of Object.values(state.charts)) chart.destroy();
  state.charts = {};
  state.last = {};
  state.deployment = null;
  pending = null;
  for (const container of document.querySelectorAll('.chart')) delete container.dataset.points;
  $('pool-figures').replaceChildren();
  $('workers').querySelector('tbody').replaceChildren();
  $('pool-terms').querySelector('tbody').replaceChildren();
  $('pool-terms-note').textContent = '';
  renderTuning(null);
  $('decisions').querySelector('tbody').replaceChildren();
  $('shadow').textContent = '';
  const form = $('settings-form');
  for (const f of FIELDS) form.elements[f].value = '';
  $('settings-note').textContent = state.model ? `Loading ${state.model}…` : '';
  $('settings-result').textContent = '';
  $('settings-result').className = '';
  $('confirm').hidden = true;
  // What was typed into the simulator was a policy for the previous model; the minutes are not.
  for (const input of $('sim-form').querySelectorAll('input')) if (input.name !== 'minutes') input.value = '';
  clearSimulation();
  for (const panel of MODEL_PANELS) $(panel).dataset.model = state.model ?? '';
}

/** The sections whose content belongs to the selected model. */
const MODEL_PANELS = ['summary', 'charts', 'settings', 'decisions', 'simulator'];

function clearSimulation() {
  state.charts.sim?.destroy();
  delete state.charts.sim;
  delete state.last.simulation;
  $('sim-note').textContent = '';
  $('sim-world').replaceChildren();
  $('sim-table').querySelector('tbody').replaceChildren();
  $('sim-table').hidden = true;
  $('sim-slo').querySelector('tbody').replaceChildren();
  $('sim-slo').hidden = true;
}

async function poll() {
  clearTimeout(timer);
  if (!state.key || !state.model) return;
  const generation = state.generation;
  const model = state.model;
  try {
    const [pool, series] = await Promise.all([
      api('v1/pool'),
      api(`v1/deployments/${encodeURIComponent(model)}/series?minutes=${MINUTES}`),
    ]);
    if (!current(generation)) return;
    state.last.pool = pool;
    state.last.series = series;
    listDeployments(pool.deployments);
    const view = pool.deployments.find((d) => d.model === model);
    if (view) renderPool(view);
    else $('shadow').textContent = `${model} is no longer deployed.`;
    renderSharedPools(pool.sharedPools ?? []);
    renderCharts(series);
    state.polls++;
    state.updatedAt = Date.now();
    $('app').classList.remove('stale');
    $('status').className = '';
    $('status').textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    if (!current(generation)) return;
    if (err.status === 401) return signOut('Your API key was refused: sign in again.');
    // The panels keep what the API last said, dimmed, so nobody reads them as live.
    $('app').classList.add('stale');
    $('status').className = 'error';
    const since = state.updatedAt ? `; the panels show what it said at ${new Date(state.updatedAt).toLocaleTimeString()}` : '';
    $('status').textContent = `update failed: ${err.message}${since}`;
  }
  timer = setTimeout(poll, POLL_MS);
}

// ---- the pool and the decision log ----

const time = (ms) => new Date(ms).toLocaleTimeString();

function renderPool(view) {
  const q = view.queue;
  const byState = {};
  for (const w of view.workers) byState[w.state] = (byState[w.state] ?? 0) + 1;
  const figures = [
    ['workers', view.workers.length],
    ...Object.entries(byState).map(([s, n]) => [s, n]),
    ['waiting', q.waiting + q.prioritized + q.delayed],
    ['running', q.active],
    ['oldest waiting', `${(q.oldestAgeMs / 1000).toFixed(1)} s`],
    // Of the rows that need a worker: requests the result cache answers are not in it (the arrivals chart shows them apart).
    ['forecast', view.forecast ? `${view.forecast.ratePerSec.toFixed(2)} rows/s to the workers (${view.forecast.method})` : '—'],
    ['desired', view.desired ? `${view.desired.active} active + ${view.desired.standby} standby` : '—'],
  ];
  $('pool-figures').replaceChildren(...figures.map(([k, v]) => el('span', { 'data-figure': k }, `${k} `, el('b', {}, v))));
  $('workers')
    .querySelector('tbody')
    .replaceChildren(
      ...view.workers.map((w) =>
        el(
          'tr',
          { 'data-worker': w.id, 'data-state': w.state },
          el('td', {}, w.id),
          el('td', {}, w.version),
          el('td', { class: `state-${w.state}` }, w.state),
          el('td', {}, w.rowsPerSec.toFixed(0)),
          el('td', {}, time(w.since)),
        ),
      ),
    );
  $('shadow').textContent = !view.desired
    ? 'No scaler decision recorded for this deployment yet.'
    : view.desired.shadow
      ? 'Only a shadow scaler decides for this deployment (warmpool scaler --shadow): its decisions are recorded, not applied. Shadow mode is a property of the scaler process, not of a deployment.'
      : 'A live scaler applies these settings; a shadow scaler (warmpool scaler --shadow) may run beside it to judge another policy.';
  renderTerms(view.terms);
  renderTuning(view.terms?.tuning ?? null);
  renderDecisions(view.decisions);
}

// ---- shared pools (GET /v1/pool `sharedPools`): workers, what each holds, loads, evictions, hit ratio ----

const mb = (bytes) => `${Math.round(bytes / 2 ** 20)} MB`;

/** One card per named pool; the section stays hidden while there is none. */
function renderSharedPools(pools) {
  $('shared-pools').hidden = pools.length === 0;
  $('shared-pools-list').replaceChildren(...pools.map(sharedPoolCard));
}

function sharedPoolCard(p) {
  const c = p.counts;
  const t = p.latest?.terms;
  const figures = [
    ['workers', p.workers.length],
    ['members', p.members.length],
    ['resident', p.resident],
    ['loads', c ? c.loads : '—'],
    ['evictions', c ? c.evictions : '—'],
    ['hit ratio', c && c.hitRatio !== null ? c.hitRatio.toFixed(3) : '—'],
    ['planned', p.latest ? `${p.latest.active} active + ${p.latest.standby} standby${t ? ` (set by ${t.activeSetBy})` : ''}` : '—'],
    ['burst standby', t ? `${t.pooledBurstStandby} pooled vs ${t.perModelStandbySum} summed per model` : '—'],
  ];
  const workers = p.workers.map((w) =>
    el(
      'tr',
      { 'data-worker': w.id, 'data-state': w.state },
      el('td', {}, w.id),
      el('td', { class: `state-${w.state}` }, w.state),
      el(
        'td',
        { class: 'holds' },
        ...(w.models.length === 0
          ? ['nothing: a standby']
          : w.models.map((m) =>
              el('span', { class: `held held-${m.state}`, 'data-model': m.model }, `${m.model}@${m.version} ${m.state}`),
            )),
      ),
      el(
        'td',
        {},
        w.memoryBudgetBytes ? `${mb(w.models.reduce((n, m) => n + (m.residentBytes ?? 0), 0))} of ${mb(w.memoryBudgetBytes)}` : '—',
      ),
      el('td', {}, w.counts ? `${w.counts.loads} / ${w.counts.evictions}` : '—'),
      el('td', {}, time(w.since)),
    ),
  );
  const actions = p.latest ? [...p.latest.loads.map((a) => ['load', a]), ...p.latest.evictions.map((a) => ['evict', a])] : [];
  return el(
    'div',
    { class: 'shared-pool', 'data-pool': p.name },
    el('h3', {}, p.name, el('small', {}, ` max ${p.max} · min ${p.min} · standby ${p.standby} · ${p.memoryMb} MB a worker`)),
    el('div', { class: 'figures' }, ...figures.map(([k, v]) => el('span', { 'data-figure': k }, `${k} `, el('b', {}, v)))),
    el(
      'table',
      { class: 'pool-workers' },
      el('thead', {}, el('tr', {}, ...['worker', 'state', 'holds', 'resident', 'loads / evictions', 'since'].map((h) => el('th', {}, h)))),
      el('tbody', {}, ...workers),
    ),
    el(
      'p',
      { class: 'muted' },
      p.latest
        ? `Latest plan at ${time(p.latest.at)}${p.latest.shadow ? ' (shadow)' : ''}: ${p.latest.reasons.join('; ')}`
        : 'No plan recorded for this pool yet.',
    ),
    ...(actions.length > 0
      ? [
          el(
            'ul',
            { class: 'pool-actions' },
            ...actions.map(([kind, a]) => el('li', { 'data-action': kind }, `${kind} ${a.model} on ${a.workerId}: ${a.reason}`)),
          ),
        ]
      : []),
  );
}

// ---- the self-tuning choice (GET /v1/pool `terms.tuning`): each candidate replayed over the window ----

function renderTuning(tuning) {
  const table = $('pool-tuning');
  table.hidden = !tuning;
  if (!tuning) {
    table.querySelector('tbody').replaceChildren();
    $('pool-tuning-note').textContent = '';
    return;
  }
  const rows = tuning.table.map((c) =>
    el(
      'tr',
      { 'data-candidate': c.name, 'data-chosen': c.name === tuning.chosen.name ? 'yes' : null },
      el('td', {}, c.name),
      el('td', {}, c.partial ? '—' : `${(c.attainment * 100).toFixed(2)} %${c.met ? '' : ' (missed)'}`),
      el('td', {}, c.partial ? '—' : c.cost.toFixed(0)),
      el('td', {}, c.partial ? '—' : String(c.coldStarts)),
      el('td', {}, c.name === tuning.chosen.name ? 'chosen' : c.partial ? 'left out: CPU budget spent' : ''),
    ),
  );
  table.querySelector('tbody').replaceChildren(...rows);
  $('pool-tuning-note').textContent =
    `Self-tuning at ${time(tuning.at)}: ${tuning.chosen.name}, ${tuning.why} (window ${time(tuning.fromMs)} – ${time(tuning.toMs)}, ${tuning.cpuMs} ms of CPU)`;
}

// ---- what set the pool's numbers (GET /v1/pool `terms`, named as the policy names them) ----

const rate = (perSec) => `${perSec.toFixed(2)} rows/s`;
const secs = (ms) => `${(ms / 1000).toFixed(ms < 10_000 ? 1 : 0)} s`;
const RATE_SOURCES = {
  measured: 'measured on busy workers',
  'warm-up': 'the warm-up batch profile (no busy worker measured yet)',
  none: 'none known yet: a low rate assumed, scale-down held',
};
const BOUNDS = { min: 'the min setting', max: 'the max setting', setting: 'the standby setting' };

/**
 * One row per term: [key, term, value, where it comes from, the counts it set]. `activeSetBy`
 * and `standbySetBy` mark the row that set each count; a bound (min, max, the standby setting)
 * is named in the caption instead.
 */
/** ' (recent peaks: 1 min 7.1/s · 2 min 6.0/s)', or nothing where the forecaster gave none. */
function burstPeaks(bursts) {
  if (!bursts || bursts.length === 0) return '';
  return ` (recent peaks: ${bursts.map((b) => `${Math.round(b.spanS / 60)} min ${rate(b.ratePerSec)}`).join(' · ')})`;
}

function termRows(t) {
  const f = t.forecast;
  const p = t.policy;
  const setsActive = (key) => (p?.activeSetBy === key ? 'active' : '');
  const upper =
    f.upperRatePerSec === null ? 'no upper quantile' : `q${Math.round((f.upperQuantile ?? 0.5) * 100)} ${rate(f.upperRatePerSec)}`;
  const rows = [
    [
      'forecast',
      'forecast',
      `mean ${rate(f.ratePerSec)} · ${upper}`,
      `${f.method}, ${f.horizonS} s ahead${f.dispersion === null ? '' : `, dispersion ${f.dispersion.toFixed(1)}`}`,
      '',
    ],
    ['per-worker-rate', 'per-worker rate', rate(t.perWorker.ratePerSec), RATE_SOURCES[t.perWorker.source] ?? t.perWorker.source, ''],
    [
      'cold-start',
      'cold start',
      secs(t.coldStart.ms),
      t.coldStart.source === 'learned' ? `learnt from the last ${t.coldStart.samples} starts` : 'the setting (no start measured yet)',
      '',
    ],
    [
      'backlog-rows',
      'backlog',
      `${t.backlog.rows.toFixed(0)} rows`,
      `${t.backlog.jobs} jobs × ${t.backlog.rowsPerJob.toFixed(1)} rows`,
      '',
    ],
  ];
  if (!p) return rows;
  return [
    ...rows,
    [
      'slo-sizing',
      'SLO sizing',
      `${p.sloActive} active`,
      `queue wait within ${secs(t.sloQueueWaitMs)} at q${Math.round(p.quantile * 100)} ${rate(p.upperRatePerSec)}`,
      setsActive('slo-sizing'),
    ],
    ['backlog', 'backlog drain', `${p.backlogActive} active`, 'to clear the queued rows in time', setsActive('backlog')],
    [
      'stabilisation',
      'stabilisation',
      `${p.stabilisedActive} active`,
      'the most needed within the scale-down window',
      setsActive('stabilisation'),
    ],
    [
      'min-lifetime',
      'minimum lifetime',
      `${p.heldPool} ${p.heldPool === 1 ? 'worker' : 'workers'}`,
      `the pool held ${secs(p.minLifetimeMs)} after it was needed${p.holdWhy ? ` (${p.holdWhy})` : ''}`,
      setsActive('min-lifetime'),
    ],
    [
      'slo-control',
      'SLO control',
      `× ${(p.sloFactor ?? 1).toFixed(2)}`,
      'capacity factor moved by the measured misses and forecast errors at the SLO time scale',
      '',
    ],
    [
      'burst-standby',
      'standby for burst',
      `${p.burstStandby} standby`,
      `the burst a ${secs(p.coldStartMs)} cold start cannot absorb${burstPeaks(f.burstsBySpan)}`,
      p.standbySetBy === 'burst' ? 'standby' : '',
    ],
  ];
}

function renderTerms(t) {
  const note = $('pool-terms-note');
  if (!t) {
    $('pool-terms').querySelector('tbody').replaceChildren();
    note.textContent = '';
    return;
  }
  const rows = termRows(t).map(([key, term, value, from, sets]) =>
    el(
      'tr',
      { 'data-term': key, 'data-sets': sets || null },
      el('td', {}, term),
      el('td', {}, value),
      el('td', {}, from),
      el('td', {}, sets),
    ),
  );
  $('pool-terms')
    .querySelector('tbody')
    .replaceChildren(...rows);
  const p = t.policy;
  const bounds = [
    BOUNDS[p?.activeSetBy] ? `active set by ${BOUNDS[p.activeSetBy]}` : '',
    BOUNDS[p?.standbySetBy] ? `standby set by ${BOUNDS[p.standbySetBy]}` : '',
  ].filter(Boolean);
  note.textContent = [
    `What set the ${t.shadow ? 'shadow' : 'live'} scaler's decision at ${time(t.at)}`,
    ...(p ? bounds : ['the policy that decided gave no terms']),
  ].join('; ');
}

function renderDecisions(decisions) {
  const rows = decisions.map((d) => {
    const b = d.backlog;
    const w = d.workers;
    const inputs = {
      forecast: d.forecast,
      backlog: d.backlog,
      workers: d.workers,
      perWorkerRatePerSec: d.perWorkerRatePerSec,
      settings: d.settings,
      planned: d.planned,
      applied: d.applied,
    };
    return el(
      'tr',
      {},
      el('td', {}, time(d.at)),
      el('td', {}, d.shadow ? 'shadow' : 'live'),
      el('td', {}, `${d.forecast.ratePerSec.toFixed(2)} (${d.forecast.method})`),
      el('td', {}, `${b.waiting + b.prioritized + b.delayed} waiting, ${b.active} running`),
      el('td', {}, `${w.starting}/${w.standby}/${w.active}/${w.draining}`),
      el('td', {}, `${d.decision.active}/${d.decision.standby}/+${d.decision.launch}/−${d.decision.drain}`),
      el(
        'td',
        { class: 'reasons' },
        d.decision.reasons.join('; '),
        el('details', {}, el('summary', {}, 'inputs'), el('pre', {}, JSON.stringify(inputs, null, 2))),
      ),
    );
  });
  $('decisions')
    .querySelector('tbody')
    .replaceChildren(...rows);
}

// ---- charts ----

const CHARTS = {
  arrivals: {
    x: (s) => s.arrivals.t,
    lines: [
      ['arrivals (to the workers)', (s) => s.arrivals.perMin, COLORS.blue],
      ['answered from the result cache', (s) => s.arrivals.cachedPerMin, COLORS.purple, [2, 3]],
      ['served (online + bulk)', (s) => s.arrivals.servedPerMin, COLORS.green],
      ['forecast', (s) => s.arrivals.forecastPerMin, COLORS.orange, [6, 4]],
    ],
  },
  queue: {
    x: (s) => s.pool.t,
    lines: [
      ['waiting', (s) => s.pool.queued, COLORS.red],
      ['running', (s) => s.pool.running, COLORS.blue],
      ['oldest waiting (s)', (s) => s.pool.oldestAgeS, COLORS.grey, [4, 4], 'age'],
    ],
  },
  workers: {
    x: (s) => s.pool.t,
    lines: [
      ['starting', (s) => s.pool.starting, COLORS.orange],
      ['standby', (s) => s.pool.standby, COLORS.blue],
      ['active', (s) => s.pool.active, COLORS.green],
      ['draining', (s) => s.pool.draining, COLORS.grey],
    ],
  },
  batch: { x: (s) => s.batches.t, lines: [['mean rows', (s) => s.batches.meanRows, COLORS.purple]] },
  latency: {
    x: (s) => s.batches.t,
    lines: [
      ['p50', (s) => s.batches.waitP50Ms, COLORS.green],
      ['p95', (s) => s.batches.waitP95Ms, COLORS.orange],
      ['p99', (s) => s.batches.waitP99Ms, COLORS.red],
    ],
  },
};

function chartOptions(container, lines) {
  const secondScale = lines.some((l) => l[4]);
  return {
    width: Math.max(300, container.clientWidth),
    height: 220,
    scales: {
      x: { time: true },
      y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] },
      age: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] },
    },
    series: [
      {},
      ...lines.map(([label, , stroke, dash, scale]) => ({
        label,
        stroke,
        width: 2,
        dash,
        scale: scale ?? 'y',
        spanGaps: false,
        points: { show: false },
      })),
    ],
    axes: [{}, { scale: 'y' }, ...(secondScale ? [{ scale: 'age', side: 1, grid: { show: false } }] : [])],
  };
}

function renderCharts(series) {
  for (const [name, def] of Object.entries(CHARTS)) {
    const data = [def.x(series), ...def.lines.map(([, pick]) => pick(series))];
    const container = $(`chart-${name}`);
    if (!state.charts[name]) state.charts[name] = new window.uPlot(chartOptions(container, def.lines), data, container);
    else state.charts[name].setData(data);
    container.dataset.points = String(data[0].length);
  }
}

window.addEventListener('resize', () => {
  for (const [name, chart] of Object.entries(state.charts))
    chart.setSize({ width: Math.max(300, $(`chart-${name}`).clientWidth), height: 220 });
});

// ---- settings ----

const FIELDS = ['min', 'max', 'standby'];

async function loadSettings() {
  if (!state.model) return;
  const generation = state.generation;
  let deployment;
  try {
    deployment = await api(`v1/deployments/${encodeURIComponent(state.model)}`);
  } catch (err) {
    if (current(generation)) $('settings-note').textContent = `Could not read ${state.model}: ${err.message}`;
    return;
  }
  if (!current(generation)) return;
  state.deployment = deployment;
  const form = $('settings-form');
  for (const f of FIELDS) form.elements[f].value = state.deployment[f];
  const simForm = $('sim-form');
  for (const f of FIELDS) simForm.elements[f].placeholder = state.deployment[f];
  const readOnly = !state.session.admin;
  for (const input of form.querySelectorAll('input, button')) input.disabled = readOnly;
  $('settings-note').textContent = readOnly
    ? `Read-only: tenant "${state.session.tenant}" may not change deployments (it is not in ADMIN_TENANTS).`
    : `Revision ${state.deployment.revision}, updated ${new Date(state.deployment.updatedAt).toLocaleString()}. Changes go through PUT /v1/deployments/${state.model}.`;
}

let pending = null;

$('settings-form').addEventListener('submit', (event) => {
  event.preventDefault();
  if (!state.deployment) return;
  const form = event.target;
  const change = {};
  for (const f of FIELDS) {
    const value = Number(form.elements[f].value);
    if (value !== state.deployment[f]) change[f] = value;
  }
  $('settings-result').textContent = '';
  if (Object.keys(change).length === 0) {
    $('settings-result').textContent = 'Nothing to change.';
    return;
  }
  pending = { change, revision: state.deployment.revision, model: state.model, generation: state.generation };
  const what = Object.entries(change).map(([f, v]) => `${f} ${state.deployment[f]} → ${v}`);
  $('confirm-text').textContent = `Change ${state.model}: ${what.join(', ')}? The scaler acts on it at its next tick.`;
  $('confirm').hidden = false;
});

$('confirm-cancel').addEventListener('click', () => {
  pending = null;
  $('confirm').hidden = true;
});

$('confirm-apply').addEventListener('click', async () => {
  if (!pending || !current(pending.generation)) return;
  const { change, revision, model, generation } = pending;
  pending = null;
  $('confirm').hidden = true;
  let text;
  let ok = false;
  try {
    const body = JSON.stringify({ ...change, ifRevision: revision });
    const updated = await api(`v1/deployments/${encodeURIComponent(model)}`, { method: 'PUT', body });
    ok = true;
    text = `Applied: revision ${updated.revision} (min ${updated.min}, max ${updated.max}, standby ${updated.standby}).`;
  } catch (err) {
    text =
      err.status === 403
        ? `Not allowed: tenant "${state.session.tenant}" may not change deployments (ask for it to be added to ADMIN_TENANTS).`
        : err.code === 'revision_conflict'
          ? 'Someone changed this deployment meanwhile: the form shows the new settings, review and apply again.'
          : `Not applied: ${err.message}`;
  }
  if (!current(generation)) {
    // The page shows another model now: say what became of the change where it cannot be taken for that model's.
    $('status').className = ok ? '' : 'error';
    $('status').textContent = `${model}: ${text}`;
    return;
  }
  $('settings-result').className = ok ? 'ok' : 'error';
  $('settings-result').textContent = text;
  await loadSettings();
});

// ---- simulator ----

$('sim-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  if (!state.model) return;
  const generation = state.generation;
  const query = new URLSearchParams();
  for (const input of event.target.querySelectorAll('input')) if (input.value !== '') query.set(input.name, input.value);
  clearSimulation();
  $('sim-note').textContent = 'Replaying…';
  try {
    const sim = await api(`v1/deployments/${encodeURIComponent(state.model)}/simulation?${query}`);
    if (!current(generation)) return;
    state.last.simulation = sim;
    renderSimulation(sim);
  } catch (err) {
    if (current(generation)) $('sim-note').textContent = `Simulation failed: ${err.message}`;
  }
});

function renderSimulation(sim) {
  const w = sim.world;
  const clipped =
    sim.minutes < sim.requestedMinutes
      ? ` (observed for only the last ${sim.minutes} of the ${sim.requestedMinutes} minutes asked for)`
      : '';
  const progress = sim.inProgress;
  const pendingMinute =
    progress.rows > 0 || progress.jobs > 0
      ? ` The minute in progress (${progress.rows} rows so far) is in neither row: both cover whole minutes; run again after ${time(progress.endsAt)} to include it.`
      : '';
  $('sim-note').textContent =
    `${sim.minutes} minutes${clipped}, ${w.replayedRows} rows replayed (${w.historyMinutes} minutes of history for the forecaster); SLO ${sim.sloMs} ms.${pendingMinute}`;
  renderWorld(w);
  const pct = (x) => (x === null ? '—' : `${(x * 100).toFixed(1)} %`);
  const row = (label, ws, cost, jobs, slo, p95, cold) =>
    el(
      'tr',
      {},
      el('th', {}, label),
      ...[cost, ws.active, ws.standby, ws.starting, jobs, pct(slo), p95 ?? '—', cold].map((v) => el('td', {}, v)),
    );
  const a = sim.actual;
  const actual = row(`actual (observed ${a.observedMinutes} min)`, a.workerSeconds, a.cost, a.jobs, a.sloAttainment, a.queueWaitP95Ms, '—');
  actual.dataset.row = 'actual';
  const rows = [actual];
  // Where the actual waits are missing, the row says why rather than showing blanks.
  if (a.note) rows.push(el('tr', { 'data-row': 'actual-note', class: 'muted' }, el('td', { colspan: 9 }, `actual: ${a.note}`)));
  for (const r of sim.runs) {
    const s = r.settings;
    const label = `simulated, ${r.name} settings (min ${s.min}, max ${s.max}, standby ${s.standby}, util ${s.targetUtilization})`;
    const simulated = row(label, r.workerSeconds, r.cost, r.jobs, r.sloAttainment, r.queueWaitMs.p95.toFixed(0), r.coldStarts);
    simulated.dataset.row = r.name;
    rows.push(simulated);
  }
  $('sim-table')
    .querySelector('tbody')
    .replaceChildren(...rows);
  $('sim-table').hidden = false;
  renderAtSlo(sim.atSlo);
  const container = $('chart-sim');
  state.charts.sim?.destroy();
  const lines = [
    ['actual', null, COLORS.grey],
    ['simulated, current', null, COLORS.blue],
    ['simulated, chosen', null, COLORS.green, [6, 4]],
  ];
  state.charts.sim = new window.uPlot(
    chartOptions(container, lines),
    [sim.pool.t, sim.pool.actual, sim.pool.current, sim.pool.chosen],
    container,
  );
}

/**
 * The baselines as-is and at the SLO target on the same arrivals: the simulated runs' cost ÷
 * each, the at-target columns comparing costs at equal attainment.
 */
function renderAtSlo(at) {
  const table = $('sim-slo');
  if (!at) {
    table.hidden = true;
    return;
  }
  const target = `${(at.target * 100).toFixed(0)} %`;
  $('sim-slo-note').textContent = at.error
    ? `Baselines at the SLO target: not shown, ${at.error}.`
    : `Baselines on the same arrivals, as-is and at the cheapest setting that keeps ${target} of jobs within the SLO (cost ratios at equal attainment).`;
  const pct = (x) => `${(x * 100).toFixed(2)} %`;
  const times = (x) => (x === null ? '—' : `${x.toFixed(2)}×`);
  const setting = (name, v) => (name === 'workers' ? `${v} worker${v === 1 ? '' : 's'}` : `${name} ${Number(v.toPrecision(3))}`);
  const rows = at.baselines.map((b) => {
    const a = b.atSlo;
    const atCells = a.met
      ? [setting(b.setting, a.value), pct(a.sloAttainment), a.cost]
      : [`cannot meet ${target}: best ${pct(a.sloAttainment)}`, '—', '—'];
    const cells = [
      setting(b.setting, b.asIs.value),
      pct(b.asIs.sloAttainment),
      b.asIs.cost,
      times(b.ratio.current.asIs),
      times(b.ratio.chosen.asIs),
      ...atCells,
      times(b.ratio.current.atSlo),
      times(b.ratio.chosen.atSlo),
    ];
    const tr = el('tr', { 'data-baseline': b.name }, el('th', {}, b.name), ...cells.map((v) => el('td', {}, v)));
    if (a.reason) tr.title = a.reason;
    return tr;
  });
  table.querySelector('tbody').replaceChildren(...rows);
  table.hidden = false;
}

/** What the simulated worker is made of, and, loudly, what of it was not measured. */
function renderWorld(w) {
  const speed = {
    'profile+measured': `${w.workerRowsPerSec} rows/s per worker: forward passes from the batch profile (${w.profileRowsPerSec} rows/s at batch ${w.maxBatch}) plus ${w.jobOverheadMs.toFixed(2)} ms per job, fitted to the ${w.measuredRowsPerSec} rows/s the scaler measured on busy workers`,
    profile: `${w.workerRowsPerSec} rows/s per worker from the batch profile (batch ${w.maxBatch})`,
    measured: `${w.workerRowsPerSec} rows/s per worker, as the scaler measured on busy workers`,
    assumed: `${w.workerRowsPerSec} rows/s per worker, assumed`,
  }[w.source];
  const cold = `cold start ${(w.coldStartMs / 1000).toFixed(1)} s${w.coldStartMeasured ? ' (measured)' : ''}`;
  $('sim-world').replaceChildren(
    el('span', { 'data-world': w.source }, `Simulated worker: ${speed}; ${cold}.`),
    ...w.missing.map((m) => el('span', { class: 'warn', 'data-missing': '' }, ` Not measured: ${m}.`)),
  );
}

// ---- boot ----

if (state.key) {
  signIn(state.key)
    .then(start)
    .catch(() => signOut('Your saved API key was refused: sign in again.'));
} else {
  signOut();
}
