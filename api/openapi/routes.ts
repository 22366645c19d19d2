/**
 * GET /openapi.json and GET /docs, both open (no API key: a reference is no secret, and a
 * client needs it before it has a key). Both depend only on the code: the document is built once,
 * on the first request to either, and each answer is served from its bytes, serialised and
 * compressed once (api/http/static-body.ts: ETag, 304, a gzip or deflate variant).
 */
import { Hono } from 'hono';
import { staticBody } from '../http/static-body.ts';
import { renderDocsPage } from './docs-page.ts';
import { buildOpenApiDocument, type OpenApiOptions } from './document.ts';

export function openApiRoutes(options: OpenApiOptions = {}): Hono {
  let document: Record<string, unknown> | undefined;
  const built = () => {
    document ??= buildOpenApiDocument(options);
    return document;
  };
  const app = new Hono();
  app.get(
    '/openapi.json',
    staticBody(() => ({ body: JSON.stringify(built()), headers: { 'Content-Type': 'application/json' } })),
  );
  app.get(
    '/docs',
    staticBody(() => {
      const page = renderDocsPage(built());
      return {
        body: page.html,
        headers: { 'Content-Type': 'text/html; charset=UTF-8', 'Content-Security-Policy': page.contentSecurityPolicy },
      };
    }),
  );
  return app;
}
