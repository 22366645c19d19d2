import { describe, expect, it } from 'vitest';
import { closestName } from '../../infra/kernel/closest-name.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { JOB_REQUEST_FIELDS, rejectUnknownFields } from './known-fields.ts';

describe('closestName over the job request fields', () => {
  it.each([
    ['webhook_url', 'webhook'],
    ['webhookUrl', 'webhook'],
    ['Webhook', 'webhook'],
    ['timeout', 'timeoutMs'],
    ['timeout_ms', 'timeoutMs'],
    ['input', 'inputs'],
    ['output', 'outputs'],
    ['priorty', 'priority'],
    ['degradeable', 'degradable'],
    ['params', 'parameters'],
    ['versoin', 'version'],
  ])('%s means %s', (name, field) => {
    expect(closestName(name, JOB_REQUEST_FIELDS)).toBe(field);
  });

  it.each(['width', 'callback_url', 'data', '', '__'])('%j means nothing known', (name) => {
    expect(closestName(name, JOB_REQUEST_FIELDS)).toBeUndefined();
  });
});

describe('rejectUnknownFields', () => {
  const errorOf = (body: Record<string, unknown>) => {
    try {
      rejectUnknownFields(body, JOB_REQUEST_FIELDS, 'a job request');
    } catch (err) {
      return err;
    }
    return undefined;
  };

  it('passes every known field', () => {
    const body = Object.fromEntries(JOB_REQUEST_FIELDS.map((f) => [f, 1]));
    expect(errorOf(body)).toBeUndefined();
  });

  it('names the unknown field and the one it likely meant', () => {
    const err = errorOf({ inputs: [], webhook_url: 'https://example.com/hook' });
    expect(err).toBeInstanceOf(InvalidInputError);
    expect(err).toMatchObject({
      status: 400,
      code: 'unknown_field',
      message: '"webhook_url" is not a field of a job request; did you mean "webhook"?',
    });
  });

  it('lists the known fields when none is close', () => {
    expect(errorOf({ inputs: [], callback: 'https://example.com/' })).toMatchObject({
      code: 'unknown_field',
      message:
        '"callback" is not a field of a job request; its fields are "id", "inputs", "outputs", "parameters", "model_name", "model_version", "priority", "version", "timeoutMs", "webhook", "degradable", "cache"',
    });
    expect(errorOf({ inputs: [], model: 'scorer' })).toMatchObject({
      code: 'unknown_field',
      message: '"model" is not a field of a job request; did you mean "model_name"?',
    });
  });
});
