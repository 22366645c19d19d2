/**
 * Closed-loop load on the OIP gRPC service (api/grpc/): `concurrency` ModelInfer calls in flight,
 * each followed by the next as soon as it is answered, with the inputs as `raw_input_contents`
 * (what tritonclient.grpc sends). The bench's counterpart of load.ts's closedLoopInfer over HTTP:
 * the same rows (request-bodies.ts's binary bodies, their tensor bytes reused as raw contents),
 * so `grpc_vs_http` compares transports, not payloads.
 */
import { credentials, loadPackageDefinition, Metadata, type ServiceError } from '@grpc/grpc-js';
import { load } from '@grpc/proto-loader';
import { PROTO_LOADER_OPTIONS } from '../../api/grpc/messages.ts';
import { PROTO_FILE } from '../../api/grpc/server.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import type { SyncLoopResult } from './load.ts';
import { binaryRequestBodies } from './request-bodies.ts';

type Unary = (request: unknown, metadata: Metadata, callback: (err: ServiceError | null, response?: unknown) => void) => void;

export interface GrpcTarget {
  /** `host:port`. */
  url: string;
  key: string;
  manifest: Pick<ModelManifest, 'name' | 'inputs'>;
}

/** `amount` ModelInfer calls, `concurrency` at a time, request i carrying the rows of seed `seed + i`. */
export async function closedLoopGrpc(target: GrpcTarget, amount: number, concurrency: number, seed: number): Promise<SyncLoopResult> {
  const definition = await load(PROTO_FILE, PROTO_LOADER_OPTIONS);
  const pkg = loadPackageDefinition(definition) as unknown as {
    inference: {
      GRPCInferenceService: new (
        url: string,
        creds: ReturnType<typeof credentials.createInsecure>,
      ) => Record<string, Unary> & { close(): void };
    };
  };
  const client = new pkg.inference.GRPCInferenceService(target.url, credentials.createInsecure());
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${target.key}`);
  const { inputs, parts } = binaryRequestBodies(target.manifest, 1);
  const request = (i: number) => ({ model_name: target.manifest.name, inputs, raw_input_contents: parts(seed + i) });
  const infer = (message: unknown) =>
    new Promise<boolean>((resolve) => {
      (client.ModelInfer as Unary)(message, metadata, (err) => resolve(err === null));
    });
  let next = 0;
  let completed = 0;
  let failed = 0;
  const startedAt = Date.now();
  let endedAt = startedAt;
  const lane = async () => {
    while (next < amount) {
      const ok = await infer(request(next++));
      endedAt = Date.now();
      if (ok) completed++;
      else failed++;
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(concurrency, amount) }, lane));
  } finally {
    client.close();
  }
  return { completed, startedAt, endedAt, failed };
}
