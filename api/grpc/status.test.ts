import { status } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { InvalidInputError, NotFoundError, OverloadedError, UnauthorizedError } from '../../infra/kernel/errors.ts';
import type { Log } from '../../infra/kernel/log.ts';
import {
  ERROR_CODE_KEY,
  inferenceFailed,
  JOB_ID_KEY,
  RETRY_AFTER_KEY,
  rateLimited,
  StatusError,
  timedOut,
  toGrpcStatus,
} from './status.ts';

const entries = (s: ReturnType<typeof toGrpcStatus>) => s.metadata?.getMap();

describe('toGrpcStatus', () => {
  it.each([
    [new InvalidInputError('datatype_mismatch', 'input "x": expected datatype FP32, got INT32'), status.INVALID_ARGUMENT],
    [new InvalidInputError('too_many_rows', 'too many rows', { status: 413 }), status.INVALID_ARGUMENT],
    [new InvalidInputError('conflict', 'conflict', { status: 409 }), status.FAILED_PRECONDITION],
    [new InvalidInputError('too_many_open_jobs', 'too many open jobs', { status: 429 }), status.RESOURCE_EXHAUSTED],
    [new InvalidInputError('forbidden', 'not yours', { status: 403 }), status.PERMISSION_DENIED],
    [new NotFoundError('model_not_found', 'model nope not found'), status.NOT_FOUND],
    [new UnauthorizedError('unauthorized', 'unknown API key'), status.UNAUTHENTICATED],
  ])('%s → %i, with warmpool`s message and code', (err, code) => {
    const s = toGrpcStatus(err);
    expect(s.code).toBe(code);
    expect(s.details).toBe(err.message);
    expect(entries(s)).toEqual({ [ERROR_CODE_KEY]: err.code });
  });

  it('overloaded: UNAVAILABLE with the retry time in the message and the metadata', () => {
    const s = toGrpcStatus(new OverloadedError('backlog_full', 'the backlog of m is full', 3));
    expect(s).toMatchObject({ code: status.UNAVAILABLE, details: 'the backlog of m is full; retry in 3 s' });
    expect(entries(s)).toEqual({ [ERROR_CODE_KEY]: 'backlog_full', [RETRY_AFTER_KEY]: '3' });
  });

  it('Redis unreachable: UNAVAILABLE `unavailable`', () => {
    const err = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    expect(toGrpcStatus(err)).toMatchObject({
      code: status.UNAVAILABLE,
      details: 'a backing store (Redis or S3) is unreachable; retry shortly',
    });
  });

  it('anything else: INTERNAL without internals, logged whole', () => {
    const logged: unknown[] = [];
    const log = { error: (obj: unknown) => logged.push(obj) } as unknown as Log;
    const bug = new TypeError('x is undefined');
    const s = toGrpcStatus(bug, log);
    expect(s).toMatchObject({ code: status.INTERNAL, details: 'internal error; the server has logged it' });
    expect(logged).toEqual([{ err: bug, transport: 'grpc' }]);
  });

  it('a StatusError is answered as it is', () => {
    const s = rateLimited(1_200, 'too many requests');
    expect(toGrpcStatus(new StatusError(s))).toBe(s);
    expect(s).toMatchObject({ code: status.RESOURCE_EXHAUSTED, details: 'too many requests; retry in 2 s' });
    expect(entries(s)).toEqual({ [ERROR_CODE_KEY]: 'rate_limited', [RETRY_AFTER_KEY]: '2' });
  });
});

describe('inference outcomes', () => {
  it('a sync timeout is DEADLINE_EXCEEDED naming the job to poll, its id in the metadata', () => {
    const s = timedOut('job_abc', 250);
    expect(s).toMatchObject({
      code: status.DEADLINE_EXCEEDED,
      details: 'inference did not finish within 250 ms; poll /v1/jobs/job_abc over HTTP',
    });
    expect(entries(s)).toEqual({ [ERROR_CODE_KEY]: 'timeout', [JOB_ID_KEY]: 'job_abc' });
  });

  it('a failed inference is INTERNAL, or INVALID_ARGUMENT when the worker found the input bad', () => {
    expect(inferenceFailed('job_1', { code: 'engine_error', message: 'boom' })).toMatchObject({ code: status.INTERNAL, details: 'boom' });
    const bad = inferenceFailed('job_2', { code: 'invalid_input', message: 'index 9 out of range' });
    expect(bad).toMatchObject({ code: status.INVALID_ARGUMENT, details: 'index 9 out of range' });
    expect(entries(bad)).toEqual({ [ERROR_CODE_KEY]: 'invalid_input', [JOB_ID_KEY]: 'job_2' });
  });
});
