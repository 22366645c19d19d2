import { describe, expect, it } from 'vitest';
import { isUnavailableError } from './client.ts';

describe('isUnavailableError', () => {
  const connError = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:6379`), { code });

  it.each([
    ['a refused connection', connError('ECONNREFUSED')],
    ['a closed stream', new Error("Stream isn't writeable and enableOfflineQueue options is false")],
    ['a Redis still loading its AOF', new Error('LOADING Redis is loading the dataset in memory')],
    ['a cluster without coverage', new Error('CLUSTERDOWN The cluster is down')],
    ['a Cluster client before its nodes answer', new Error("Cluster isn't ready and enableOfflineQueue options is false")],
    ['a Cluster client with every node down', new Error('None of startup nodes is available')],
    ['a Cluster client that cannot learn the slots', new Error('Failed to refresh slots cache.')],
    [
      'a Cluster client bounced between failing nodes',
      new Error('Too many Cluster redirections. Last error: Error: Connection is closed.'),
    ],
    ['a cause further down', new Error('enqueue failed', { cause: connError('ECONNRESET') })],
    ['one of an AggregateError', new AggregateError([new Error('x'), connError('ETIMEDOUT')])],
  ])('is true for %s', (_, err) => {
    expect(isUnavailableError(err)).toBe(true);
  });

  it.each([
    ['a wrong command', new Error("ERR wrong number of arguments for 'set' command")],
    ['a script error', new Error('ERR Error running script')],
    ['a cross-slot command (a bug, not an outage)', new Error("CROSSSLOT Keys in request don't hash to the same slot")],
    ['not an error', 'Connection is closed'],
  ])('is false for %s', (_, err) => {
    expect(isUnavailableError(err)).toBe(false);
  });
});
