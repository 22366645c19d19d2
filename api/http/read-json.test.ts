import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestingDepth } from './read-json.ts';

describe('nestingDepth', () => {
  it('counts the deepest nesting of arrays and objects', () => {
    expect(nestingDepth('1')).toBe(0);
    expect(nestingDepth('{"a":[1,[2]],"b":{}}')).toBe(3);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    expect(nestingDepth('{"a":"[[[{{{","b":"\\"[[["}')).toBe(1);
  });

  it('stops counting just past the bound, however deep the text goes', () => {
    const deep = `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`;
    expect(nestingDepth(deep)).toBe(MAX_JSON_DEPTH + 1);
  });
});
