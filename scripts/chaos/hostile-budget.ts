/**
 * The second hostile tenant's attacks on its own budgets (issue 33 rows 2, 3 and 6), run by
 * hostile-attacker.ts in rounds until the stop. A tenant of its own, because once its budgets are
 * spent every request with a body or a large answer is refused 429, which would hide the first
 * tenant's own refusals. Each round:
 * 1. gzip bodies of a few KiB that inflate to 7 MiB each, all at once, then one alone: refused as bad bodies
 *    (4xx), and 429 once their inflated bytes pass RATE_LIMIT_BYTES_BURST: no more parsed than
 *    the burst and what refilled over the round;
 * 2. jobs on the large-output model (1 Ki floats in → 256 Ki out, 1 MiB kept per job) until 429
 *    storage_budget_exhausted (MAX_STORED_BYTES_PER_TENANT); once reached, a few a round;
 * 3. GETs of a job whose outputs pass MAX_JSON_OUTPUT_ELEMENTS: 413 output_too_large;
 * 4. GETs of a large result under that bound, all at once: 429 once their answer bytes pass the
 *    byte budget (no more served than the burst and what refilled over the round).
 * A round whose budget never bit is a problem named for the bound that did not hold.
 */
import { gzipSync } from 'node:zlib';
import { maxJsonElementBytes } from '../../infra/contracts/tensor-json.ts';
import { type Attack, type AttackTally, type AttackTargets, exchange, problem, type Request, sendAttack } from './hostile-attacks.ts';
import { sleep } from './sleep.ts';

const MiB = 1024 * 1024;
/** Floats in per job: × 256 out (the repeat model) is 256 Ki elements, 1 MiB kept, ~6.5 MB of JSON. */
const LARGE = 1024;
/** 4097 × 256 elements out: just past the default MAX_JSON_OUTPUT_ELEMENTS (1 Mi). */
const TOO_LARGE = 4097;
/** Bodies a round sends at once: 16 × 7 MiB passes the 64 MiB burst (the chaos stack's RATE_LIMIT_BYTES_*). */
const GZIP_PER_ROUND = 16;
const INFLATED_BYTES = 7 * MiB;
const BYTES_BURST = 64 * MiB;
const BYTES_PER_S = 32 * MiB;
/** 16 × ~6.5 MB answers pass the 64 MiB burst. */
const GETS_PER_ROUND = 16;
const JOBS_PER_ROUND = 40;
/** Long enough for a 64 MiB burst to refill at 32 MiB/s. */
const REFILL_MS = 2_500;

export const GZIP_ATTACK = 'budget: gzip bodies inflating to 7 MiB';
export const STORAGE_ATTACK = 'budget: jobs keeping 1 MiB of outputs each';
export const TOO_LARGE_ATTACK = 'budget: GET of outputs past MAX_JSON_OUTPUT_ELEMENTS';
export const REPEAT_GET_ATTACK = 'budget: GET of a 256 Ki-element result, again and again';

export async function budgetAttacks(t: AttackTargets, tally: AttackTally, stop: AbortSignal): Promise<void> {
  const key = t.bounds.hoardKey;
  const repeat = t.bounds.models.repeat;
  const submit = (n: number, seed: number): Request => ({
    method: 'POST',
    path: `/v1/models/${repeat}/jobs`,
    key,
    body: { inputs: [{ name: 'x', shape: [1, n], datatype: 'FP32', data: Array.from({ length: n }, (_, i) => (seed + i) % 97) }] },
  });
  const large = await finishedJob(t, submit(LARGE, 0), stop);
  const tooLarge = await finishedJob(t, submit(TOO_LARGE, 1), stop);
  if (!large || !tooLarge) {
    if (!stop.aborted) problem(tally, 'budget: its jobs never finished', `${repeat}: ${large ?? '-'} ${tooLarge ?? '-'}`);
    return;
  }
  const inflated = new Uint8Array(gzipSync(Buffer.from(JSON.stringify({ inputs: [], pad: 'x'.repeat(INFLATED_BYTES) })), { level: 9 }));
  const attacks = {
    gzip: {
      name: GZIP_ATTACK,
      refuse: true,
      request: () => ({
        method: 'POST',
        path: `/v1/models/${repeat}/jobs`,
        key,
        raw: inflated,
        headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      }),
    },
    storage: { name: STORAGE_ATTACK, refuse: false, request: (n) => submit(LARGE, n + 2) },
    tooLarge: { name: TOO_LARGE_ATTACK, refuse: true, request: () => ({ method: 'GET', path: `/v1/jobs/${tooLarge}`, key }) },
    repeatGet: { name: REPEAT_GET_ATTACK, refuse: false, request: () => ({ method: 'GET', path: `/v1/jobs/${large}`, key }) },
  } satisfies Record<string, Attack>;
  let jobs = 0;
  let exhausted = false;
  for (let round = 0; !stop.aborted; round++) {
    // All at once: what the budget must hold is the inflated bytes let through over the round's
    // span, not a 429 as such (sent one after another on a slow machine, the refill can keep up).
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: GZIP_PER_ROUND }, (_, i) => sendAttack(t, attacks.gzip, i, tally, stop)));
    const spanS = (Date.now() - started) / 1000;
    const parsed = answers.filter((a) => /^4\d\d /.test(a) && a !== '429 rate_limited' && a !== '408 request_timeout').length;
    // The burst, what refilled meanwhile, and one lease per API process (a tenth of a second of each).
    const allowed = BYTES_BURST + BYTES_PER_S * spanS + 0.1 * (BYTES_BURST + BYTES_PER_S);
    if (!stop.aborted && parsed * INFLATED_BYTES > allowed)
      problem(
        tally,
        `${GZIP_ATTACK}: past the byte budget`,
        `${parsed} of ${GZIP_PER_ROUND} bodies of 7 MiB parsed in ${spanS.toFixed(1)} s, round ${round}`,
      );
    await sleep(REFILL_MS, stop);
    // Then one body alone, into a refilled bucket: it inflates within the budget and meets its
    // own refusal (a bad body). Sixteen at once share the bucket as they inflate, so on a slow
    // machine none finishes before it is dry and every one is refused 429 — right, but the
    // body's own refusal would go unseen.
    if (!stop.aborted) await sendAttack(t, attacks.gzip, 0, tally, stop);
    for (let i = 0; i < (exhausted ? 3 : JOBS_PER_ROUND) && !stop.aborted; i++) {
      const answer = await sendAttack(t, attacks.storage, jobs++, tally, stop);
      if (answer === '429 storage_budget_exhausted') exhausted = true;
      else if (answer === '429 rate_limited') await sleep(100, stop);
      if (exhausted && i >= 2) break;
    }
    const accepted = tally.answers[STORAGE_ATTACK]?.['202'] ?? 0;
    if (!exhausted && accepted * MiB > 2 * t.bounds.storedBudgetBytes)
      problem(tally, `${STORAGE_ATTACK}: never storage_budget_exhausted`, `${accepted} jobs of 1 MiB accepted`);
    for (let i = 0; i < 2 && !stop.aborted; i++) await sendAttack(t, attacks.tooLarge, i, tally, stop);
    // As the gzip bodies: all at once, judged on the answer bytes let through over the span.
    const getsFrom = Date.now();
    const got = await Promise.all(Array.from({ length: GETS_PER_ROUND }, (_, i) => sendAttack(t, attacks.repeatGet, i, tally, stop)));
    const getsSpanS = (Date.now() - getsFrom) / 1000;
    const served = got.filter((a) => a === '200').length;
    // What each answer is charged (infer-response.ts): its elements at FP32's widest JSON, past the free 64 KiB.
    const charged = LARGE * 256 * maxJsonElementBytes('FP32') - 64 * 1024;
    const allowedBytes = BYTES_BURST + BYTES_PER_S * getsSpanS + 0.1 * (BYTES_BURST + BYTES_PER_S);
    if (!stop.aborted && served * charged > allowedBytes)
      problem(
        tally,
        `${REPEAT_GET_ATTACK}: past the byte budget`,
        `${served} of ${GETS_PER_ROUND} answers of ${charged} bytes served in ${getsSpanS.toFixed(1)} s, round ${round}`,
      );
    await sleep(REFILL_MS, stop);
  }
}

/** Submits a job and waits until it has ended; its id, or undefined when it failed or the stop came first. */
async function finishedJob(t: AttackTargets, req: Request, stop: AbortSignal): Promise<string | undefined> {
  let id: string | undefined;
  while (!id && !stop.aborted) {
    const res = await exchange(t, req, stop);
    if (res instanceof Error) return undefined;
    if (res.status === 202) id = (JSON.parse(res.text) as { id: string }).id;
    else await sleep(200, stop);
  }
  const deadline = Date.now() + 60_000;
  while (id && !stop.aborted && Date.now() < deadline) {
    const res = await exchange(t, { method: 'GET', path: `/v1/jobs/${id}`, key: req.key }, stop);
    if (res instanceof Error) return undefined;
    // Past MAX_JSON_OUTPUT_ELEMENTS a finished job's JSON answer is 413: it ended.
    if (res.key === '413 output_too_large' || (res.status === 200 && res.text.includes('"status":"succeeded"'))) return id;
    if (res.status === 200 && /"status":"(failed|canceled)"/.test(res.text)) return undefined;
    await sleep(250, stop);
  }
  return undefined;
}
