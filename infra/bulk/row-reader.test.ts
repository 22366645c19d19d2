import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import type { ModelManifest, TensorSpec } from '../contracts/manifest.ts';
import { chunkRows } from './chunker.ts';
import { createRowSchema, formatOf, type RowEvent, readRows, splitCsv } from './row-reader.ts';

function manifest(inputs: TensorSpec[]): ModelManifest {
  return {
    name: 'm',
    version: '1',
    format: 'onnx',
    sha256: 'x',
    sizeBytes: 1,
    inputs,
    outputs: [{ name: 'score', datatype: 'FP32', shape: [-1, 1] }],
    batching: { maxBatch: 8, warmupBatches: [] },
    createdAt: '2024-01-01T00:00:00Z',
    labels: {},
  };
}

const features = manifest([{ name: 'features', datatype: 'FP32', shape: [-1, 3] }]);

async function read(text: string, format: 'jsonl' | 'csv', m = features): Promise<RowEvent[]> {
  const out: RowEvent[] = [];
  for await (const e of readRows(Readable.from([text]), { format, manifest: m, schema: createRowSchema(m.inputs) })) out.push(e);
  return out;
}

const summary = (events: RowEvent[]) => events.map((e) => (e.kind === 'row' ? `row ${e.line} ${e.id}` : `bad ${e.line}`));

describe('readRows (JSONL)', () => {
  it('reads good rows and reports each bad line with its number, without stopping', async () => {
    const text = [
      '{"id":"a","features":[1,2,3]}',
      '{"id":"b","features":[1,2]}', // wrong shape
      'not json',
      '',
      '{"features":[1,2,3]}', // no id
      '{"id":7,"features":[1,"x",3]}', // wrong type
      '{"id":8,"features":[4,5,6],"extra":true}',
      '[1,2,3]',
      '{"id":"c","features":[[1,2],[3]]}', // ragged
    ].join('\n');
    const events = await read(text, 'jsonl');
    expect(summary(events)).toEqual(['row 1 a', 'bad 2', 'bad 3', 'bad 5', 'bad 6', 'row 7 8', 'bad 8', 'bad 9']);
    const messages = events.flatMap((e) => (e.kind === 'bad' ? [e.message] : []));
    expect(messages[0]).toMatch(/axis 1 must be 3/);
    expect(messages[1]).toMatch(/not valid JSON/);
    expect(messages[2]).toMatch(/missing "id"/);
    expect(messages[3]).toMatch(/FP32/);
    const good = events[0];
    expect(good?.kind === 'row' && good.values.features).toEqual({ dims: [3], data: [1, 2, 3] });
  });

  it('pins dynamic dimensions to the first good row', async () => {
    const m = manifest([{ name: 'seq', datatype: 'INT64', shape: [-1, -1] }]);
    const events = await read('{"id":1,"seq":[1,2]}\n{"id":2,"seq":[1,2,3]}\n{"id":3,"seq":[5,6]}\n', 'jsonl', m);
    expect(summary(events)).toEqual(['row 1 1', 'bad 2', 'row 3 3']);
  });

  it('tracks byte offsets through the object', async () => {
    const lines = ['{"id":"a","features":[1,2,3]}', '{"id":"é","features":[1,2,3]}'];
    const events = await read(`${lines.join('\n')}\n`, 'jsonl');
    expect(events.map((e) => e.offset)).toEqual([lines[0]!.length + 1, Buffer.byteLength(lines.join('\n')) + 1]);
  });
});

describe('readRows (CSV)', () => {
  it('skips a header, reads flattened rows, reports wrong column counts and non-numbers', async () => {
    const text = 'id,f1,f2,f3\r\nr1,1,2,3\r\nr2,1,2\r\n"r,3",4,5,6\r\nr4,1,abc,3\r\nr5,1,,3\r\n';
    const events = await read(text, 'csv');
    expect(summary(events)).toEqual(['row 2 r1', 'bad 3', 'row 4 r,3', 'bad 5', 'bad 6']);
    expect(events[1]?.kind === 'bad' && events[1].message).toMatch(/expected 4 columns/);
    expect(events[3]?.kind === 'bad' && events[3].message).toMatch(/column 3: "abc"/);
  });

  it('refuses multi-input models', async () => {
    const m = manifest([
      { name: 'a', datatype: 'FP32', shape: [-1, 1] },
      { name: 'b', datatype: 'FP32', shape: [-1, 1] },
    ]);
    await expect(read('x,1,2\n', 'csv', m)).rejects.toThrow(/single-input/);
  });

  it('splits quoted fields', () => {
    expect(splitCsv('a,"b,c","d ""e"""')).toEqual(['a', 'b,c', 'd "e"']);
    expect(splitCsv('a,"b')).toBeUndefined();
    expect(splitCsv('a,,b')).toEqual(['a', '', 'b']);
  });
});

describe('formatOf', () => {
  it('takes the run format, else the extension', () => {
    expect(formatOf('x/a.jsonl')).toBe('jsonl');
    expect(formatOf('x/a.CSV')).toBe('csv');
    expect(formatOf('x/a.parquet')).toBeUndefined();
    expect(formatOf('x/a.parquet', 'csv')).toBe('csv');
  });
});

describe('chunkRows', () => {
  const text = Array.from({ length: 23 }, (_, i) => (i % 7 === 3 ? 'bad' : `{"id":${i},"features":[${i},0,1]}`)).join('\n');

  async function chunks(firstIndex: number) {
    const out: Array<string> = [];
    const rows = readRows(Readable.from([text]), { format: 'jsonl', manifest: features, schema: createRowSchema(features.inputs) });
    for await (const e of chunkRows(rows, 5, firstIndex)) {
      out.push(e.kind === 'chunk' ? `${e.index}:${e.rows.map((r) => r.id).join(',')}` : `bad@${e.line}`);
    }
    return out;
  }

  it('cuts fixed-size chunks numbered from firstIndex, bad lines in between, the same every time', async () => {
    const first = await chunks(10);
    expect(first).toEqual(['bad@4', '10:0,1,2,4,5', 'bad@11', '11:6,7,8,9,11', '12:12,13,14,15,16', 'bad@18', '13:18,19,20,21,22']);
    expect(await chunks(10)).toEqual(first);
  });
});
