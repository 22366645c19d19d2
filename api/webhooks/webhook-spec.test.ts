import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { parseWebhookSpec } from './webhook-spec.ts';

const open = { allowedPrivateHosts: [] as string[] };

function errorOf(raw: unknown, options = open): InvalidInputError {
  try {
    parseWebhookSpec(raw, options);
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error('expected parseWebhookSpec to throw');
}

describe('parseWebhookSpec', () => {
  it('is undefined when no webhook is given', () => {
    expect(parseWebhookSpec(undefined, open)).toBeUndefined();
    expect(parseWebhookSpec(null, open)).toBeUndefined();
  });

  it('defaults the events to succeeded and failed', () => {
    expect(parseWebhookSpec({ url: 'https://hooks.example.com/a?b=c' }, open)).toEqual({
      url: 'https://hooks.example.com/a?b=c',
      events: ['job.succeeded', 'job.failed'],
    });
  });

  it('keeps the events asked for, once each', () => {
    const spec = parseWebhookSpec({ url: 'http://example.com', events: ['job.started', 'job.started', 'job.failed'] }, open);
    expect(spec).toEqual({ url: 'http://example.com/', events: ['job.started', 'job.failed'] });
  });

  it.each([
    ['a string', 'https://example.com'],
    ['an array', ['https://example.com']],
    ['no url', {}],
    ['an empty url', { url: '' }],
    ['a numeric url', { url: 42 }],
    ['a relative url', { url: '/hooks' }],
    ['ftp', { url: 'ftp://example.com/x' }],
    ['javascript:', { url: 'javascript:alert(1)' }],
    ['file:', { url: 'file:///etc/passwd' }],
    ['credentials', { url: 'https://user:pw@example.com/' }],
    ['a user only', { url: 'https://user@example.com/' }],
    ['a url too long', { url: `https://example.com/${'a'.repeat(2048)}` }],
    ['unknown events', { url: 'https://example.com', events: ['job.deleted'] }],
    ['empty events', { url: 'https://example.com', events: [] }],
    ['events not an array', { url: 'https://example.com', events: 'job.failed' }],
    ['an unknown field', { url: 'https://example.com', secret: 'x' }],
  ])('refuses %s with invalid_webhook (422)', (_label, raw) => {
    const err = errorOf(raw);
    expect(err.code).toBe('invalid_webhook');
    expect(err.status).toBe(422);
    expect(err.message).toMatch(/webhook/);
  });

  it.each([
    'http://127.0.0.1/hook',
    'http://2130706433/',
    'http://0x7f.1/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::1]:8080/',
    'http://10.0.0.5/',
    'http://169.254.169.254/latest/meta-data',
    'http://[fd00:ec2::254]/',
    'http://100.64.1.1/',
    'http://224.0.0.1/',
    'http://0.0.0.0/',
    'https://localhost/',
    'https://foo.localhost/',
  ])('refuses the literal blocked host of %s with webhook_url_blocked (422)', (url) => {
    const err = errorOf({ url });
    expect(err.code).toBe('webhook_url_blocked');
    expect(err.status).toBe(422);
  });

  it('lets hosts named in allowedPrivateHosts through', () => {
    const options = { allowedPrivateHosts: ['127.0.0.1', 'localhost'] };
    expect(parseWebhookSpec({ url: 'http://127.0.0.1:9000/h' }, options)?.url).toBe('http://127.0.0.1:9000/h');
    expect(parseWebhookSpec({ url: 'http://localhost:9000/h' }, options)?.url).toBe('http://localhost:9000/h');
    expect(errorOf({ url: 'http://127.0.0.2/' }, options).code).toBe('webhook_url_blocked');
  });

  it('accepts names that only resolve later (checked again at delivery)', () => {
    expect(parseWebhookSpec({ url: 'https://hooks.example.com/x' }, open)?.url).toBe('https://hooks.example.com/x');
  });
});
