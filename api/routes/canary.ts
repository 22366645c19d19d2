/**
 * Canary routes (issue 3 §8): `GET /v1/deployments/{model}/canary` → the guard's events for the
 * model, newest first, and, while the deployment has a split, how each canary stands now
 * (`current`: the stable version's window and each canary's window and verdict, computed by the
 * guard's own assessor). 404 when the model is neither deployed nor has any canary event.
 * Auth is applied by app.ts to `/v1/*`; deployments are not per tenant.
 */
import { Hono } from 'hono';
import { type CanaryPolicy, createCanaryStatusReader } from '../../infra/canary/index.ts';
import { MODEL_NAME_PATTERN } from '../../infra/contracts/manifest.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { NotFoundError } from '../../infra/kernel/errors.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import type { AuthEnv } from '../http/auth.ts';
import type { Clock } from '../ports.ts';

export interface CanaryRoutesDeps {
  redis: RedisClient;
  prefix: string;
  /** The guard's policy and tick period (CANARY_* settings), so the verdicts shown match its. */
  policy?: Partial<CanaryPolicy>;
  tickMs?: number;
  clock?: Clock;
}

export function canaryRoutes(deps: CanaryRoutesDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const deployments = createDeploymentStore(deps.redis, deps.prefix);
  const reader = createCanaryStatusReader(deps);
  const clock = deps.clock ?? systemClock;

  app.get('/v1/deployments/:model/canary', async (c) => {
    const model = c.req.param('model');
    const notFound = () => new NotFoundError('deployment_not_found', `model ${model} is not deployed`);
    if (!MODEL_NAME_PATTERN.test(model)) throw notFound();
    const deployment = await deployments.get(model);
    const status = await reader.read(model, deployment, clock.now());
    if (!deployment && status.events.length === 0) throw notFound();
    return c.json(status);
  });

  return app;
}
