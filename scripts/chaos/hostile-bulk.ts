/**
 * The hostile tenant's bulk runs over hostile inputs in its own area (issue 33 rows 4, 5, 11, 12
 * and 15), run by hostile-attacker.ts. Once, at the start: a run over thousands of one-row
 * objects (it holds a slot and a share of the workers; the honest run beside it must be
 * unaffected). Then rounds until the stop, each:
 * - a run over a GZIP and one over a BROTLI Parquet page bomb: each must end `failed
 *   invalid_input` (the workers' memory is the scenario's to watch);
 * - a run over a file whose footer passes PARQUET_FOOTER_MAX_BYTES: `failed parquet_footer_too_large`;
 * - a run over an input the attacker rewrites (other values, same ids) for as long as the run
 *   runs: `failed input_changed` (one that ended `succeeded` read no rewritten object; counted);
 * - meanwhile `bulkFlood` more runs at once over its small input: past
 *   MAX_ACTIVE_BULK_RUNS_PER_TENANT they are 429 too_many_bulk_runs.
 * A run's start refused 429 (its slot comes back when a run ends) or 408 is asked again; each answer
 * and each run's end is tallied under the attack's name. At the stop, the hostile runs not yet
 * ended are handed over in the tally (`openRuns`: the scenario waits for their ends, since the
 * dispatcher adopts an API-created run only on its next poll), the others canceled, as a
 * script's cleanup would.
 */
import { loadConfig } from '../../infra/kernel/config.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { type AttackTally, type AttackTargets, count, exchange, problem, type Request } from './hostile-attacks.ts';
import { sleep } from './sleep.ts';

export const TINY_RUN = 'bulk: thousands of one-row objects';
export const FLOOD = 'bulk: many runs at once';
export const REWRITE_RUN = 'bulk: its input rewritten mid-run';
/** Each hostile run and the error code its end must carry (REWRITE_RUN: see above). */
export const HOSTILE_RUNS = {
  'bulk: a GZIP Parquet page bomb': 'invalid_input',
  'bulk: a BROTLI Parquet page bomb': 'invalid_input',
  'bulk: a Parquet footer past the limit': 'parquet_footer_too_large',
  [REWRITE_RUN]: 'input_changed',
} as const;
const POLL_MS = 500;
/** Between rewrite passes: the S3 server shares the API's process here, a real one would not. */
const REWRITE_EVERY_MS = 300;

export async function bulkAttacks(t: AttackTargets, tally: AttackTally, stop: AbortSignal): Promise<void> {
  const s3 = (key: string) => `s3://${t.bucket}/${key}`;
  const store = createS3ObjectStore(loadConfig(t.bounds.s3Env).s3);
  const mine: string[] = [];
  const open = new Map<string, string>();
  const floodIds: string[] = [];
  const { inputs } = t.bounds;
  const run = (input: string, label: string, n: number, model = t.models.shared): Request => ({
    method: 'POST',
    path: '/v1/bulk-runs',
    body: { model, version: '1', input: s3(input), output: s3(`${t.own}out-${label}-${n}/`) },
  });
  try {
    const tiny = await start(t, tally, TINY_RUN, run(inputs.tiny, 'tiny', 0), stop);
    if (tiny) mine.push(tiny);
    const hostile: Array<[keyof typeof HOSTILE_RUNS, (n: number) => Request]> = [
      ['bulk: a GZIP Parquet page bomb', (n) => run(inputs.gzipBomb, 'gzip-bomb', n, t.bounds.models.repeat)],
      ['bulk: a BROTLI Parquet page bomb', (n) => run(inputs.brotliBomb, 'brotli-bomb', n, t.bounds.models.repeat)],
      ['bulk: a Parquet footer past the limit', (n) => run(inputs.fatFooter, 'fat-footer', n, t.bounds.models.repeat)],
      [REWRITE_RUN, (n) => run(inputs.rewrite, 'rewrite', n)],
    ];
    for (let round = 0; !stop.aborted; round++) {
      const runs = hostile.map(async ([name, req]) => {
        const id = await start(t, tally, name, req(round), stop);
        if (!id) return;
        open.set(id, name);
        const rewriting = name === REWRITE_RUN ? rewriteWhile(t, store, id, stop) : undefined;
        const end = await ended(t, id, stop);
        await rewriting;
        if (!end) return;
        open.delete(id);
        judgeRunEnd(tally, name, id, end);
      });
      await sleep(POLL_MS, stop);
      const flood = await Promise.all(
        Array.from({ length: t.sizes.bulkFlood }, (_, i) =>
          exchange(t, run(`${t.own}in/`, 'flood', round * t.sizes.bulkFlood + i), stop).then((a) => {
            if (a instanceof Error) return a.message;
            tally.sent++;
            count(tally, FLOOD, a.key);
            if (a.status >= 500) problem(tally, `${FLOOD}: ${a.key}`, a.text.slice(0, 200));
            if (a.status === 202) floodIds.push((JSON.parse(a.text) as { id: string }).id);
            return a.key;
          }),
        ),
      );
      if (flood.filter((k) => k === '202').length > t.bounds.bulkRunCap)
        problem(tally, `${FLOOD}: more than MAX_ACTIVE_BULK_RUNS_PER_TENANT started at once`, flood.join(', '));
      // The flood's own runs only show the cap: canceled at once, so their slots go back to the
      // hostile runs above (which otherwise may wait out a short phase behind them).
      await Promise.all(floodIds.splice(0).map((id) => asTenant(t, { method: 'DELETE', path: `/v1/bulk-runs/${id}` }, stop)));
      await Promise.all(runs);
      await sleep(1_000, stop);
    }
  } finally {
    tally.openRuns = [...open].map(([id, name]) => ({ id, name }));
    // After the stop: its other runs still going are canceled (at most a few seconds of asking).
    const done = AbortSignal.timeout(5_000);
    await Promise.all([...mine, ...floodIds].map((id) => asTenant(t, { method: 'DELETE', path: `/v1/bulk-runs/${id}` }, done)));
    store.close();
  }
}

/**
 * Before the attack phase, alone: runs over its many tiny objects (slow to end) started one after
 * another until one is refused 429 too_many_bulk_runs, at most MAX_ACTIVE_BULK_RUNS_PER_TENANT + 1
 * of them, then canceled. In the phase the attacker's burst at nice 19 may meet only 202s and 408s,
 * which say nothing of the cap; a start answered 408 or 429 rate_limited is asked again, up to
 * `tries` times `pauseMs` apart.
 */
export async function floodAlone(t: AttackTargets, tally: AttackTally, tries: number, pauseMs: number): Promise<void> {
  const ids: string[] = [];
  const req = (n: number): Request => ({
    method: 'POST',
    path: '/v1/bulk-runs',
    body: {
      model: t.models.shared,
      version: '1',
      input: `s3://${t.bucket}/${t.bounds.inputs.tiny}`,
      output: `s3://${t.bucket}/${t.own}out-cap-${n}/`,
    },
  });
  try {
    for (let n = 0; n <= t.bounds.bulkRunCap; n++) {
      let key: string | undefined;
      for (let k = 0; k < tries && key === undefined; k++) {
        const a = await exchange(t, req(n));
        if (a instanceof Error) return;
        tally.sent++;
        count(tally, FLOOD, a.key);
        if (a.status >= 500) problem(tally, `${FLOOD}: ${a.key}`, a.text.slice(0, 200));
        if (a.status === 202) ids.push((JSON.parse(a.text) as { id: string }).id);
        if (a.status === 408 || a.key === '429 rate_limited') await sleep(pauseMs);
        else key = a.key;
      }
      if (key !== '202') return;
    }
  } finally {
    const done = AbortSignal.timeout(5_000);
    await Promise.all(ids.map((id) => asTenant(t, { method: 'DELETE', path: `/v1/bulk-runs/${id}` }, done)));
  }
}

/** A hostile run's end, tallied; one that is not the refusal it must meet is a problem. */
export function judgeRunEnd(tally: AttackTally, name: string, id: string, end: string): void {
  count(tally, `${name} → its end`, end);
  const expected = HOSTILE_RUNS[name as keyof typeof HOSTILE_RUNS];
  if (end !== `failed ${expected}` && !(name === REWRITE_RUN && end === 'succeeded'))
    problem(tally, `${name}: ended ${end}`, `run ${id} over its own input: expected failed ${expected}`);
}

/** Starts a run, asking again while its slot is taken or its request timed out; its id, or undefined when refused otherwise or stopped. */
async function start(t: AttackTargets, tally: AttackTally, name: string, req: Request, stop: AbortSignal): Promise<string | undefined> {
  while (!stop.aborted) {
    const a = await exchange(t, req, stop);
    if (a instanceof Error) return undefined;
    tally.sent++;
    count(tally, name, a.key);
    if (a.status === 202) return (JSON.parse(a.text) as { id: string }).id;
    if (a.status >= 500 || a.status < 400) problem(tally, `${name}: start answered ${a.key}`, a.text.slice(0, 200));
    // 429: its slot is taken; 408: its own client (at nice 19 on a busy machine) did not send the
    // request within the server's timeout. Neither looked at the run, so it is asked again.
    if (a.status !== 429 && a.status !== 408) return undefined;
    await sleep(POLL_MS, stop);
  }
  return undefined;
}

/** Polls the run until it ends: `succeeded`, `failed <code>`, `canceled`; undefined at the stop. */
export async function ended(t: AttackTargets, id: string, stop: AbortSignal): Promise<string | undefined> {
  while (!stop.aborted) {
    const view = await runView(t, id, stop);
    if (view && view.status !== 'running') return [view.status, view.error?.code].filter(Boolean).join(' ');
    await sleep(POLL_MS, stop);
  }
  return undefined;
}

interface RunView {
  status: string;
  error?: { code: string };
}

async function runView(t: AttackTargets, id: string, stop: AbortSignal): Promise<RunView | undefined> {
  const a = await asTenant(t, { method: 'GET', path: `/v1/bulk-runs/${id}` }, stop);
  return a && a.status === 200 ? (JSON.parse(a.text) as RunView) : undefined;
}

/** A request as the tenant, asked again while it is 429 rate_limited (its lanes spend the same requests). */
async function asTenant(t: AttackTargets, req: Request, stop: AbortSignal) {
  for (let tries = 0; tries < 50 && !stop.aborted; tries++) {
    const a = await exchange(t, req, stop);
    if (a instanceof Error) return undefined;
    if (a.key !== '429 rate_limited') return a;
    await sleep(200, stop);
  }
  return undefined;
}

/** Rewrites every object of the run's input, other values under the same ids, until the run ends. */
async function rewriteWhile(t: AttackTargets, store: ReturnType<typeof createS3ObjectStore>, id: string, stop: AbortSignal) {
  for (let pass = 1; !stop.aborted; pass++) {
    for (let o = 0; o < t.bounds.rewriteObjects; o++) {
      const lines = Array.from({ length: 50 }, (_, n) =>
        JSON.stringify({ id: `hostile-rw-${o}-${n}`, features: Array.from({ length: t.features }, (_, k) => (pass * 13 + n + k) % 7) }),
      );
      await store.put(`${t.bounds.inputs.rewrite}part-${o}.jsonl`, `${lines.join('\n')}\n`).catch(() => undefined);
    }
    const view = await runView(t, id, stop);
    if (view && view.status !== 'running') return;
    await sleep(REWRITE_EVERY_MS, stop);
  }
}
