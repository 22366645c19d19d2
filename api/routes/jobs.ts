/**
 * The async job routes (DESIGN §5): submit, read, cancel, and the registry view. Thin: parse,
 * call a use case. A job's body may be JSON or OIP binary tensor data, and its outputs may be
 * read binary (api/http/infer-body.ts, infer-response.ts). The event stream of a job is in
 * job-events.ts.
 */
import { Hono } from 'hono';
import type { AuthEnv } from '../http/auth.ts';
import { parseIdempotencyKey } from '../http/idempotency-key-header.ts';
import { readInferBody } from '../http/infer-body.ts';
import { type AnswerLimits, tensorResponse, wantsBinaryJob } from '../http/infer-response.ts';
import type { DeploymentLookup, JobQueue, JobView, ModelCatalog } from '../ports.ts';
import { iso, toJobResource } from '../resources/job-resource.ts';
import { cancelJob, type JobCanceler } from '../use-cases/cancel-job.ts';
import { getJob } from '../use-cases/get-job.ts';
import { type SubmitJobDeps, type SubmittedJob, submitJob } from '../use-cases/submit-job.ts';
import type { WaitReason } from '../use-cases/wait-reason.ts';

export interface JobRoutesDeps extends SubmitJobDeps {
  jobs: JobQueue & JobCanceler;
  catalog: ModelCatalog;
  deployments: DeploymentLookup;
  /** What bounds a job's answer (MAX_JSON_OUTPUT_ELEMENTS, the byte budget); none when absent. */
  answers?: AnswerLimits;
  /**
   * Why a queued job waits: shared with the event streams (api/app.ts), so a thousand clients
   * polling jobs of one cold version cost one read per interval, not one each.
   */
  why: (view: JobView) => Promise<WaitReason | undefined>;
}

export function jobRoutes(deps: JobRoutesDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  app.post('/v1/models/:model/jobs', async (c) => {
    const idempotencyKey = parseIdempotencyKey(c.req.header('idempotency-key'));
    const { body, binary } = await readInferBody(c);
    const tenant = c.get('tenant');
    const job = await submitJob(deps, {
      tenant,
      model: c.req.param('model'),
      body,
      ...(binary ? { binary } : {}),
      kind: 'async',
      idempotencyKey,
    });
    const self = `/v1/jobs/${job.id}`;
    c.header('Location', self);
    if (job.replayed) c.header('Idempotent-Replayed', 'true');
    return c.json(
      {
        id: job.id,
        status: await statusOf(deps, job),
        ...(job.cached ? { cached: true } : {}),
        model: job.model,
        version: job.version,
        createdAt: iso(job.createdAt),
        links: { self, events: `${self}/events` },
      },
      202,
    );
  });

  app.get('/v1/jobs/:id', async (c) => {
    const view = await getJob(deps, { tenant: c.get('tenant'), id: c.req.param('id') });
    const waiting = view.status === 'queued' ? await deps.why(view) : undefined;
    const binaryHint = `ask for them in binary form (the OIP binary tensor layout): GET /v1/jobs/${view.id} with Accept: application/octet-stream, or ?binary_data_output=true`;
    return tensorResponse(c, toJobResource(view, waiting), { wanted: wantsBinaryJob(c), limits: deps.answers ?? {}, binaryHint });
  });

  app.delete('/v1/jobs/:id', async (c) => {
    const view = await cancelJob(deps, { tenant: c.get('tenant'), id: c.req.param('id') });
    return c.json(toJobResource(view));
  });

  app.get('/v1/models', async (c) => {
    const models = await deps.catalog.list();
    const withDeployments = await Promise.all(
      models.map(async (m) => ({ ...m, deployedVersion: (await deps.deployments.get(m.name))?.version ?? null })),
    );
    return c.json({ models: withDeployments });
  });

  return app;
}

/**
 * The status a 202 names: a result-cache hit already succeeded (GET has its outputs); a new job
 * is queued; a replay (Idempotency-Key) names its job's status now, read once more (a job that
 * has aged out since keeps what the first answer said).
 */
async function statusOf(deps: Pick<JobRoutesDeps, 'jobs'>, job: SubmittedJob): Promise<JobView['status']> {
  if (job.cached) return 'succeeded';
  if (!job.replayed) return 'queued';
  return (await deps.jobs.get(job.id))?.status ?? 'queued';
}
