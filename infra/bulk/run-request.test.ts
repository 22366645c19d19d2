import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../kernel/errors.ts';
import { parseBulkRunRequest, resolveDeadline } from './run-request.ts';
import { parseS3Url } from './s3-url.ts';

const ok = { model: 'scorer', input: 's3://data/in/', output: 's3://data/out/' };
const NOW = new Date(2024, 0, 10, 23, 0, 0).getTime(); // local 23:00

function error(body: unknown): InvalidInputError {
  try {
    parseBulkRunRequest(body, NOW);
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error('expected an InvalidInputError');
}

describe('parseBulkRunRequest', () => {
  it('accepts a full request and resolves the deadline', () => {
    const r = parseBulkRunRequest(
      {
        ...ok,
        version: '2',
        format: 'csv',
        chunkRows: 500,
        deadline: '06:00',
        webhook: { url: 'https://example.com/h', events: ['bulk.succeeded'] },
        maxBadRows: 10,
        runId: 'nightly-2024-01-10',
      },
      NOW,
    );
    expect(r.deadline).toBe(new Date(2024, 0, 11, 6, 0, 0).getTime());
    expect(r).toMatchObject({ version: '2', format: 'csv', chunkRows: 500, maxBadRows: 10, runId: 'nightly-2024-01-10' });
  });

  it('names the field that is wrong', () => {
    expect(error({ ...ok, input: 'http://x/y' }).message).toMatch(/"input"/);
    expect(error({ ...ok, chunkRows: 0 }).message).toMatch(/"chunkRows"/);
    expect(error({ ...ok, chunkRows: 1.5 }).message).toMatch(/"chunkRows"/);
    expect(error({ ...ok, format: 'xml' }).message).toMatch(/"format"/);
    expect(error({ ...ok, outputFormat: 'xlsx' }).message).toMatch(/"outputFormat" must be one of jsonl, csv, parquet/);
    expect(error({ ...ok, columns: { x: [] } }).message).toMatch(/"columns" "x" must list at least one column/);
    expect(error({ ...ok, columns: { x: ['a', 'a'] } }).message).toMatch(/lists a column twice/);
    expect(error({ ...ok, columns: 5 }).message).toMatch(/"columns" must map each model input/);
    expect(error({ ...ok, columns: 'x=' }).message).toMatch(/is not a column name/);
    expect(error({ ...ok, idColumn: '' }).message).toMatch(/"idColumn"/);
    expect(error({ ...ok, model: 'bad name' }).message).toMatch(/"model"/);
    expect(error({ ...ok, runId: 'a:b' }).message).toMatch(/"runId"/);
    expect(error({ ...ok, webhook: { url: 'ftp://x' } }).message).toMatch(/"webhook.url"/);
    expect(error({ ...ok, webhook: { url: 'https://x', events: ['job.succeeded'] } }).message).toMatch(/"webhook.events"/);
    expect(error({ ...ok, deadline: '2020-01-01T00:00:00Z' }).message).toMatch(/already passed/);
    expect(error({ ...ok, chunkrows: 5 }).message).toMatch(/"chunkrows" unknown field/);
    expect(error({ model: 'm', output: 's3://b/o/' }).message).toMatch(/"input" is required/);
  });

  it('takes columns as JSON or as the CLI writes them, and the output format and id column', () => {
    const r = parseBulkRunRequest({ ...ok, format: 'parquet', outputFormat: 'csv', idColumn: 'key', columns: 'f1, f2,f3' }, NOW);
    expect(r).toMatchObject({ format: 'parquet', outputFormat: 'csv', idColumn: 'key', columns: { '': ['f1', 'f2', 'f3'] } });
    expect(parseBulkRunRequest({ ...ok, columns: 'x=a,b;y=seq' }, NOW).columns).toEqual({ x: ['a', 'b'], y: ['seq'] });
    expect(parseBulkRunRequest({ ...ok, columns: { x: ['a'] } }, NOW).columns).toEqual({ x: ['a'] });
    expect(parseBulkRunRequest({ ...ok, columns: ['a', 'b'] }, NOW).columns).toEqual({ '': ['a', 'b'] });
  });

  it('refuses an output that overlaps the input', () => {
    expect(error({ ...ok, output: 's3://data/in/out/' }).message).toMatch(/overlap/);
    expect(parseBulkRunRequest({ ...ok, output: 's3://other/in/' }, NOW).output).toBe('s3://other/in/');
  });

  it('takes CLI strings for numbers', () => {
    const r = parseBulkRunRequest({ ...ok, chunkRows: '250', deadline: String(NOW + 60_000) }, NOW);
    expect(r.chunkRows).toBe(250);
    expect(r.deadline).toBe(NOW + 60_000);
  });
});

describe('resolveDeadline', () => {
  it('HH:MM is the next time the clock shows it', () => {
    expect(resolveDeadline('23:30', NOW)).toBe(new Date(2024, 0, 10, 23, 30).getTime());
    expect(resolveDeadline('22:00', NOW)).toBe(new Date(2024, 0, 11, 22, 0).getTime());
    expect(() => resolveDeadline('25:00', NOW)).toThrow(/time of day/);
  });
});

describe('parseS3Url', () => {
  it('splits bucket and prefix, adding the trailing slash', () => {
    expect(parseS3Url('s3://b-1/a/b', 'input')).toEqual({ bucket: 'b-1', prefix: 'a/b/' });
    expect(parseS3Url('s3://bucket', 'input')).toEqual({ bucket: 'bucket', prefix: '' });
    expect(() => parseS3Url('s3://B/x', 'input')).toThrow(/bucket/);
    expect(() => parseS3Url('s3://bkt/x//y', 'input')).toThrow(/empty path segment/);
  });
});
