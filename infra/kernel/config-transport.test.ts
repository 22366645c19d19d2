import { describe, expect, it } from 'vitest';
import { loadConfig, MIN_API_KEY_LENGTH } from './config.ts';

const load = (env: Record<string, string>) => loadConfig(env);

describe('API_KEYS', () => {
  it('refuses at start a key shorter than 16 characters, naming the variable and the tenant, never the key', () => {
    expect(MIN_API_KEY_LENGTH).toBe(16);
    const short = 'abcdefghijklmno'; // 15
    expect(() => load({ API_KEYS: `ok:${'k'.repeat(16)},shorty:${short}` })).toThrow(
      /^API_KEYS: the key of tenant shorty has 15 characters; keys must have 16 or more$/,
    );
    try {
      load({ API_KEYS: `shorty:${short}` });
    } catch (err) {
      expect(String(err)).not.toContain(short);
    }
    // The 8-character keys the probe used are refused too.
    expect(() => load({ API_KEYS: 'tenant-a:key-aaaa' })).toThrow(/^API_KEYS: /);
  });

  it('accepts keys of 16 characters or more, and keeps them out of JSON', () => {
    const config = load({ API_KEYS: `a:${'k'.repeat(16)},b:${'x'.repeat(40)}` });
    expect(config.api.apiKeys.map((k) => k.tenant)).toEqual(['a', 'b']);
    expect(JSON.stringify(config)).not.toContain('k'.repeat(16));
  });
});

describe('transport settings', () => {
  it('defaults: headers in 10 s, a request in 60 s, 30 failed keys a minute per address, no proxy trusted, /metrics on the API port only', () => {
    const { api } = load({});
    expect(api).toMatchObject({ headersTimeoutMs: 10_000, requestTimeoutMs: 60_000, authFailureLimitPerMin: 30, trustProxyHops: 0 });
    expect(api.metricsPort).toBeUndefined();
    expect(api.metricsToken).toBeUndefined();
  });

  it('reads METRICS_PORT and METRICS_TOKEN; the token never serialises', () => {
    const token = 'metrics-token-0123456789';
    const config = load({ METRICS_PORT: '9464', METRICS_TOKEN: token });
    expect(config.api.metricsPort).toBe(9464);
    expect(config.api.metricsToken).toBe(token);
    expect(JSON.stringify(config)).not.toContain(token);
  });

  it('serves gRPC only when GRPC_PORT is set; 0 asks for any free port', () => {
    expect(load({}).api.grpcPort).toBeUndefined();
    expect(load({ GRPC_PORT: '' }).api.grpcPort).toBeUndefined();
    expect(load({ GRPC_PORT: '8081' }).api.grpcPort).toBe(8081);
    expect(load({ GRPC_PORT: '0' }).api.grpcPort).toBe(0);
  });

  it.each([
    [{ HEADERS_TIMEOUT_MS: '20000', REQUEST_TIMEOUT_MS: '10000' }, /^HEADERS_TIMEOUT_MS: /],
    [{ GRPC_PORT: '65536' }, /^GRPC_PORT: /],
    [{ GRPC_PORT: 'grpc' }, /^GRPC_PORT: /],
    [{ HEADERS_TIMEOUT_MS: '5' }, /^HEADERS_TIMEOUT_MS: /],
    [{ METRICS_PORT: '70000' }, /^METRICS_PORT: /],
    [{ METRICS_PORT: 'nine' }, /^METRICS_PORT: /],
    [{ METRICS_TOKEN: 'short-secret' }, /^METRICS_TOKEN: must be 16 characters or more \(got a value not shown\)$/],
    [{ TRUST_PROXY_HOPS: '-1' }, /^TRUST_PROXY_HOPS: /],
    [{ AUTH_FAILURE_LIMIT_PER_MIN: 'many' }, /^AUTH_FAILURE_LIMIT_PER_MIN: /],
  ])('refuses %j naming the variable', (env, message) => {
    expect(() => load(env)).toThrow(message);
  });
});

describe('sections', () => {
  it('names a value that does not parse before a failed check, whichever section each is in', () => {
    const env = { CANARY_SUSTAIN_MS: '600000', WORKER_HEALTH_PORT: 'x' };
    expect(() => load(env)).toThrow(/^WORKER_HEALTH_PORT: .* \(got "x"\)$/);
    expect(() => load({ CANARY_SUSTAIN_MS: '600000' })).toThrow(/^CANARY_SUSTAIN_MS: must be shorter than CANARY_WINDOW_MS$/);
  });

  it('gives S3 credentials only when both keys are set, and keeps them out of JSON', () => {
    expect(load({ AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE' }).s3.credentials).toBeUndefined();
    const config = load({ AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE', AWS_SECRET_ACCESS_KEY: 'secret-access-key', AWS_SESSION_TOKEN: 'session' });
    expect(config.s3.credentials).toEqual({ accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret-access-key', sessionToken: 'session' });
    expect(JSON.stringify(config)).not.toContain('secret-access-key');
    expect({ ...config.s3 }).not.toHaveProperty('credentials');
  });
});
