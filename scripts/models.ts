/**
 * Builders for real ONNX models, written with onnx-proto: the demo scoring model `npm start`
 * publishes, and the small models the tests and the bench run through ONNX Runtime. Weights
 * come from a seeded generator so every build of a model is byte-identical.
 */
import { createRequire } from 'node:module';
import { seededRandom } from '../infra/seeded-random.ts';

const require = createRequire(import.meta.url);
// onnx-proto's generated create() types want Long and enum instances where the wire format
// takes plain numbers; the builder writes literals, so it goes through an untyped handle.
// biome-ignore lint/suspicious/noExplicitAny: see above; readOnnxMetadata uses the typed API.
const { onnx } = require('onnx-proto') as { onnx: any };

const T = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7, BOOL: 9, FLOAT16: 10, DOUBLE: 11 } as const;
type ElemType = (typeof T)[keyof typeof T];

interface IoSpec {
  name: string;
  elem: ElemType;
  /** Dimensions after the dynamic batch axis. */
  dims: number[];
}

interface NodeSpec {
  op: string;
  inputs: string[];
  outputs: string[];
  attrs?: Array<{ name: string; i?: number; f?: number; ints?: number[] }>;
}

interface Initializer {
  name: string;
  dims: number[];
  floats?: Float32Array | number[];
  int64s?: number[];
}

export { seededRandom };

function valueInfo(spec: IoSpec): unknown {
  const dim = [{ dimParam: 'batch' }, ...spec.dims.map((d) => ({ dimValue: d }))];
  return onnx.ValueInfoProto.create({ name: spec.name, type: { tensorType: { elemType: spec.elem, shape: { dim } } } });
}

function buildModel(name: string, inputs: IoSpec[], outputs: IoSpec[], nodes: NodeSpec[], inits: Initializer[]): Uint8Array {
  const graph = onnx.GraphProto.create({
    name,
    input: inputs.map(valueInfo),
    output: outputs.map(valueInfo),
    initializer: inits.map((i) =>
      onnx.TensorProto.create({
        name: i.name,
        dims: i.dims,
        dataType: i.int64s ? T.INT64 : T.FLOAT,
        ...(i.int64s ? { int64Data: i.int64s } : { floatData: Array.from(i.floats ?? []) }),
      }),
    ),
    node: nodes.map((n, k) =>
      onnx.NodeProto.create({
        name: `${n.op.toLowerCase()}_${k}`,
        opType: n.op,
        input: n.inputs,
        output: n.outputs,
        attribute: (n.attrs ?? []).map((a) =>
          onnx.AttributeProto.create({
            name: a.name,
            ...(a.ints ? { ints: a.ints, type: 7 } : a.f !== undefined ? { f: a.f, type: 1 } : { i: a.i, type: 2 }),
          }),
        ),
      }),
    ),
  });
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'warmpool-make-model',
    producerVersion: '1',
    opsetImport: [{ domain: '', version: 17 }],
    graph,
  });
  return onnx.ModelProto.encode(model).finish() as Uint8Array;
}

function weights(rand: () => number, n: number, scale: number): Float32Array {
  const w = new Float32Array(n);
  for (let i = 0; i < n; i++) w[i] = (rand() * 2 - 1) * scale;
  return w;
}

export interface MlpOptions {
  features?: number;
  hidden?: number;
  /** Hidden layers (Gemm + Relu each). */
  layers?: number;
  seed?: number;
}

/**
 * The demo scoring model: `features` FP32 [batch, F] → (Gemm, Relu) × layers → Gemm → Sigmoid →
 * `score` FP32 [batch, 1]. Larger `hidden`/`layers` make a slower model for kill and bench tests.
 */
export function buildMlpModel(options: MlpOptions = {}): Uint8Array {
  const { features = 64, hidden = 128, layers = 2, seed = 7 } = options;
  const rand = seededRandom(seed);
  const nodes: NodeSpec[] = [];
  const inits: Initializer[] = [];
  let current = 'features';
  let width = features;
  for (let l = 0; l < layers; l++) {
    inits.push({ name: `w${l}`, dims: [width, hidden], floats: weights(rand, width * hidden, 1 / Math.sqrt(width)) });
    inits.push({ name: `b${l}`, dims: [hidden], floats: weights(rand, hidden, 0.1) });
    nodes.push({ op: 'Gemm', inputs: [current, `w${l}`, `b${l}`], outputs: [`h${l}`] });
    nodes.push({ op: 'Relu', inputs: [`h${l}`], outputs: [`r${l}`] });
    current = `r${l}`;
    width = hidden;
  }
  inits.push({ name: 'wout', dims: [width, 1], floats: weights(rand, width, 1 / Math.sqrt(width)) });
  inits.push({ name: 'bout', dims: [1], floats: [0] });
  nodes.push({ op: 'Gemm', inputs: [current, 'wout', 'bout'], outputs: ['logit'] });
  nodes.push({ op: 'Sigmoid', inputs: ['logit'], outputs: ['score'] });
  return buildModel(
    'warmpool-mlp',
    [{ name: 'features', elem: T.FLOAT, dims: [features] }],
    [{ name: 'score', elem: T.FLOAT, dims: [1] }],
    nodes,
    inits,
  );
}

/**
 * Several inputs of several ranks and dtypes, to prove nothing assumes one float input:
 * `x` FP32 [b,2,2] → `y` = x·W (FP32 [b,2,3]); `ids` INT64 [b,3] → `ids_next` = ids + 1;
 * `mask` BOOL [b,3] → `mask_not`; `n` INT32 [b,1] → `n_double` = n × 2.
 */
export function buildMultiTypeModel(): Uint8Array {
  const rand = seededRandom(11);
  return buildModel(
    'warmpool-multitype',
    [
      { name: 'x', elem: T.FLOAT, dims: [2, 2] },
      { name: 'ids', elem: T.INT64, dims: [3] },
      { name: 'mask', elem: T.BOOL, dims: [3] },
      { name: 'n', elem: T.INT32, dims: [1] },
    ],
    [
      { name: 'y', elem: T.FLOAT, dims: [2, 3] },
      { name: 'ids_next', elem: T.INT64, dims: [3] },
      { name: 'mask_not', elem: T.BOOL, dims: [3] },
      { name: 'n_double', elem: T.INT32, dims: [1] },
    ],
    [
      { op: 'MatMul', inputs: ['x', 'W'], outputs: ['y'] },
      { op: 'Add', inputs: ['ids', 'one64'], outputs: ['ids_next'] },
      { op: 'Not', inputs: ['mask'], outputs: ['mask_not'] },
      { op: 'Cast', inputs: ['two'], outputs: ['two32'], attrs: [{ name: 'to', i: T.INT32 }] },
      { op: 'Mul', inputs: ['n', 'two32'], outputs: ['n_double'] },
    ],
    [
      { name: 'W', dims: [2, 3], floats: weights(rand, 6, 1) },
      { name: 'one64', dims: [1], int64s: [1] },
      { name: 'two', dims: [1], floats: [2] },
    ],
  );
}

/** FP16 in and out: `h` FP16 [b,4] → `h_sum` = h + h. */
export function buildFp16Model(): Uint8Array {
  return buildModel(
    'warmpool-fp16',
    [{ name: 'h', elem: T.FLOAT16, dims: [4] }],
    [{ name: 'h_sum', elem: T.FLOAT16, dims: [4] }],
    [{ op: 'Add', inputs: ['h', 'h'], outputs: ['h_sum'] }],
    [],
  );
}

/**
 * A lookup table: `idx` INT64 [b,1] → `row` FP32 [b,1,4] = table[idx]. An index outside
 * [-8, 8) makes ONNX Runtime fail the whole forward pass: the test for batch bisection.
 */
export function buildGatherModel(): Uint8Array {
  const table = Array.from({ length: 32 }, (_, i) => i);
  return buildModel(
    'warmpool-gather',
    [{ name: 'idx', elem: T.INT64, dims: [1] }],
    [{ name: 'row', elem: T.FLOAT, dims: [1, 4] }],
    [{ op: 'Gather', inputs: ['table', 'idx'], outputs: ['row'], attrs: [{ name: 'axis', i: 0 }] }],
    [{ name: 'table', dims: [8, 4], floats: table }],
  );
}
