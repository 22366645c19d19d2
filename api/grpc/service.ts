/**
 * The Open Inference Protocol's GRPCInferenceService (grpc_predict_v2.proto): the same use cases
 * the HTTP routes call, with the same dependencies (inferenceDeps in api/app.ts: one queue,
 * batcher, admission, open-job cap and metrics for both transports).
 *
 *   ServerLive, ServerReady, ServerMetadata   open, like HTTP's health routes
 *   ModelReady, ModelMetadata, ModelInfer     `authorization: Bearer <key>` metadata (keyLookup,
 *                                             api/http/auth.ts), then the tenant's rate limits
 *
 * Limits as over HTTP: a wrong key draws from its address's failed-authentication bucket (the
 * peer's address; no proxy header exists here), each authenticated call from the tenant's request
 * bucket, and ModelInfer also from its byte bucket by the size of the message as received. The
 * message itself is bounded by BODY_LIMIT_BYTES (server.ts), as an HTTP body is.
 *
 * ModelInfer's message reaches the handler as the bytes received (server.ts keeps grpc-js from
 * deserialising it) and is decoded only once the key is known and the tenant's budgets have paid
 * for its bytes (decode.ts): a call without a key, with a wrong one or over budget costs no decode
 * (issue 33).
 *
 * ModelInfer waits as HTTP's sync route does (SYNC_TIMEOUT_MS); a client's cancellation or
 * deadline aborts the wait (the job itself stays queued, as it does when an HTTP client leaves).
 * Every handler's failure is answered with a status (status.ts); none can throw out of grpc-js.
 */
import { createRequire } from 'node:module';
import type { ServerUnaryCall, sendUnaryData, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { ApiKey } from '../../infra/kernel/config.ts';
import { NotFoundError, UnauthorizedError } from '../../infra/kernel/errors.ts';
import type { Log } from '../../infra/kernel/log.ts';
import { keyLookup } from '../http/auth.ts';
import { type AuthFailureLimit, takeAuthFailure } from '../http/auth-failures.ts';
import { bearerKey } from '../http/bearer-key.ts';
import { type RateLimitSettings, takeRequestBudget } from '../http/rate-limit.ts';
import type { Clock } from '../ports.ts';
import { type InferSyncDeps, inferSync } from '../use-cases/infer-sync.ts';
import { modelMetadata, modelReady } from '../use-cases/model-status.ts';
import { fromModelInferRequest, toModelInferResponse, toModelMetadataResponse } from './convert.ts';
import { type DecodeLimits, decodeModelInferRequest } from './decode.ts';
import type { ModelRefMessage } from './messages.ts';
import { inferenceFailed, rateLimited, StatusError, timedOut, toGrpcStatus } from './status.ts';

export interface GrpcServiceDeps {
  /** inferenceDeps(appDeps): what the HTTP routes submit and wait with. */
  inference: InferSyncDeps;
  apiKeys: readonly ApiKey[];
  clock: Clock;
  /** The tenants' buckets (RATE_LIMIT_*); no limit when absent. */
  rateLimit?: RateLimitSettings;
  /** Wrong keys per address (AUTH_FAILURE_LIMIT_PER_MIN); no limit when absent. */
  authFailures?: AuthFailureLimit;
  /** ServerReady; ready when absent. */
  ready?: () => Promise<boolean>;
  /** What one ModelInferRequest may carry, checked while it is decoded (MAX_ELEMENTS_PER_JOB, MAX_BYTES_ELEMENTS_PER_JOB). */
  decode?: DecodeLimits;
  log?: Log;
}

const SERVER_VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

type Call = ServerUnaryCall<unknown, unknown>;

export function createInferenceService(deps: GrpcServiceDeps): UntypedServiceImplementation {
  const tenantOfKey = keyLookup(deps.apiKeys);

  const authenticate = async (call: Call): Promise<string> => {
    const header = call.metadata.get('authorization')[0];
    const key = bearerKey(typeof header === 'string' ? header : undefined);
    if (key === undefined)
      throw new UnauthorizedError('unauthorized', 'missing bearer token: send the metadata authorization: Bearer <key>');
    const tenant = tenantOfKey(key);
    if (tenant !== undefined) return tenant;
    await refuseRepeatedFailures(deps, call);
    throw new UnauthorizedError('unauthorized', 'unknown API key');
  };

  /** The tenant's request bucket, then (for `bytes` > 0) its byte bucket: HTTP's budget (api/http/rate-limit.ts). */
  const admit = async (tenant: string, bytes: number): Promise<void> => {
    if (!deps.rateLimit) return;
    const refused = await takeRequestBudget(deps.rateLimit, tenant, deps.clock.now(), bytes, 'message bytes');
    if (refused) throw overLimit(refused.retryAfterMs, refused.limit);
  };

  const signed = async (call: Call, bytes = 0): Promise<string> => {
    const tenant = await authenticate(call);
    await admit(tenant, bytes);
    return tenant;
  };

  return {
    ServerLive: unary(deps.log, async () => ({ live: true })),
    ServerReady: unary(deps.log, async () => ({ ready: deps.ready ? await deps.ready().catch(() => false) : true })),
    ServerMetadata: unary(deps.log, async () => ({ name: 'warmpool', version: SERVER_VERSION, extensions: [] })),
    ModelReady: unary(deps.log, async (request: ModelRefMessage, call) => {
      await signed(call);
      try {
        await modelReady(deps.inference, request.name, request.version || undefined);
        return { ready: true };
      } catch (err) {
        // OIP: not ready is an answer, not an error.
        if (err instanceof NotFoundError && err.code === 'model_not_ready') return { ready: false };
        throw err;
      }
    }),
    ModelMetadata: unary(deps.log, async (request: ModelRefMessage, call) => {
      await signed(call);
      return toModelMetadataResponse(await modelMetadata(deps.inference, request.name, request.version || undefined));
    }),
    ModelInfer: unary(deps.log, async (message: Buffer, call) => {
      // Key, then budget, then decode: what a refused call costs is its bytes' arrival, no more.
      const tenant = await signed(call, message.byteLength);
      const infer = fromModelInferRequest(decodeModelInferRequest(message, deps.decode));
      const input = {
        tenant,
        model: infer.model,
        version: infer.version,
        body: infer.body,
        ...(infer.binary ? { binary: infer.binary } : {}),
      };
      const outcome = await inferSync(deps.inference, input, cancellation(call));
      switch (outcome.kind) {
        case 'succeeded':
          return toModelInferResponse(outcome.response, infer.rawOutputs);
        case 'failed':
          throw new StatusError(inferenceFailed(outcome.jobId, outcome.error));
        case 'timeout':
          throw new StatusError(timedOut(outcome.jobId, deps.inference.syncTimeoutMs, outcome.reason));
      }
    }),
  };
}

/** A unary handler from an async function: its value is the response, anything it throws a status. */
function unary<Req, Res>(log: Log | undefined, handle: (request: Req, call: Call) => Promise<Res>) {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
    handle(call.request, call as Call).then(
      (response) => callback(null, response),
      (err: unknown) => {
        // A cancelled call (the client left, or its deadline passed) has no one to answer.
        if (!call.cancelled) callback(toGrpcStatus(err, log));
      },
    );
  };
}

function overLimit(retryAfterMs: number, limit: string): StatusError {
  return new StatusError(rateLimited(retryAfterMs, `too many requests: the limit is ${limit}`));
}

/** Aborts when the client cancels the call or its deadline passes (grpc-js cancels the call then). */
function cancellation(call: Call): AbortSignal {
  const controller = new AbortController();
  if (call.cancelled) controller.abort();
  else call.once('cancelled', () => controller.abort());
  return controller.signal;
}

/**
 * A wrong key counts against the caller's address (api/http/auth-failures.ts's bucket, shared with
 * HTTP); past the limit the call is RESOURCE_EXHAUSTED instead of UNAUTHENTICATED. If Redis cannot
 * be asked, the wrong key gets its UNAUTHENTICATED.
 */
async function refuseRepeatedFailures(deps: GrpcServiceDeps, call: Call): Promise<void> {
  if (!deps.authFailures) return;
  const retryAfterMs = await takeAuthFailure(deps.authFailures, peerAddress(call.getPeer()), deps.clock.now());
  if (retryAfterMs === undefined) return;
  throw new StatusError(
    rateLimited(retryAfterMs, `too many failed authentications from this address (at most ${deps.authFailures.perMinute} a minute)`),
  );
}

/** grpc-js's peer, `<address>:<port>` (IPv6 unbracketed), without the port. */
export function peerAddress(peer: string): string {
  const at = peer.lastIndexOf(':');
  return (at < 0 ? peer : peer.slice(0, at)).replace(/^\[|\]$/g, '');
}
