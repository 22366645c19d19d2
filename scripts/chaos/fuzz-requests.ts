/**
 * Generators (fast-check) of malformed and hostile HTTP requests for every route of the API:
 * random methods; paths with traversal, encoded nulls, bad escapes, unicode and great length;
 * headers with bad or huge credentials, wrong content types and odd idempotency keys; bodies
 * that are invalid JSON, deeply nested, huge, full of prototype-pollution keys, or job
 * requests that are almost right (wrong datatypes, negative or huge dims, NaN/Infinity as
 * strings, data that does not match the shape).
 */
import fc from 'fast-check';

export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

export interface FuzzTargets {
  /** The deployed model: requests that name it reach the deeper validation. */
  model: string;
  /** A real job id of the fuzzing tenant. */
  jobId: string;
  validKey: string;
  /** Features per row of the model's input. */
  features: number;
}

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'PURGE'];

/** Every route, with the method it answers (most requests use it; some use another). */
const ROUTES: Array<[string, string]> = [
  ['POST', '/v1/models/{m}/jobs'],
  ['GET', '/v1/jobs/{id}'],
  ['DELETE', '/v1/jobs/{id}'],
  ['GET', '/v1/models'],
  ['POST', '/v2/models/{m}/infer'],
  ['POST', '/v2/models/{m}/versions/{v}/infer'],
  ['GET', '/v2/models/{m}'],
  ['GET', '/v2/models/{m}/versions/{v}'],
  ['GET', '/v2/models/{m}/ready'],
  ['GET', '/v2/models/{m}/versions/{v}/ready'],
  ['GET', '/v2'],
  ['GET', '/v2/health/live'],
  ['GET', '/v2/health/ready'],
  ['GET', '/v1/deployments'],
  ['GET', '/v1/deployments/{m}'],
  ['PUT', '/v1/deployments/{m}'],
  ['POST', '/v1/deployments/{m}/rollback'],
  ['GET', '/v1/deployments/{m}/history'],
  ['GET', '/v1/deployments/{m}/canary'],
  ['GET', '/v1/webhooks/secret'],
  ['POST', '/v1/webhooks/secret/rotate'],
  ['DELETE', '/v1/webhooks/secret/previous'],
  ['GET', '/v1/webhooks/deliveries'],
  ['POST', '/v1/webhooks/deliveries/{id}/replay'],
  ['GET', '/v1/pool'],
  ['POST', '/v1/bulk-runs'],
  ['GET', '/v1/bulk-runs/{id}'],
  ['DELETE', '/v1/bulk-runs/{id}'],
  ['GET', '/metrics'],
  ['GET', '/openapi.json'],
  ['GET', '/docs'],
];

/** A path segment: sometimes the real thing, mostly not. */
function segment(real: string): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant(real) },
    fc.constantFrom('..', '%2e%2e', '..%2f..%2fetc%2fpasswd', '%00', '%ZZ', '%', '.', '~', 'null', 'undefined', '__proto__', 'constructor'),
    fc.string({ maxLength: 40 }).map(encodeURIComponent),
    fc.string({ unit: 'grapheme', maxLength: 20 }).map(encodeURIComponent),
    fc.integer({ min: 1, max: 20_000 }).map((n) => 'a'.repeat(n)),
    fc.stringMatching(/^[A-Za-z0-9_-]{1,140}$/),
  );
}

const query = fc.oneof(
  { weight: 5, arbitrary: fc.constant('') },
  fc.constantFrom(
    '?limit=-1',
    '?limit=1e9',
    '?limit=abc',
    '?status=__proto__',
    '?status=dead&limit=0',
    '?a=%ZZ',
    '?&&==',
    '?version=../../x',
  ),
  fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 30 }), { maxKeys: 4 }).map((d) => `?${new URLSearchParams(d)}`),
);

/** A method and a path: mostly a route with its own method and fuzzed parameters. */
function targetArb(t: FuzzTargets): fc.Arbitrary<{ method: string; path: string }> {
  const method = (own: string) => fc.oneof({ weight: 4, arbitrary: fc.constant(own) }, fc.constantFrom(...METHODS));
  // Routes that read a body have the most to get wrong: they get most of the requests, and
  // those that take tensors or a deployment (the richest bodies) the most.
  const weight = ([method, route]: [string, string]) =>
    /\/jobs$|\/infer$|^\/v1\/deployments\/\{m\}$|^\/v1\/bulk-runs$/.test(route) && method !== 'GET' ? 10 : method === 'GET' ? 1 : 3;
  const route = fc.oneof(...ROUTES.map((r) => ({ weight: weight(r), arbitrary: fc.constant(r) })));
  const templated = fc
    .tuple(route, segment(t.model), segment(t.jobId), segment('1'), query)
    .chain(([[own, route], m, id, v, q]) =>
      method(own).map((verb) => ({ method: verb, path: route.replace('{m}', m).replace('{id}', id).replace('{v}', v) + q })),
    );
  const random = fc.record({
    method: fc.constantFrom(...METHODS),
    path: fc.oneof(
      fc.array(segment('v1'), { minLength: 0, maxLength: 6 }).map((parts) => `/${parts.join('/')}`),
      fc.constantFrom('/', '//', '/v1/', '/v1//jobs', '/./v1/models'),
    ),
  });
  return fc.oneof({ weight: 8, arbitrary: templated }, random);
}

/** Header values must be byte strings (latin-1) to be sent at all. */
const latin1 = fc.string({ maxLength: 200 }).map((s) => s.replace(/[^\x20-\x7e]/g, ''));

function headersArb(t: FuzzTargets): fc.Arbitrary<Record<string, string>> {
  const auth = fc.oneof(
    { weight: 8, arbitrary: fc.constant(`Bearer ${t.validKey}`) },
    fc.constantFrom('', 'Bearer', 'Bearer ', 'bearer x', 'Basic dXNlcjpwYXNz', `Bearer ${t.validKey} extra`, `Bearer  ${t.validKey}`),
    latin1.map((s) => `Bearer ${s}`),
    fc.integer({ min: 1_000, max: 12_000 }).map((n) => `Bearer ${'k'.repeat(n)}`),
  );
  const contentType = fc.oneof(
    { weight: 20, arbitrary: fc.constant('application/json') },
    fc.constantFrom(
      'text/plain',
      'application/json; charset=utf-16',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
    ),
    fc.constantFrom('application/problem+json', 'application/json;;', 'APPLICATION/JSON', '*/*', 'application/jsonx'),
    latin1,
  );
  return fc
    .record(
      {
        authorization: auth,
        'content-type': contentType,
        'idempotency-key': fc.oneof(
          latin1,
          fc.integer({ min: 200, max: 8_000 }).map((n) => 'i'.repeat(n)),
        ),
        accept: fc.constantFrom('text/event-stream', 'application/json', '*/*', 'x/y'),
      },
      { requiredKeys: ['authorization'] },
    )
    .map((h) => Object.fromEntries(Object.entries(h).filter(([, v]) => v !== undefined)) as Record<string, string>);
}

/** Numbers and number-like values a tensor should never accept. */
const hostileNumber = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom('NaN', 'Infinity', '-Infinity', '1e999', null, true, '0x10', '', [], {}, 1e308, -1e308, 2 ** 53 + 1),
);

const dim = fc.oneof(
  fc.integer({ min: -3, max: 70 }),
  fc.constantFrom(0, -1, 1e9, 2 ** 31, 2 ** 53, 1.5, Number.MAX_SAFE_INTEGER, 'NaN', '3', null),
);

function tensorArb(t: FuzzTargets): fc.Arbitrary<Record<string, unknown>> {
  return fc.record(
    {
      name: fc.oneof({ weight: 4, arbitrary: fc.constant('features') }, fc.string({ maxLength: 20 }), fc.constant('__proto__')),
      shape: fc.oneof({ weight: 3, arbitrary: fc.constant([1, t.features]) }, fc.array(dim, { maxLength: 6 }), hostileNumber),
      datatype: fc.oneof(
        { weight: 3, arbitrary: fc.constant('FP32') },
        fc.constantFrom('FP16', 'FP64', 'INT64', 'INT8', 'UINT64', 'BOOL', 'BYTES', 'BF16', 'fp32', '', 'FP32 '),
        fc.string({ maxLength: 8 }),
      ),
      data: fc.oneof(
        {
          weight: 3,
          arbitrary: fc.array(fc.double({ noNaN: true, noDefaultInfinity: true }), { minLength: t.features, maxLength: t.features }),
        },
        fc.array(hostileNumber, { maxLength: 40 }),
        fc.array(fc.array(hostileNumber, { maxLength: 5 }), { maxLength: 5 }),
        fc.integer({ min: 10_000, max: 100_000 }).map((n) => new Array(n).fill(0.5)),
        hostileNumber,
      ),
      parameters: fc.oneof(fc.constant(undefined), fc.object({ maxDepth: 2 })),
    },
    { requiredKeys: ['name', 'shape', 'datatype', 'data'] },
  );
}

/** A job or OIP request that is almost right. */
function jobBodyArb(t: FuzzTargets): fc.Arbitrary<string> {
  return fc
    .record(
      {
        inputs: fc.oneof({ weight: 4, arbitrary: fc.array(tensorArb(t), { minLength: 1, maxLength: 3 }) }, fc.anything()),
        outputs: fc.oneof(
          fc.constant(undefined),
          fc.array(fc.record({ name: fc.string({ maxLength: 10 }) }), { maxLength: 3 }),
          fc.anything(),
        ),
        priority: fc.oneof(fc.constant(undefined), fc.constantFrom('high', 'normal', 'low', 'urgent', 1, null)),
        version: fc.oneof(fc.constant(undefined), fc.constantFrom('1', '2', '../1', '', 1)),
        timeoutMs: fc.oneof(fc.constant(undefined), hostileNumber),
        cache: fc.oneof(fc.constant(undefined), fc.boolean(), fc.constant('yes')),
        webhook: fc.oneof(
          fc.constant(undefined),
          fc.record({
            url: fc.oneof(
              fc.webUrl(),
              fc.constantFrom('http://169.254.169.254/latest', 'http://127.0.0.1/x', 'file:///etc/passwd', 'http://[::1]/', 'javascript:1'),
            ),
            events: fc.oneof(fc.constant(undefined), fc.array(fc.string({ maxLength: 15 }), { maxLength: 3 })),
          }),
          fc.anything(),
        ),
      },
      { requiredKeys: ['inputs'] },
    )
    .map((b) => JSON.stringify(b));
}

/** A body that is right at the top but nests thousands deep where the route looks further in. */
function deepInside(t: FuzzTargets): fc.Arbitrary<string> {
  const deep = fc
    // Fixed depths: fast-check biases integers towards their bounds, and the stack overflows
    // this looks for start in the thousands.
    .tuple(fc.constantFrom(65, 200, 10_000, 50_000, 100_000), fc.boolean())
    .map(([n, arrays]) => (arrays ? `${'['.repeat(n)}1${']'.repeat(n)}` : `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`));
  const row = JSON.stringify(new Array(t.features).fill(0.5));
  return fc
    .tuple(fc.constantFrom('data', 'parameters', 'tensorParameters', 'policy', 'id', 'webhook', 'outputs'), deep)
    .map(([where, value]) => {
      if (where === 'data') return `{"inputs":[{"name":"features","shape":[1,${t.features}],"datatype":"FP32","data":${value}}]}`;
      if (where === 'tensorParameters') {
        return `{"inputs":[{"name":"features","shape":[1,${t.features}],"datatype":"FP32","data":${row},"parameters":${value}}]}`;
      }
      if (where === 'policy') return `{"version":"1","min":0,"max":2,"standby":0,"policy":${value}}`;
      return `{"inputs":[{"name":"features","shape":[1,${t.features}],"datatype":"FP32","data":${row}}],"${where}":${value}}`;
    });
}

const PROTO_BODIES = [
  '{"__proto__":{"polluted":true},"inputs":[]}',
  '{"constructor":{"prototype":{"polluted":true}}}',
  '{"inputs":[{"name":"features","__proto__":{"shape":[1,16]},"datatype":"FP32","data":[1]}]}',
  '{"webhook":{"__proto__":{"url":"http://127.0.0.1/"}}}',
  '{"versions":[{"version":"1","weight":100,"__proto__":{"weight":-1}}],"__proto__":{"min":-5}}',
];

function bodyArb(t: FuzzTargets): fc.Arbitrary<string | undefined> {
  // Weights: mostly near-miss job requests; a few deep or huge bodies (costly to send).
  return fc.oneof(
    { weight: 60, arbitrary: jobBodyArb(t) },
    { weight: 20, arbitrary: fc.json({ maxDepth: 4 }) },
    { weight: 10, arbitrary: fc.constant(undefined) },
    { weight: 10, arbitrary: fc.string({ maxLength: 200 }) },
    { weight: 10, arbitrary: fc.constantFrom(...PROTO_BODIES) },
    { weight: 10, arbitrary: jobBodyArb(t).map((s) => s.slice(0, Math.max(1, Math.floor(s.length / 2)))) },
    { weight: 3, arbitrary: fc.integer({ min: 100, max: 200_000 }).map((n) => '['.repeat(n) + ']'.repeat(n)) },
    { weight: 3, arbitrary: fc.integer({ min: 100, max: 100_000 }).map((n) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`) },
    { weight: 20, arbitrary: deepInside(t) },
    { weight: 10, arbitrary: fc.constantFrom('null', '[]', '0', '"x"', 'true', '{}', '{"inputs":null}', 'NaN', '\u0000', '\ufeff{}') },
    { weight: 1, arbitrary: fc.integer({ min: 8_400_000, max: 9_000_000 }).map((n) => `{"inputs":"${'x'.repeat(n)}"}`) },
    { weight: 10, arbitrary: fc.object({ maxDepth: 3 }).map((o) => JSON.stringify(o)) },
  );
}

export function requestArb(t: FuzzTargets): fc.Arbitrary<FuzzRequest> {
  return fc.record({ target: targetArb(t), headers: headersArb(t), body: bodyArb(t) }).map(({ target, headers, body }) => ({
    ...target,
    headers,
    body: target.method === 'GET' || target.method === 'HEAD' ? undefined : body,
  }));
}
