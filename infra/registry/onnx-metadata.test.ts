import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { buildFixedBatchModel, buildFixedShapeModel, buildVadLikeModel } from '../../scripts/fixtures/exported-models.ts';
import {
  buildExternalDataModel,
  buildFp16Model,
  buildGatherModel,
  buildMlpModel,
  buildMultiTypeModel,
} from '../../scripts/fixtures/onnx-models.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { findExternalData, type ReadOptions, readOnnxMetadata } from './onnx-metadata.ts';

const require = createRequire(import.meta.url);
const { onnx } = require('onnx-proto') as typeof import('onnx-proto');

type DimSpec = number | string | null;
interface RawIo {
  name: string;
  elem?: number;
  dims?: DimSpec[];
  /** A sequence-of-tensor type instead of a tensor type. */
  sequence?: boolean;
}

/** A minimal graph (Identity from the first input to the first output) with free-form I/O types. */
function rawModel(inputs: RawIo[], outputs: RawIo[], initializers: string[] = []): Uint8Array {
  const valueInfo = (io: RawIo) => {
    const dim = (io.dims ?? []).map((d) => (d === null ? {} : typeof d === 'string' ? { dimParam: d } : { dimValue: d }));
    const tensorType = { elemType: io.elem ?? 1, ...(io.dims ? { shape: { dim } } : {}) };
    return onnx.ValueInfoProto.create({
      name: io.name,
      type: io.sequence ? { sequenceType: { elemType: { tensorType } } } : { tensorType },
    });
  };
  const graph = onnx.GraphProto.create({
    name: 'raw',
    input: inputs.map(valueInfo),
    output: outputs.map(valueInfo),
    initializer: initializers.map((name) => onnx.TensorProto.create({ name, dims: [1], dataType: 1, floatData: [1] })),
    node: [onnx.NodeProto.create({ opType: 'Identity', input: [inputs[0]?.name ?? 'x'], output: [outputs[0]?.name ?? 'y'] })],
  });
  const model = onnx.ModelProto.create({ irVersion: 3, opsetImport: [{ domain: '', version: 9 }], graph });
  return onnx.ModelProto.encode(model).finish();
}

function refusal(bytes: Uint8Array, options?: ReadOptions): InvalidInputError {
  try {
    readOnnxMetadata(bytes, options);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidInputError);
    return err as InvalidInputError;
  }
  throw new Error('expected readOnnxMetadata to throw');
}

describe('readOnnxMetadata', () => {
  it('reads the MLP: one FP32 input and output, batch axis dynamic, opset and producer', () => {
    const meta = readOnnxMetadata(buildMlpModel({ features: 12 }));
    expect(meta.inputs).toEqual([{ name: 'features', datatype: 'FP32', shape: [-1, 12] }]);
    expect(meta.outputs).toEqual([{ name: 'score', datatype: 'FP32', shape: [-1, 1] }]);
    expect(meta.opset).toBe(17);
    expect(meta.producer).toBe('warmpool-make-model 1');
  });

  it('reads several inputs of several ranks and dtypes, excluding weights', () => {
    const meta = readOnnxMetadata(buildMultiTypeModel());
    expect(meta.inputs).toEqual([
      { name: 'x', datatype: 'FP32', shape: [-1, 2, 2] },
      { name: 'ids', datatype: 'INT64', shape: [-1, 3] },
      { name: 'mask', datatype: 'BOOL', shape: [-1, 3] },
      { name: 'n', datatype: 'INT32', shape: [-1, 1] },
    ]);
    expect(meta.outputs).toEqual([
      { name: 'y', datatype: 'FP32', shape: [-1, 2, 3] },
      { name: 'ids_next', datatype: 'INT64', shape: [-1, 3] },
      { name: 'mask_not', datatype: 'BOOL', shape: [-1, 3] },
      { name: 'n_double', datatype: 'INT32', shape: [-1, 1] },
    ]);
  });

  it('reads FP16 and the gather model', () => {
    expect(readOnnxMetadata(buildFp16Model())).toMatchObject({
      inputs: [{ name: 'h', datatype: 'FP16', shape: [-1, 4] }],
      outputs: [{ name: 'h_sum', datatype: 'FP16', shape: [-1, 4] }],
    });
    expect(readOnnxMetadata(buildGatherModel())).toMatchObject({
      inputs: [{ name: 'idx', datatype: 'INT64', shape: [-1, 1] }],
      outputs: [{ name: 'row', datatype: 'FP32', shape: [-1, 1, 4] }],
    });
  });

  it('maps every servable element type and marks symbolic and unknown dims -1', () => {
    const types: Array<[number, string]> = [
      [11, 'FP64'],
      [2, 'UINT8'],
      [4, 'UINT16'],
      [12, 'UINT32'],
      [13, 'UINT64'],
      [3, 'INT8'],
      [5, 'INT16'],
      [8, 'BYTES'],
    ];
    const inputs = types.map(([elem], i) => ({ name: `in${i}`, elem, dims: ['batch', null, 5] as DimSpec[] }));
    const meta = readOnnxMetadata(rawModel(inputs, [{ name: 'y', dims: [null] }]));
    expect(meta.inputs.map((t) => t.datatype)).toEqual(types.map(([, d]) => d));
    expect(meta.inputs[0]?.shape).toEqual([-1, -1, 5]);
    expect(meta.outputs).toEqual([{ name: 'y', datatype: 'FP32', shape: [-1] }]);
  });

  it('leaves out initializers listed among the graph inputs (IR < 4 exporters)', () => {
    const bytes = rawModel(
      [
        { name: 'x', dims: ['b', 2] },
        { name: 'w', dims: [1] },
      ],
      [{ name: 'y', dims: ['b', 2] }],
      ['w'],
    );
    expect(readOnnxMetadata(bytes).inputs.map((t) => t.name)).toEqual(['x']);
  });

  it('refuses bytes that are not an ONNX model', () => {
    for (const bytes of [new TextEncoder().encode('definitely not a protobuf'), new Uint8Array([0xff, 0xff, 0xff]), new Uint8Array(0)]) {
      expect(refusal(bytes).message).toMatch(/not an ONNX model/);
    }
  });

  it('reads an export with a fixed batch of 1 as one row a pass, its first axis the batch axis', () => {
    const meta = readOnnxMetadata(
      rawModel(
        [
          { name: 'pixels', dims: [1, 3, 224, 224] },
          { name: 'mask', dims: [1, 7] },
        ],
        [
          { name: 'logits', dims: [1, 10] },
          { name: 'score', dims: ['b'] },
        ],
      ),
    );
    expect(meta.fixedBatch).toBe(1);
    expect(meta.inputs.map((t) => t.shape)).toEqual([
      [-1, 3, 224, 224],
      [-1, 7],
    ]);
    expect(meta.outputs.map((t) => t.shape)).toEqual([[-1, 10], [-1]]);
    expect(readOnnxMetadata(rawModel([{ name: 'x', dims: ['b', 3] }], [{ name: 'y', dims: ['b', 3] }])).fixedBatch).toBeUndefined();
  });

  it('serves fixed axes it can, and refuses those whose rows it could not tell apart, naming the tensor', () => {
    // A fixed batch of 8 throughout: no batch axis at all, each request whole.
    const eight = readOnnxMetadata(rawModel([{ name: 'pixels', dims: [8, 3] }], [{ name: 'logits', dims: [8, 10] }]));
    expect(eight).toMatchObject({
      fixedBatch: 1,
      inputs: [{ shape: [-1, 8, 3], batchAxis: 'none' }],
      outputs: [{ shape: [-1, 8, 10], batchAxis: 'none' }],
    });
    // A fixed input beside a batched one: one value a pass.
    const mixed = readOnnxMetadata(
      rawModel(
        [
          { name: 'audio', dims: ['b', 512] },
          { name: 'state', dims: [1, 128] },
        ],
        [{ name: 'y', dims: ['b'] }],
      ),
    );
    expect(mixed.inputs.map((i) => [i.name, i.shape, i.batchAxis])).toEqual([
      ['audio', [-1, 512], undefined],
      ['state', [-1, 1, 128], 'none'],
    ]);
    expect(mixed.fixedBatch).toBeUndefined();
    const out = refusal(rawModel([{ name: 'x', dims: ['b', 3] }], [{ name: 'logits', dims: [8, 10] }]));
    expect(out.message).toMatch(/output "logits" \(shape \[8, 10\]\) has no batch axis while the inputs have one.*--no-batching/);
    const noRows = refusal(rawModel([{ name: 'pixels', dims: [8, 3] }], [{ name: 'logits', dims: ['b', 10] }]));
    expect(noRows).toMatchObject({ code: 'invalid_batch_axis' });
    expect(noRows.message).toMatch(/output "logits" has a batch axis but no input has one/);
  });

  it('refuses a scalar with nothing batched beside it, shapeless tensors, non-tensors, unsupported types and input-less models', () => {
    expect(refusal(rawModel([{ name: 's', dims: [] }], [{ name: 'y', dims: ['b'] }])).message).toMatch(
      /output "y" has a batch axis but no input has one/,
    );
    expect(refusal(rawModel([{ name: 'u' }], [{ name: 'y', dims: ['b'] }])).message).toMatch(/"u" has no shape/);
    expect(refusal(rawModel([{ name: 'seq', sequence: true, dims: ['b'] }], [{ name: 'y', dims: ['b'] }])).message).toMatch(
      /input "seq" is not a tensor \(sequenceType\)/,
    );
    expect(refusal(rawModel([{ name: 'bf', elem: 16, dims: ['b'] }], [{ name: 'y', dims: ['b'] }])).message).toMatch(
      /input "bf" has type BFLOAT16/,
    );
    expect(refusal(rawModel([{ name: 'w', dims: [1] }], [{ name: 'y', dims: ['b'] }], ['w'])).message).toMatch(/no inputs/);
  });
});

describe('outputs that are not tensors (issue 30)', () => {
  const classifier = () =>
    rawModel(
      [{ name: 'x', dims: ['b', 3] }],
      [
        { name: 'label', elem: 7, dims: ['b'] },
        { name: 'probs', sequence: true, dims: ['b', 2] },
        { name: 'scores', dims: ['b', 2] },
      ],
    );

  it('refuses a non-tensor output at publish, naming it and the --outputs that serves the tensor ones', () => {
    const err = refusal(classifier());
    expect(err.code).toBe('invalid_model');
    expect(err.message).toBe(
      'output "probs" is a sequence (sequenceType), which ONNX Runtime for Node cannot return; serve only the tensor outputs: --outputs label,scores',
    );
  });

  it('serves the outputs named, in their order, and leaves the rest out', () => {
    expect(readOnnxMetadata(classifier(), { outputs: ['scores', 'label'] }).outputs).toEqual([
      { name: 'scores', datatype: 'FP32', shape: [-1, 2] },
      { name: 'label', datatype: 'INT64', shape: [-1] },
    ]);
  });

  it('refuses an output named that the model lacks, one named twice, none, or a non-tensor one', () => {
    const named = (outputs: string[]) => {
      try {
        readOnnxMetadata(classifier(), { outputs });
      } catch (err) {
        return err as InvalidInputError;
      }
      throw new Error('not refused');
    };
    expect(named(['lable'])).toMatchObject({
      code: 'invalid_outputs',
      message: 'the model has no output "lable"; its outputs are "label", "probs", "scores"',
    });
    expect(named(['label', 'label']).message).toMatch(/"label" is named twice/);
    expect(named([]).message).toMatch(/at least one output/);
    expect(named(['probs']).message).toMatch(/output "probs" is not a tensor \(sequenceType\)/);
  });
});

describe('external data (issue 20)', () => {
  it.each(['initializer', 'constant'] as const)(
    'refuses a model whose %s keeps its weights in another file, naming the tensor and file',
    (where) => {
      const bytes = buildExternalDataModel({ location: '0123abcd.onnx', where });
      const err = refusal(bytes);
      expect(err.code).toBe('external_data');
      expect(err.status).toBe(400);
      expect(err.message).toMatch(
        /^tensor "W" keeps its data in the external file "0123abcd\.onnx"; warmpool serves only self-contained models/,
      );
      expect(findExternalData(bytes)).toEqual([{ name: 'W', location: '0123abcd.onnx' }]);
    },
  );

  it('finds external data hidden in a subgraph, a sparse initializer or external_data entries without data_location', () => {
    const external = (name: string, location = 'w.bin') =>
      onnx.TensorProto.create({ name, dims: [1], dataType: 1, externalData: [{ key: 'location', value: location }] });
    const model = onnx.ModelProto.decode(buildMlpModel({ features: 4, hidden: 4, layers: 1 }));
    const branch = onnx.GraphProto.create({ name: 'then', initializer: [external('in_branch', '../etc/passwd')] });
    model.graph?.node?.push(
      onnx.NodeProto.create({ opType: 'If', attribute: [onnx.AttributeProto.create({ name: 'then_branch', type: 5, g: branch })] }),
    );
    model.graph?.sparseInitializer?.push(onnx.SparseTensorProto.create({ values: external('sparse_values'), dims: [4] }));
    const found = findExternalData(onnx.ModelProto.encode(model).finish());
    expect(found).toEqual([
      { name: 'sparse_values', location: 'w.bin' },
      { name: 'in_branch', location: '../etc/passwd' },
    ]);
  });

  it('finds none in self-contained models', () => {
    for (const bytes of [buildMlpModel(), buildMultiTypeModel(), buildGatherModel()]) expect(findExternalData(bytes)).toEqual([]);
  });
});

describe('the batching plan (issue 30)', () => {
  const vad = () =>
    rawModel(
      [
        { name: 'input', dims: ['batch', 512] },
        { name: 'state', dims: [2, 'batch', 128] },
        { name: 'sr', elem: 7, dims: [] },
      ],
      [
        { name: 'output', dims: ['batch', 1] },
        { name: 'stateN', dims: [2, 'batch', 128] },
      ],
    );

  it("reads each tensor's batch axis from the dimension names", () => {
    const meta = readOnnxMetadata(vad());
    expect(meta.inputs).toEqual([
      { name: 'input', datatype: 'FP32', shape: [-1, 512] },
      { name: 'state', datatype: 'FP32', shape: [-1, 2, 128], batchAxis: 1 },
      { name: 'sr', datatype: 'INT64', shape: [-1], batchAxis: 'none' },
    ]);
    expect(meta.outputs).toEqual([
      { name: 'output', datatype: 'FP32', shape: [-1, 1] },
      { name: 'stateN', datatype: 'FP32', shape: [-1, 2, 128], batchAxis: 1 },
    ]);
    expect(meta.fixedBatch).toBeUndefined();
  });

  it('reads the fixtures the serving tests publish', () => {
    expect(readOnnxMetadata(buildVadLikeModel()).inputs.map((i) => [i.name, i.shape, i.batchAxis])).toEqual([
      ['input', [-1, 4], undefined],
      ['state', [-1, 2, 3], 1],
      ['sr', [-1], 'none'],
    ]);
    expect(readOnnxMetadata(buildFixedShapeModel())).toMatchObject({
      fixedBatch: 1,
      inputs: [{ name: 'x', shape: [-1, 2, 3], batchAxis: 'none' }],
      outputs: [{ name: 'y', shape: [-1, 3], batchAxis: 'none' }],
    });
  });

  it('takes the axes said at publish over the names, and --no-batching for everything', () => {
    const unnamed = rawModel(
      [
        { name: 'input', dims: ['n', 4] },
        { name: 'state', dims: [2, 'm', 3] },
      ],
      [{ name: 'y', dims: ['n', 1] }],
    );
    expect(refusal(unnamed).message).toBe(
      'input "state" (shape [2, m, 3]): it has dynamic dimensions but none named "n", the inputs\' batch dimension; say where its rows are with --batch-axis state:AXIS (an axis number, or none), or serve the model whole with --no-batching',
    );
    expect(readOnnxMetadata(unnamed, { batchAxes: { state: 1 } }).inputs[1]).toEqual({
      name: 'state',
      datatype: 'FP32',
      shape: [-1, 2, 3],
      batchAxis: 1,
    });
    const whole = readOnnxMetadata(vad(), { noBatching: true });
    expect(whole.fixedBatch).toBe(1);
    expect(whole.inputs.map((i) => [i.shape, i.batchAxis])).toEqual([
      [[-1, -1, 512], 'none'],
      [[-1, 2, -1, 128], 'none'],
      [[-1], 'none'],
    ]);
  });

  it('refuses an axis it cannot use, naming the tensor', () => {
    expect(refusal(vad(), { batchAxes: { nope: 1 } })).toMatchObject({
      code: 'invalid_batch_axis',
      message: expect.stringMatching(/"nope", which is neither an input nor an output/),
    });
    expect(refusal(vad(), { batchAxes: { state: 0 } }).message).toMatch(/axis 0 of input "state" is fixed at 2/);
    expect(refusal(vad(), { batchAxes: { state: 3 } }).message).toMatch(/input "state" has shape \[2, batch, 128\]; give 0 to 2, or none/);
    expect(refusal(vad(), { batchAxes: { sr: 0 } }).message).toMatch(/it is a scalar: give none/);
    expect(refusal(vad(), { batchAxes: { state: 1 }, noBatching: true }).message).toMatch(/not both/);
  });

  it('leaves the models of before the plan as they were: no batchAxis anywhere', () => {
    for (const bytes of [rawModel([{ name: 'x', dims: ['b', 3] }], [{ name: 'y', dims: ['b', 2] }]), buildFixedBatchModel()]) {
      const meta = readOnnxMetadata(bytes);
      for (const spec of [...meta.inputs, ...meta.outputs]) expect('batchAxis' in spec).toBe(false);
    }
  });
});
