/**
 * Open Inference Protocol (KServe v2) routes: sync inference through the job queue, model
 * metadata and readiness. Health routes live in app.ts because they need no auth.
 */
import { type Context, Hono } from 'hono';
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import type { AuthEnv } from '../http/auth.ts';
import { errorBody } from '../http/errors.ts';
import { readJson } from '../http/read-json.ts';
import { type InferSyncDeps, inferSync } from '../use-cases/infer-sync.ts';
import { resolveManifest } from '../use-cases/submit-job.ts';

export function oipRoutes(deps: InferSyncDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  const infer = async (c: Context<AuthEnv>, version: string | undefined) => {
    const body = await readJson(c);
    const input = { tenant: c.get('tenant'), model: c.req.param('model') ?? '', version, body };
    const outcome = await inferSync(deps, input, c.req.raw.signal);
    switch (outcome.kind) {
      case 'succeeded':
        return c.json(outcome.response, 200);
      case 'failed':
        // The worker found the input bad (what validation cannot see, e.g. an index out of range).
        if (outcome.error.code === 'invalid_input') throw new InvalidInputError('invalid_input', outcome.error.message);
        return c.json(errorBody('inference_failed', outcome.error.message, { job_id: outcome.jobId }), 500);
      case 'timeout':
        return c.json(
          errorBody('timeout', `inference did not finish within ${deps.syncTimeoutMs} ms; poll /v1/jobs/${outcome.jobId}`, {
            job_id: outcome.jobId,
          }),
          504,
        );
    }
  };

  app.post('/v2/models/:model/infer', (c) => infer(c, undefined));
  app.post('/v2/models/:model/versions/:version/infer', (c) => infer(c, c.req.param('version')));

  const metadata = async (c: Context<AuthEnv>, version: string | undefined) => {
    const model = c.req.param('model') ?? '';
    const manifest = await resolveManifest(deps, model, version);
    return c.json({
      name: manifest.name,
      versions: await deps.catalog.listVersions(manifest.name),
      platform: 'onnxruntime_onnx',
      inputs: manifest.inputs.map(tensorMetadata),
      outputs: manifest.outputs.map(tensorMetadata),
    });
  };

  app.get('/v2/models/:model', (c) => metadata(c, undefined));
  app.get('/v2/models/:model/versions/:version', (c) => metadata(c, c.req.param('version')));

  // Ready = deployed (with a traffic share, for a named version), and in the registry. OIP: 200
  // means ready, a 4xx means not.
  const ready = async (c: Context<AuthEnv>, asked: string | undefined) => {
    const model = c.req.param('model') ?? '';
    const deployment = await deps.deployments.get(model);
    if (!deployment) throw new NotFoundError('model_not_ready', `model ${model} is not deployed`);
    const version = asked ?? deployment.version;
    if (!deployment.versions.some((v) => v.version === version && v.weight > 0)) {
      throw new NotFoundError('model_not_ready', `model ${model} version ${version} takes no traffic in its deployment`);
    }
    const manifest = await deps.catalog.getManifest(model, version).catch((err: unknown) => {
      if (err instanceof NotFoundError) return null;
      throw err;
    });
    if (!manifest) throw new NotFoundError('model_not_ready', `model ${model} version ${version} is not in the registry`);
    return c.json({ name: model, version, ready: true });
  };
  app.get('/v2/models/:model/ready', (c) => ready(c, undefined));
  app.get('/v2/models/:model/versions/:version/ready', (c) => ready(c, c.req.param('version')));

  return app;
}

function tensorMetadata(t: TensorSpec) {
  return { name: t.name, datatype: t.datatype, shape: t.shape };
}
