/**
 * The Worker's entry (bundled by `warmpool edge build`): the gateway (gateway.ts) built once per
 * isolate from its bindings, and the two Durable Object classes it names: EdgeRateLimiter (one per
 * bucket) and EdgeBuffer (one per tenant). Bindings: deploy/edge/wrangler.toml, or the workerd
 * config `warmpool edge build` writes beside the bundle.
 */

import type { EdgeCatalog } from '../use-cases/edge-catalog.ts';
import { edgeKeyLookup } from './edge-auth.ts';
import { EdgeBufferCore } from './edge-buffer.ts';
import { createCatalogReader } from './edge-catalog.ts';
import { type EdgeConfig, loadEdgeConfig } from './edge-config.ts';
import { createGateway } from './gateway.ts';
import { EdgeRateLimiter } from './rate-limiter-object.ts';
import { createRegionClient, type RegionClient } from './region-client.ts';
import type { DurableObjectNamespace, DurableObjectState, ExecutionContext } from './workers-types.ts';

interface Env extends Record<string, unknown> {
  LIMITER: DurableObjectNamespace;
  BUFFER: DurableObjectNamespace;
}

interface Isolate {
  config: EdgeConfig;
  region: RegionClient;
}

let isolate: Isolate | undefined;
let gateway: Promise<ReturnType<typeof createGateway>> | undefined;

/** Config and region client, read once per isolate (the bindings do not change within one). */
function isolateOf(env: Env): Isolate {
  if (!isolate) {
    const config = loadEdgeConfig(env);
    const region = createRegionClient({ regionUrl: config.regionUrl, regionKey: config.regionKey, timeoutMs: config.forwardTimeoutMs });
    isolate = { config, region };
  }
  return isolate;
}

function gatewayOf(env: Env): Promise<ReturnType<typeof createGateway>> {
  gateway ??= (async () => {
    const { config, region } = isolateOf(env);
    return createGateway({
      config,
      region,
      catalog: createCatalogReader(() => region.getJson<EdgeCatalog>('/v1/edge/catalog')),
      keys: await edgeKeyLookup(config.apiKeys),
      limiter: env.LIMITER,
      buffer: env.BUFFER,
      now: () => Date.now(),
      newId: () => crypto.randomUUID(),
    });
  })();
  return gateway;
}

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    let app: Awaited<ReturnType<typeof gatewayOf>>;
    try {
      app = await gatewayOf(env);
    } catch (err) {
      gateway = undefined;
      isolate = undefined;
      const message = err instanceof Error ? err.message : String(err);
      console.error('edge gateway misconfigured', message);
      return Response.json({ error: { code: 'edge_misconfigured', message } }, { status: 500 });
    }
    return app.fetch(request, env, ctx);
  },
};

export { EdgeRateLimiter };

/** A tenant's buffer of submissions held while the region cannot be reached (edge-buffer.ts). */
export class EdgeBuffer {
  private readonly core: EdgeBufferCore;

  constructor(state: DurableObjectState, env: Env) {
    const { config, region } = isolateOf(env);
    this.core = new EdgeBufferCore(state, { region, maxEntries: config.bufferMaxEntries });
  }

  fetch(request: Request): Promise<Response> {
    return this.core.fetch(request);
  }

  alarm(): Promise<void> {
    return this.core.alarm();
  }
}
