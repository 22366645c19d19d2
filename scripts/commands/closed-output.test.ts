import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { endQuietlyWhenClosed, isClosedPipe } from './closed-output.ts';

function errno(code: string, message = `write ${code}`): Error {
  return Object.assign(new Error(message), { code });
}

function guarded(name: 'stdout' | 'stderr') {
  const stream = new EventEmitter();
  const said: string[] = [];
  const exits: number[] = [];
  endQuietlyWhenClosed(stream, name, { err: (t) => said.push(t), exit: (c) => exits.push(c) });
  return { stream, said, exits };
}

describe('endQuietlyWhenClosed', () => {
  it('exits 0 without a word when the reader of the pipe went away', () => {
    const { stream, said, exits } = guarded('stdout');
    stream.emit('error', errno('EPIPE'));
    expect(exits).toEqual([0]);
    expect(said).toEqual([]);
  });

  it('ends once, however many queued writes fail after the first', () => {
    const { stream, exits } = guarded('stdout');
    stream.emit('error', errno('EPIPE'));
    stream.emit('error', errno('EPIPE'));
    expect(exits).toEqual([0]);
  });

  it('names any other failure to write stdout in one line and exits 1', () => {
    const { stream, said, exits } = guarded('stdout');
    stream.emit('error', errno('ENOSPC', 'no space left on device'));
    expect(said).toEqual(['warmpool: cannot write to stdout: no space left on device\n']);
    expect(exits).toEqual([1]);
  });

  it('exits 1 without writing when stderr itself fails', () => {
    const { stream, said, exits } = guarded('stderr');
    stream.emit('error', errno('EIO'));
    expect(said).toEqual([]);
    expect(exits).toEqual([1]);
  });
});

describe('isClosedPipe', () => {
  it('is EPIPE only', () => {
    expect(isClosedPipe(errno('EPIPE'))).toBe(true);
    expect(isClosedPipe(errno('ECONNRESET'))).toBe(false);
    expect(isClosedPipe('EPIPE')).toBe(false);
  });
});
