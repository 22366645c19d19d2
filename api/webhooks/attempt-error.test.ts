import { describe, expect, it } from 'vitest';
import { attemptErrorCategory, BlockedAddressError, httpErrorCategory, publicAttemptError } from './attempt-error.ts';

const errno = (code: string, message = `${code} 10.0.0.7:5432`) => Object.assign(new Error(message), { code });

describe('attemptErrorCategory', () => {
  it.each([
    [new BlockedAddressError('host rebind.test resolves to 127.0.0.1, a blocked address (loopback)'), 'blocked_address'],
    [Object.assign(new Error('The operation was aborted due to timeout'), { name: 'TimeoutError' }), 'timeout'],
    [errno('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:80'), 'connection_refused'],
    [errno('ECONNRESET', 'socket hang up'), 'connection_reset'],
    [errno('EPIPE'), 'connection_reset'],
    [errno('ETIMEDOUT'), 'timeout'],
    [errno('ENOTFOUND', 'getaddrinfo ENOTFOUND db.internal'), 'dns'],
    [errno('EAI_AGAIN'), 'dns'],
    [new Error('host x resolved to no address'), 'dns'],
    [errno('EHOSTUNREACH'), 'unreachable'],
    [errno('ENETUNREACH'), 'unreachable'],
    [errno('DEPTH_ZERO_SELF_SIGNED_CERT'), 'tls'],
    [errno('ERR_TLS_CERT_ALTNAME_INVALID'), 'tls'],
    [errno('UNABLE_TO_VERIFY_LEAF_SIGNATURE'), 'tls'],
    [errno('EPROTO'), 'tls'],
    [errno('HPE_INVALID_CONSTANT'), 'invalid_response'],
    [errno('EWHATEVER'), 'connection_error'],
    ['a string', 'connection_error'],
  ])('%s → %s', (err, category) => {
    expect(attemptErrorCategory(err)).toBe(category);
  });

  it('names a non-2xx answer by its status', () => {
    expect(httpErrorCategory(503)).toBe('http_503');
  });
});

describe('publicAttemptError', () => {
  it('passes categories through and maps the raw errors records kept before categories existed', () => {
    expect(publicAttemptError('connection_refused')).toBe('connection_refused');
    expect(publicAttemptError('http_429')).toBe('http_429');
    expect(publicAttemptError('timeout')).toBe('timeout');
    expect(publicAttemptError('ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:80')).toBe('connection_refused');
    expect(publicAttemptError('ENOTFOUND: getaddrinfo ENOTFOUND db.internal')).toBe('dns');
    expect(publicAttemptError('blocked: host rebind.test resolves to 127.0.0.1, a blocked address (loopback)')).toBe('blocked_address');
    expect(publicAttemptError('socket hang up at 10.0.0.7')).toBe('connection_error');
  });
});
