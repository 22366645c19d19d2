/**
 * What a large answer costs the event loop (issue 33, attack 6), and packing many strings
 * (attack 7): `npx tsx scripts/bench/json-output.ts [elements]`.
 *
 *   whole    the answer as it was built before: c.json(body), whose outputs' `data` makes one JS
 *            array of numbers (rowsTensor's accessor) and JSON.stringify makes one string of it
 *   sliced   api/http/infer-response.ts's tensorResponse: the JSON written from the packed
 *            elements a slice at a time, one slice per turn of the event loop
 *
 * For each: the longest the event loop was held (perf_hooks monitorEventLoopDelay's max, at
 * 1 ms resolution, and the longest gap a 1 ms interval saw), the whole answer's time, and its
 * bytes; and, since wall time on a shared machine counts other processes' turns too, the CPU
 * time (process.cpuUsage) of the longest synchronous piece: the whole build, or one part. Then 2 Mi empty strings packed into the 4-byte-length layout, as one Buffer per string
 * (before) and in one pass (packed-tensors.ts's wireBytes).
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Hono } from 'hono';
import { JSON_ONLY, tensorResponse } from '../../api/http/infer-response.ts';
import { rowsTensor, wireBytes } from '../../infra/contracts/packed-tensors.ts';
import { jsonParts } from '../../infra/contracts/tensor-json.ts';

const elements = Number(process.argv[2] ?? 1024 * 1024);
const data = Float32Array.from({ length: elements }, (_, i) => Math.sin(i) * 1000);
const body = () => ({ id: 'job_1', status: 'succeeded', outputs: [rowsTensor('y', 'FP32', [1, elements], data)] });

const app = new Hono();
app.get('/whole', (c) => c.json(body()));
app.get('/sliced', (c) => tensorResponse(c, body(), { wanted: JSON_ONLY, limits: {}, binaryHint: '' }));

async function measure(path: string): Promise<Record<string, number>> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  let last = performance.now();
  let longestGap = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    longestGap = Math.max(longestGap, now - last);
    last = now;
  }, 1);
  histogram.enable();
  // The histogram measures from its own previous sample: let it take some before the request.
  await new Promise((r) => setTimeout(r, 20));
  const started = performance.now();
  const res = await app.request(path);
  // Read as a socket would take it, a chunk at a time (arrayBuffer() would join 20 MB at the end).
  let bytes = 0;
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) bytes += chunk.value.byteLength;
  const totalMs = performance.now() - started;
  // One more turn, so a stall that ended just now is seen by the interval and the histogram.
  await new Promise((r) => setTimeout(r, 5));
  histogram.disable();
  clearInterval(tick);
  return { maxDelayMs: round(histogram.max / 1e6), longestGapMs: round(longestGap), totalMs: round(totalMs), bytes };
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

function packStringsBefore(values: readonly string[]): Buffer {
  const parts = values.map((v) => Buffer.from(v, 'utf8'));
  const out = Buffer.alloc(parts.reduce((n, p) => n + 4 + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.writeUInt32LE(p.byteLength, at);
    out.set(p, at + 4);
    at += 4 + p.byteLength;
  }
  return out;
}

function timed(fn: () => unknown): number {
  const started = performance.now();
  fn();
  return round(performance.now() - started);
}

// One warm-up each, so both are measured compiled.
await measure('/whole');
await measure('/sliced');
console.log(`answer of ${elements} FP32 elements`);
for (const path of ['/whole', '/sliced']) console.log(path.slice(1).padEnd(8), JSON.stringify(await measure(path)));

/** CPU ms of `fn`, this process's threads (user + system). */
function cpuMs(fn: () => unknown): number {
  const before = process.cpuUsage();
  fn();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}
const wholeCpu = cpuMs(() => JSON.stringify(body()));
let longestPart = 0;
const parts = jsonParts(body());
for (;;) {
  let done = false;
  longestPart = Math.max(
    longestPart,
    cpuMs(() => (done = parts.next().done === true)),
  );
  if (done) break;
}
console.log(`CPU of the longest synchronous piece: whole ${round(wholeCpu)} ms, sliced ${round(longestPart)} ms (one part)`);

const strings = new Array<string>(2 * 1024 * 1024).fill('');
timed(() => packStringsBefore(strings));
timed(() => wireBytes('BYTES', strings));
console.log(
  `packing ${strings.length} empty strings: before ${timed(() => packStringsBefore(strings))} ms, one pass ${timed(() => wireBytes('BYTES', strings))} ms`,
);
