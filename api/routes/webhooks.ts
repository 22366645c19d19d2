/**
 * Webhook routes (issue 3 §3): the tenant's signing secret, its rotation and the revocation of
 * the previous one, the deliveries list (dead letters included) and replay. Auth is applied by
 * app.ts to `/v1/*`; every route sees only the calling tenant's secret and deliveries. An
 * attempt's error is shown as its category only (api/webhooks/attempt-error.ts).
 */
import { Hono } from 'hono';
import { z } from 'zod';
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import type { AuthEnv } from '../http/auth.ts';
import type { Clock } from '../ports.ts';
import { iso } from '../resources/job-resource.ts';
import { publicAttemptError } from '../webhooks/attempt-error.ts';
import { createDeliveryStore, DELIVERY_STATES, type Delivery } from '../webhooks/delivery-store.ts';
import { createWebhookSecrets, type TenantSecret } from '../webhooks/secrets.ts';

export interface WebhookRoutesDeps {
  redis: RedisClient;
  prefix: string;
  clock: Clock;
  /** How long the previous secret keeps signing after a rotation. Default 24 h. */
  rotationOverlapMs?: number;
}

const DELIVERY_ID = /^[A-Za-z0-9_.-]{1,200}$/;

const listQuery = z.object({
  status: z.enum(DELIVERY_STATES).optional(),
  limit: z.coerce.number().int().min(1).max(100).default(20),
});

export function webhookRoutes(deps: WebhookRoutesDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const secrets = createWebhookSecrets(deps.redis, deps.prefix, deps.clock);
  const deliveries = createDeliveryStore(deps.redis, deps.prefix);
  const overlapMs = deps.rotationOverlapMs ?? 24 * 60 * 60 * 1000;

  app.get('/v1/webhooks/secret', async (c) => c.json(secretResource(await secrets.getOrCreate(c.get('tenant')))));

  app.post('/v1/webhooks/secret/rotate', async (c) => c.json(secretResource(await secrets.rotate(c.get('tenant'), overlapMs))));

  // Ends the rotation's overlap now; idempotent (no previous secret: the same answer).
  app.delete('/v1/webhooks/secret/previous', async (c) => c.json(secretResource(await secrets.revokePrevious(c.get('tenant')))));

  app.get('/v1/webhooks/deliveries', async (c) => {
    const parsed = listQuery.safeParse(c.req.query());
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new InvalidInputError(
        'invalid_query',
        `${String(issue?.path[0] ?? 'query')}: ${issue?.message ?? 'invalid'} (status is one of ${DELIVERY_STATES.join(', ')}; limit 1–100)`,
      );
    }
    const list = await deliveries.list(c.get('tenant'), parsed.data.status, parsed.data.limit, deps.clock.now());
    return c.json({ deliveries: list.map(deliveryResource) });
  });

  app.post('/v1/webhooks/deliveries/:id/replay', async (c) => {
    const id = c.req.param('id');
    const result = DELIVERY_ID.test(id) ? await deliveries.replay(c.get('tenant'), id, deps.clock.now()) : 'not_found';
    if (result === 'not_found') throw new NotFoundError('delivery_not_found', `no delivery ${id}`);
    if (result === 'pending') throw new InvalidInputError('delivery_pending', `delivery ${id} is still being attempted`, { status: 409 });
    return c.json({ id, status: 'pending' as const }, 202);
  });

  return app;
}

function secretResource(s: TenantSecret): { secret: string; previous?: { secret: string; expiresAt: string } } {
  return s.previous
    ? { secret: s.secret, previous: { secret: s.previous.secret, expiresAt: iso(s.previous.expiresAt) } }
    : { secret: s.secret };
}

/** A delivery as the API shows it: the payload is left out (it can be as large as the job's outputs). */
function deliveryResource(d: Delivery) {
  return {
    id: d.id,
    event: d.event,
    jobId: d.jobId,
    url: d.url,
    status: d.state,
    ...(d.reason ? { reason: d.reason } : {}),
    attempts: d.attempts.map((a) => ({ ...a, at: iso(a.at), ...(a.error === undefined ? {} : { error: publicAttemptError(a.error) }) })),
    nextAttemptAt: d.nextAttemptAt === null ? null : iso(d.nextAttemptAt),
    createdAt: iso(d.createdAt),
    updatedAt: iso(d.updatedAt),
  };
}
