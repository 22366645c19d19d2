/**
 * GET /dashboard and GET /dashboard/assets/:file: the operator dashboard's page and its files,
 * open like /docs (the shell holds no data; every data call carries the API key the page's login
 * form asks for). Everything is read once, when the routes are made: the page and its module from
 * api/dashboard/assets/, uPlot's script and stylesheet from the installed package (no CDN:
 * warmpool runs in closed networks).
 *
 * Caching: asset URLs carry a hash of their content (`?v=…`), so assets are cached for a year
 * as immutable and a new release changes the URL; the page itself is revalidated every time.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Hono } from 'hono';
import { NotFoundError } from '../../infra/kernel/errors.ts';

interface Asset {
  body: string;
  contentType: string;
  hash: string;
}

const require = createRequire(import.meta.url);
const own = (name: string) => new URL(`./assets/${name}`, import.meta.url);

const SOURCES: Record<string, { from: () => string | URL; contentType: string }> = {
  'uPlot.iife.min.js': { from: () => require.resolve('uplot/dist/uPlot.iife.min.js'), contentType: 'text/javascript; charset=utf-8' },
  'uPlot.min.css': { from: () => require.resolve('uplot/dist/uPlot.min.css'), contentType: 'text/css; charset=utf-8' },
  'dashboard.js': { from: () => own('dashboard.js'), contentType: 'text/javascript; charset=utf-8' },
  'dashboard.css': { from: () => own('dashboard.css'), contentType: 'text/css; charset=utf-8' },
};

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  // uPlot positions its parts through element.style (CSSOM), which style-src does not govern.
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

let loaded: { html: string; assets: Map<string, Asset> } | undefined;

export function dashboardPageRoutes(): Hono {
  loaded ??= load();
  const { html, assets } = loaded;
  const app = new Hono();
  app.get('/dashboard', (c) => c.html(html, 200, { 'Content-Security-Policy': CSP, 'Cache-Control': 'no-cache' }));
  app.get('/dashboard/assets/:file', (c) => {
    const asset = assets.get(c.req.param('file'));
    if (!asset) throw new NotFoundError('asset_not_found', `no dashboard asset ${c.req.param('file')}`);
    return c.body(asset.body, 200, {
      'Content-Type': asset.contentType,
      'Cache-Control': 'public, max-age=31536000, immutable',
      ETag: `"${asset.hash}"`,
      'X-Content-Type-Options': 'nosniff',
    });
  });
  return app;
}

/** Reads every file once per process (the files do not change while it runs). */
function load(): { html: string; assets: Map<string, Asset> } {
  const assets = new Map<string, Asset>();
  for (const [name, source] of Object.entries(SOURCES)) {
    const body = readFileSync(source.from(), 'utf8');
    assets.set(name, { body, contentType: source.contentType, hash: createHash('sha256').update(body).digest('hex').slice(0, 12) });
  }
  // Relative URLs, so the page works under a path prefix (an API Gateway stage) too.
  const html = readFileSync(own('index.html'), 'utf8').replace(/\{\{asset:([^}]+)\}\}/g, (_, name: string) => {
    const asset = assets.get(name);
    if (!asset) throw new Error(`dashboard page names an unknown asset ${name}`);
    return `dashboard/assets/${name}?v=${asset.hash}`;
  });

  return { html, assets };
}
