import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestingDepth } from './json-text.ts';

describe('nestingDepth', () => {
  it('counts the deepest nesting of arrays and objects', () => {
    expect(nestingDepth(JSON.parse('1'))).toBe(0);
    expect(nestingDepth(JSON.parse('{"a":[1,[2]],"b":{}}'))).toBe(3);
    expect(nestingDepth(JSON.parse('[{}, [[]], {"x": {"y": [0]}}]'))).toBe(4);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    expect(nestingDepth(JSON.parse('{"a":"[[[{{{","b":"\\"[[["}'))).toBe(1);
  });

  it('stops counting just past the bound, however deep the text goes', () => {
    const deep = `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`;
    expect(nestingDepth(JSON.parse(deep))).toBe(MAX_JSON_DEPTH + 1);
  });
});
