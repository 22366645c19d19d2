#!/usr/bin/env node
/**
 * The image's HEALTHCHECK, one for every role: GET `WARMPOOL_HEALTH_URL` must answer 2xx within
 * 2.5 s. Default: the API's liveness route on PORT. A worker sets its health port's `/live`
 * (worker/health-server.ts); roles without HTTP (scaler, dispatcher) set `none`, where the
 * process being up is all Docker can tell. Liveness, not readiness: a Redis outage must not make
 * the orchestrator restart an API that will recover by itself.
 */
const url = process.env.WARMPOOL_HEALTH_URL || `http://127.0.0.1:${process.env.PORT || 8080}/v2/health/live`;
if (url === 'none') process.exit(0);
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(2500) });
  process.exit(res.ok ? 0 : 1);
} catch {
  process.exit(1);
}
