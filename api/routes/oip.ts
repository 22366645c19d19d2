/**
 * Open Inference Protocol (KServe v2) routes: sync inference through the job queue (JSON or
 * binary tensor data, api/http/infer-body.ts and infer-response.ts), model metadata and
 * readiness. Health routes live in app.ts because they need no auth.
 */
import { type Context, Hono } from 'hono';
import { binaryOutputs } from '../../infra/contracts/oip-binary.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { AuthEnv } from '../http/auth.ts';
import { errorBody } from '../http/error-body.ts';
import { readInferBody } from '../http/infer-body.ts';
import { type AnswerLimits, tensorResponse } from '../http/infer-response.ts';
import { type InferSyncDeps, inferSync } from '../use-cases/infer-sync.ts';
import { modelMetadata, modelReady } from '../use-cases/model-status.ts';

export interface OipRoutesDeps extends InferSyncDeps {
  /** What bounds an inference answer (MAX_JSON_OUTPUT_ELEMENTS, the byte budget); none when absent. */
  answers?: AnswerLimits;
}

export function oipRoutes(deps: OipRoutesDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  const infer = async (c: Context<AuthEnv>, version: string | undefined) => {
    const { body, binary } = await readInferBody(c);
    const wanted = binaryOutputs(body);
    const input = { tenant: c.get('tenant'), model: c.req.param('model') ?? '', version, body, ...(binary ? { binary } : {}) };
    const outcome = await inferSync(deps, input, c.req.raw.signal);
    switch (outcome.kind) {
      case 'succeeded': {
        // The job keeps its outputs for JOB_RETENTION_S: too large for JSON, they are read binary without running the model again.
        const binaryHint = `ask for them in binary form (the OIP binary tensor extension): send "parameters": {"binary_data_output": true} with the request, or read this answer's job now, GET /v1/jobs/${outcome.jobId} with Accept: application/octet-stream`;
        const answer = { wanted, limits: deps.answers ?? {}, binaryHint, details: { job_id: outcome.jobId } };
        return tensorResponse(c, outcome.response, answer);
      }
      case 'failed':
        // The worker found the input bad (what validation cannot see, e.g. an index out of range).
        if (outcome.error.code === 'invalid_input') throw new InvalidInputError('invalid_input', outcome.error.message);
        return c.json(errorBody('inference_failed', outcome.error.message, { job_id: outcome.jobId }), 500);
      case 'timeout': {
        const why = outcome.reason ? `: ${outcome.reason}` : '';
        const message = `inference did not finish within ${deps.syncTimeoutMs} ms${why}; poll /v1/jobs/${outcome.jobId}`;
        return c.json(errorBody('timeout', message, { job_id: outcome.jobId }), 504);
      }
    }
  };

  app.post('/v2/models/:model/infer', (c) => infer(c, undefined));
  app.post('/v2/models/:model/versions/:version/infer', (c) => infer(c, c.req.param('version')));

  const metadata = async (c: Context<AuthEnv>, version: string | undefined) =>
    c.json(await modelMetadata(deps, c.req.param('model') ?? '', version));
  app.get('/v2/models/:model', (c) => metadata(c, undefined));
  app.get('/v2/models/:model/versions/:version', (c) => metadata(c, c.req.param('version')));

  // OIP: 200 means ready, a 4xx means not.
  const ready = async (c: Context<AuthEnv>, version: string | undefined) =>
    c.json({ ...(await modelReady(deps, c.req.param('model') ?? '', version)), ready: true });
  app.get('/v2/models/:model/ready', (c) => ready(c, undefined));
  app.get('/v2/models/:model/versions/:version/ready', (c) => ready(c, c.req.param('version')));

  return app;
}
