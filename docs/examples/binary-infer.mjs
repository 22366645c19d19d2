// Sync inference with binary tensor data (the Open Inference Protocol's binary extension), with
// nothing but Node: one row of 64 floats to warmpool dev's demo model, the output asked binary.
//
//   node docs/examples/binary-infer.mjs            (reads .warmpool/dev.env, as `npm start` wrote it)
//   WARMPOOL_URL=… WARMPOOL_KEY=… node docs/examples/binary-infer.mjs
import { readFileSync } from 'node:fs';

const dev = (() => {
  try {
    return Object.fromEntries(
      readFileSync('.warmpool/dev.env', 'utf8')
        .split('\n')
        .filter((line) => line.includes('='))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
  } catch {
    return {};
  }
})();
const url = process.env.WARMPOOL_URL ?? dev.WARMPOOL_URL ?? 'http://127.0.0.1:8080';
// dev.env's API_KEYS is tenant:key,tenant:key,…; the first tenant's key will do.
const key = process.env.WARMPOOL_KEY ?? dev.API_KEYS?.split(',')[0]?.split(':')[1];
const model = process.env.MODEL ?? 'demo-scorer';

// The request: the JSON header, then the tensor's little-endian bytes.
const features = new Float32Array(64).map((_, i) => Math.sin(i) / 2);
const header = Buffer.from(
  JSON.stringify({
    inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 64], parameters: { binary_data_size: features.byteLength } }],
    outputs: [{ name: 'score', parameters: { binary_data: true } }],
  }),
);
const res = await fetch(`${url}/v2/models/${model}/infer`, {
  method: 'POST',
  headers: {
    Authorization: `Bearer ${key}`,
    'Content-Type': 'application/octet-stream',
    'Inference-Header-Content-Length': String(header.byteLength),
  },
  body: Buffer.concat([header, Buffer.from(features.buffer)]),
});
if (!res.ok) {
  console.error(res.status, await res.text());
  process.exit(1);
}

// The answer: its own JSON header (Inference-Header-Content-Length long), then the output's bytes.
const body = Buffer.from(await res.arrayBuffer());
const length = Number(res.headers.get('inference-header-content-length'));
const answer = JSON.parse(body.subarray(0, length).toString('utf8'));
const [score] = answer.outputs;
const values = new Float32Array(body.buffer.slice(body.byteOffset + length, body.byteOffset + length + score.parameters.binary_data_size));
console.log(JSON.stringify({ ...answer, outputs: [{ ...score, values: Array.from(values) }] }));
