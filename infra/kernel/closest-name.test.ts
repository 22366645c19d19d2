import { describe, expect, it } from 'vitest';
import { closestName, editDistance } from './closest-name.ts';

describe('editDistance', () => {
  it.each([
    ['', '', 0],
    ['abc', '', 3],
    ['', 'abc', 3],
    ['kitten', 'sitting', 3],
    ['priorty', 'priority', 1],
    ['cache', 'cahce', 2],
    ['same', 'same', 0],
  ])('%s → %s is %i', (a, b, d) => {
    expect(editDistance(a, b)).toBe(d);
    expect(editDistance(b, a)).toBe(d);
  });
});

describe('closestName', () => {
  // A command's flags and a registry's models, as the CLI asks about them.
  const flags = ['version', 'split', 'min', 'max', 'standby', 'backlog-max', 'policy', 'help', 'debug'];
  const models = ['demo-scorer', 'resnet50', 'ocr-crnn'];

  it.each([
    ['stanby', flags, 'standby'],
    ['backlog', flags, 'backlog-max'],
    ['backlog_max', flags, 'backlog-max'],
    ['verison', flags, 'version'],
    ['demo-scorr', models, 'demo-scorer'],
    ['resnet', models, 'resnet50'],
    ['OCR-CRNN', models, 'ocr-crnn'],
  ])('%s means %s', (name, known, meant) => {
    expect(closestName(name, known)).toBe(meant);
  });

  it.each([
    ['replicas', flags],
    ['bert', models],
    ['', models],
    ['__', flags],
  ])('%j means nothing in %j', (name, known) => {
    expect(closestName(name, known)).toBeUndefined();
  });
});
