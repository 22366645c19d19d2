// The Open Inference Protocol over gRPC from Node: a client generated at run time from the
// published proto (api/grpc/grpc_predict_v2.proto), asking warmpool dev's demo model for one row,
// first with typed contents, then with raw_input_contents (what tritonclient.grpc sends).
//
//   node docs/examples/grpc-infer.mjs              (reads .warmpool/dev.env: GRPC_URL, API_KEYS)
//   GRPC_URL=127.0.0.1:8081 WARMPOOL_KEY=… node docs/examples/grpc-infer.mjs
import { readFileSync } from 'node:fs';
import { credentials, loadPackageDefinition, Metadata } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

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
const target = process.env.GRPC_URL ?? dev.GRPC_URL ?? '127.0.0.1:8081';
const key = process.env.WARMPOOL_KEY ?? dev.API_KEYS?.split(',')[0]?.split(':')[1];
const model = process.env.MODEL ?? 'demo-scorer';
const proto = new URL('../../api/grpc/grpc_predict_v2.proto', import.meta.url);

const definition = loadSync(proto.pathname, { keepCase: true, longs: String, defaults: true, oneofs: true });
const { inference } = loadPackageDefinition(definition);
const client = new inference.GRPCInferenceService(target, credentials.createInsecure());
const metadata = new Metadata();
metadata.set('authorization', `Bearer ${key}`);
const call = (method, request) =>
  new Promise((resolve, reject) => client[method](request, metadata, (err, response) => (err ? reject(err) : resolve(response))));

try {
  console.log('live:', (await call('ServerLive', {})).live);
  const meta = await call('ModelMetadata', { name: model });
  console.log('inputs:', meta.inputs.map((t) => `${t.name} ${t.datatype} [${t.shape.join(', ')}]`).join('; '));

  const features = Array.from({ length: 64 }, (_, i) => Math.sin(i) / 2);
  const input = { name: 'features', datatype: 'FP32', shape: [1, 64] };
  const typed = await call('ModelInfer', {
    model_name: model,
    inputs: [{ ...input, contents: { fp32_contents: features } }],
    parameters: { priority: { string_param: 'high' } },
  });
  console.log('typed contents →', typed.outputs[0].name, typed.outputs[0].contents.fp32_contents);

  const raw = await call('ModelInfer', {
    model_name: model,
    inputs: [input],
    raw_input_contents: [Buffer.from(new Float32Array(features).buffer)],
  });
  const bytes = raw.raw_output_contents[0];
  console.log('raw contents   →', raw.outputs[0].name, Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength))));
} catch (err) {
  console.error(`${err.code}: ${err.details}`);
  process.exitCode = 1;
} finally {
  client.close();
}
