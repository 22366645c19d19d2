import { createRequire } from 'node:module';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import {
  buildFixedBatchModel,
  buildFixedShapeModel,
  buildOptionalInputModel,
  buildVadLikeModel,
  buildZipMapClassifierModel,
} from '../../scripts/fixtures/exported-models.ts';
import {
  buildDynamicImageModel,
  buildExternalDataModel,
  buildFp16Model,
  buildGatherModel,
  buildMlpModel,
  buildMultiTypeModel,
} from '../../scripts/fixtures/onnx-models.ts';
import { modelShape } from '../contracts/batch-axes.ts';
import type { TensorSpec } from '../contracts/manifest.ts';
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
    // No input batched: each request runs whole, so its outputs are served whole too, even one
    // with a dynamic first dimension (a detector's boxes).
    const noRows = rawModel([{ name: 'pixels', dims: [8, 3] }], [{ name: 'boxes', dims: ['b', 10] }]);
    expect(readOnnxMetadata(noRows)).toMatchObject({
      fixedBatch: 1,
      inputs: [{ name: 'pixels', shape: [-1, 8, 3], batchAxis: 'none' }],
      outputs: [{ name: 'boxes', shape: [-1, -1, 10], batchAxis: 'none' }],
    });
    // Saying such an output has a batch axis is refused rather than overridden.
    expect(refusal(noRows, { batchAxes: { boxes: 0 } })).toMatchObject({
      code: 'invalid_batch_axis',
      message:
        '--batch-axis boxes:0: no input has a batch axis, so each request runs whole and output "boxes" has none either; say --batch-axis boxes:none, or give the inputs\' axes',
    });
  });

  it('serves a scalar with nothing batched beside it whole, one request a pass', () => {
    expect(readOnnxMetadata(rawModel([{ name: 's', dims: [] }], [{ name: 'y', dims: ['b'] }]))).toEqual({
      fixedBatch: 1,
      inputs: [{ name: 's', datatype: 'FP32', shape: [-1], batchAxis: 'none' }],
      outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, -1], batchAxis: 'none' }],
      opset: 9,
    });
  });

  it('refuses shapeless tensors, non-tensors, unsupported types and input-less models', () => {
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
    expect(readOnnxMetadata(buildVadLikeModel())).toEqual({
      inputs: [
        { name: 'input', datatype: 'FP32', shape: [-1, 4] },
        { name: 'state', datatype: 'FP32', shape: [-1, 2, 3], batchAxis: 1 },
        { name: 'sr', datatype: 'INT64', shape: [-1], batchAxis: 'none' },
      ],
      outputs: [
        { name: 'output', datatype: 'FP32', shape: [-1, 1] },
        { name: 'stateN', datatype: 'FP32', shape: [-1, 2, 3], batchAxis: 1 },
      ],
      opset: 17,
      producer: 'warmpool-make-model 1',
    });
    expect(readOnnxMetadata(buildFixedShapeModel())).toEqual({
      fixedBatch: 1,
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 2, 3], batchAxis: 'none' }],
      outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 3], batchAxis: 'none' }],
      opset: 17,
      producer: 'warmpool-make-model 1',
    });
    // The row layout is the model's own shape with the rows moved: back again, it is what ONNX Runtime takes.
    const [input, state, sr] = readOnnxMetadata(buildVadLikeModel()).inputs as [TensorSpec, TensorSpec, TensorSpec];
    expect([input, state, sr].map((t) => modelShape(t.shape, t.batchAxis))).toEqual([[-1, 4], [2, -1, 3], []]);
  });

  it('the fixtures compute in ONNX Runtime what their doc comments say, each row on its own', async () => {
    const vad = await ort.InferenceSession.create(Buffer.from(buildVadLikeModel()));
    try {
      // Two rows: input [2, 4], state [2, 2, 3] (rows on axis 1), sr a scalar.
      const input = Float32Array.from([1, 2, 3, 4, 0.5, 0.5, 0.5, 0.5]);
      const state = Float32Array.from({ length: 12 }, (_, i) => i);
      const run = async (rate: bigint) =>
        vad.run({
          input: new ort.Tensor('float32', input, [2, 4]),
          state: new ort.Tensor('float32', state, [2, 2, 3]),
          sr: new ort.Tensor('int64', BigInt64Array.from([rate]), []),
        });
      const out = await run(16_000n);
      expect(out.output?.dims).toEqual([2, 1]);
      expect(Array.from(out.output?.data as Float32Array)).toEqual([10 * 16_000, 2 * 16_000]);
      expect(out.stateN?.dims).toEqual([2, 2, 3]);
      // stateN[l, r, :] = state[l, r, :] + the row's sum (10 for row 0, 2 for row 1).
      expect(Array.from(out.stateN?.data as Float32Array)).toEqual([10, 11, 12, 5, 6, 7, 16, 17, 18, 11, 12, 13]);
      // Another sr gives visibly other outputs.
      expect(Array.from((await run(8_000n)).output?.data as Float32Array)).toEqual([10 * 8_000, 2 * 8_000]);
    } finally {
      await vad.release();
    }
    const sums = await ort.InferenceSession.create(Buffer.from(buildFixedShapeModel()));
    try {
      const out = await sums.run({ x: new ort.Tensor('float32', Float32Array.from([1, 2, 3, 10, 20, 30]), [2, 3]) });
      expect(out.y?.dims).toEqual([3]);
      expect(Array.from(out.y?.data as Float32Array)).toEqual([11, 22, 33]);
    } finally {
      await sums.release();
    }
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
      'input "state" (shape [2, m, 3]): it has dynamic dimensions but none named "n", the inputs\' batch dimension; say where its rows are with --batch-axis state:AXIS (or state:none if it has no batch axis), or serve the model whole with --no-batching',
    );
    expect(readOnnxMetadata(unnamed, { batchAxes: { state: 1 } }).inputs[1]).toEqual({
      name: 'state',
      datatype: 'FP32',
      shape: [-1, 2, 3],
      batchAxis: 1,
    });
    // Said as the names say it: the same plan. Said for an output: taken too.
    expect(readOnnxMetadata(vad(), { batchAxes: { state: 1, sr: 'none' } })).toEqual(readOnnxMetadata(vad()));
    expect(readOnnxMetadata(vad(), { batchAxes: { stateN: 1 } })).toEqual(readOnnxMetadata(vad()));
    // `sr:none` for a tensor whose dynamic dimension is not the batch (beside a state on axis 1,
    // so not every first dimension is dynamic: that model would be read as before the plan).
    const rated = rawModel(
      [
        { name: 'input', dims: ['batch', 4] },
        { name: 'state', dims: [2, 'batch', 3] },
        { name: 'sr', elem: 7, dims: ['k'] },
      ],
      [{ name: 'output', dims: ['batch', 1] }],
    );
    // Its first dimension's name disagrees with the others', so no batch symbol is read.
    expect(refusal(rated).message).toMatch(
      /^input "state" \(shape \[2, batch, 3\]\): its batch axis cannot be told from its dimension names/,
    );
    expect(readOnnxMetadata(rated, { batchAxes: { sr: 'none' } }).inputs).toEqual([
      { name: 'input', datatype: 'FP32', shape: [-1, 4] },
      { name: 'state', datatype: 'FP32', shape: [-1, 2, 3], batchAxis: 1 },
      { name: 'sr', datatype: 'INT64', shape: [-1, -1], batchAxis: 'none' },
    ]);
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
    expect(refusal(vad(), { batchAxes: { state: 1 }, noBatching: true })).toMatchObject({
      code: 'invalid_batch_axis',
      message: expect.stringMatching(/not both/),
    });
  });

  it('refuses tensors whose batch axis the names cannot tell, and an output shared by the rows, naming each', () => {
    expect(refusal(vad(), { batchAxes: { nope: 1 } }).message).toBe(
      '--batch-axis names "nope", which is neither an input nor an output of the model; its tensors are "input", "state", "sr", "output", "stateN"',
    );
    const twice = refusal(
      rawModel(
        [
          { name: 'x', dims: ['batch', 4] },
          { name: 'pairs', dims: ['batch', 'batch'] },
          { name: 'sr', elem: 7, dims: [] },
        ],
        [{ name: 'y', dims: ['batch'] }],
      ),
    );
    expect(twice).toMatchObject({ code: 'invalid_model' });
    expect(twice.message).toBe(
      'input "pairs" (shape [batch, batch]): the batch dimension "batch" is on 2 of its axes; say where its rows are with --batch-axis pairs:AXIS (or pairs:none if it has no batch axis), or serve the model whole with --no-batching',
    );
    const shared = refusal(vad(), { batchAxes: { stateN: 'none' } });
    expect(shared).toMatchObject({ code: 'invalid_model' });
    expect(shared.message).toMatch(
      /^output "stateN" \(shape \[2, batch, 128\]\) has no batch axis while the inputs have one.*--no-batching$/,
    );
    // The batch symbol read from names shared by several inputs when no first dimension is symbolic.
    const inner = readOnnxMetadata(
      rawModel(
        [
          { name: 'a', dims: [2, 'n'] },
          { name: 'b', dims: [3, 'n', 4] },
        ],
        [{ name: 'y', dims: [2, 'n'] }],
      ),
    );
    expect([...inner.inputs, ...inner.outputs].map((t) => [t.name, t.shape, t.batchAxis])).toEqual([
      ['a', [-1, 2], 1],
      ['b', [-1, 3, 4], 1],
      ['y', [-1, 2], 1],
    ]);
  });

  it('leaves the models of before the plan as they were: no batchAxis anywhere', () => {
    const before: Array<[Uint8Array, ReadOptions?]> = [
      [rawModel([{ name: 'x', dims: ['b', 3] }], [{ name: 'y', dims: ['b', 2] }])],
      [buildMlpModel()],
      [buildMultiTypeModel()],
      [buildFp16Model()],
      [buildGatherModel()],
      [buildDynamicImageModel()],
      [buildOptionalInputModel()],
      [buildZipMapClassifierModel(), { outputs: ['label', 'probabilities'] }],
    ];
    for (const [bytes, options] of before) {
      const meta = readOnnxMetadata(bytes, options);
      expect(meta.fixedBatch).toBeUndefined();
      for (const spec of [...meta.inputs, ...meta.outputs]) expect('batchAxis' in spec).toBe(false);
    }
    const fixed = readOnnxMetadata(buildFixedBatchModel());
    expect(fixed).toEqual({
      fixedBatch: 1,
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4, 3] }],
      outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4, 2] }],
      opset: 17,
      producer: 'warmpool-make-model 1',
    });
    for (const spec of [...fixed.inputs, ...fixed.outputs]) expect('batchAxis' in spec).toBe(false);
  });
});
