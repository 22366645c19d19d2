/**
 * GET /openapi.json and GET /docs, both open (no API key: a reference is no secret, and a
 * client needs it before it has a key). The document and the page are built once, when the
 * routes are made, since they depend only on the code.
 */
import { Hono } from 'hono';
import { renderDocsPage } from './docs-page.ts';
import { buildOpenApiDocument, type OpenApiOptions } from './document.ts';

export function openApiRoutes(options: OpenApiOptions = {}): Hono {
  const document = buildOpenApiDocument(options);
  const page = renderDocsPage(document);
  const app = new Hono();
  app.get('/openapi.json', (c) => c.json(document));
  app.get('/docs', (c) => c.html(page.html, 200, { 'Content-Security-Policy': page.contentSecurityPolicy }));
  return app;
}
