import { describe, expect, it } from 'vitest';
import { flushMicrotasks } from './clock.ts';
import { TypedEmitter } from './events.ts';

interface Events {
  'worker:state': [from: string, to: string];
  'batch:flushed': [rows: number];
}

function emitterWithErrors() {
  const errors: Array<[unknown, keyof Events]> = [];
  const events = new TypedEmitter<Events>({ onListenerError: (err, event) => void errors.push([err, event]) });
  return { events, errors };
}

describe('TypedEmitter', () => {
  it('calls listeners of the event, in order, with its arguments', () => {
    const events = new TypedEmitter<Events>();
    const seen: string[] = [];
    events.on('worker:state', (from, to) => void seen.push(`a ${from}->${to}`));
    events.on('worker:state', (from, to) => void seen.push(`b ${from}->${to}`));
    events.on('batch:flushed', (rows) => void seen.push(`rows ${rows}`));
    events.emit('worker:state', 'standby', 'active');
    expect(seen).toEqual(['a standby->active', 'b standby->active']);
    events.emit('batch:flushed', 8);
    expect(seen.at(-1)).toBe('rows 8');
  });

  it('unsubscribes through off() and through the function on() returns', () => {
    const events = new TypedEmitter<Events>();
    const seen: number[] = [];
    const first = (rows: number) => void seen.push(rows);
    const off = events.on('batch:flushed', (rows) => void seen.push(-rows));
    events.on('batch:flushed', first);
    expect(events.listenerCount('batch:flushed')).toBe(2);
    events.off('batch:flushed', first);
    off();
    off(); // twice is harmless
    events.emit('batch:flushed', 3);
    expect(seen).toEqual([]);
    expect(events.listenerCount('batch:flushed')).toBe(0);
  });

  it('reports a throwing listener and still calls the rest', () => {
    const { events, errors } = emitterWithErrors();
    const boom = new Error('listener bug');
    const seen: number[] = [];
    events.on('batch:flushed', () => {
      throw boom;
    });
    events.on('batch:flushed', (rows) => void seen.push(rows));
    expect(() => events.emit('batch:flushed', 4)).not.toThrow();
    expect(seen).toEqual([4]);
    expect(errors).toEqual([[boom, 'batch:flushed']]);
  });

  it('reports an async listener that rejects', async () => {
    const { events, errors } = emitterWithErrors();
    const boom = new Error('async bug');
    events.on('worker:state', async () => {
      throw boom;
    });
    events.emit('worker:state', 'warming', 'standby');
    await flushMicrotasks();
    expect(errors).toEqual([[boom, 'worker:state']]);
  });

  it('survives an error reporter that throws, and having no reporter', () => {
    const events = new TypedEmitter<Events>({
      onListenerError: () => {
        throw new Error('reporter bug');
      },
    });
    events.on('batch:flushed', () => {
      throw new Error('listener bug');
    });
    expect(() => events.emit('batch:flushed', 1)).not.toThrow();
    const silent = new TypedEmitter<Events>();
    silent.on('batch:flushed', () => {
      throw new Error('listener bug');
    });
    expect(() => silent.emit('batch:flushed', 1)).not.toThrow();
  });

  it('does not call listeners added during an emit in that same round', () => {
    const events = new TypedEmitter<Events>();
    const seen: string[] = [];
    events.on('batch:flushed', () => {
      seen.push('outer');
      events.on('batch:flushed', () => void seen.push('inner'));
    });
    events.emit('batch:flushed', 1);
    expect(seen).toEqual(['outer']);
    events.emit('batch:flushed', 1);
    expect(seen).toEqual(['outer', 'outer', 'inner']);
  });
});
