/**
 * The Lambda entry serves the same app: an API Gateway (HTTP API, payload v2) event in, a
 * Lambda proxy result out, with config read from the environment on the first invocation.
 */
import { expect, it, onTestFinished } from 'vitest';
import { testEnv } from './support/services.ts';

function event(method: string, path: string, headers: Record<string, string> = {}) {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { host: 'example.execute-api.amazonaws.com', ...headers },
    requestContext: {
      accountId: '123456789012',
      apiId: 'api',
      domainName: 'example.execute-api.amazonaws.com',
      domainPrefix: 'example',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '203.0.113.1', userAgent: 'test' },
      requestId: 'req',
      routeKey: '$default',
      stage: '$default',
      time: '21/Nov/2026:00:00:00 +0000',
      timeEpoch: 0,
    },
    isBase64Encoded: false,
  };
}

it('answers health and enforces auth through hono’s Lambda adapter', async () => {
  Object.assign(process.env, testEnv());
  const { closeLambdaRuntime, lambdaHandler } = await import('../api/lambda.ts');
  onTestFinished(() => closeLambdaRuntime());
  // biome-ignore lint/suspicious/noExplicitAny: the adapter's event union is wide; this is a v2 event.
  const call = (e: any) => lambdaHandler(e, {} as never) as Promise<{ statusCode: number; body: string }>;
  const live = await call(event('GET', '/v2/health/live'));
  expect(live.statusCode).toBe(200);
  expect(JSON.parse(live.body)).toEqual({ live: true });
  const denied = await call(event('GET', '/v1/models'));
  expect(denied.statusCode).toBe(401);
  const models = await call(event('GET', '/v1/models', { authorization: 'Bearer key-aaaaaaaaaaaaaaaa' }));
  expect(models.statusCode).toBe(200);
  expect(JSON.parse(models.body)).toEqual({ models: [] });
});
