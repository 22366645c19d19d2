/**
 * The inference thread: owns the ONNX Runtime session that thread-engine.ts drives. ORT's
 * `run` blocks the thread that calls it for the whole forward pass, so it runs here and the
 * main thread stays free for lock renewals, heartbeats and batch assembly.
 *
 * Protocol: the main thread posts ThreadRequest messages, each with an id; this thread answers
 * each with one ThreadResponse carrying the same id. Requests are handled one at a time in
 * arrival order, so a reload never swaps the session under a run. A failure is an answer
 * (ok: false, ORT's message), never an exception that would kill the thread.
 *
 * A thread may hold several sessions (a shared pool's worker holds several models: thread-engine.ts
 * `openSession`), each named by the `session` number its requests carry; a request without one
 * is session 0, the only one a single-model worker uses. `release` frees one session and leaves
 * the thread and the others serving; `ready` answers once this module (and ONNX Runtime) loaded.
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { errorMessage } from '../../infra/kernel/errors.ts';
import type { EngineDtype, EngineInfo, EngineLoadOptions, EngineTensor } from './engine.ts';
import { forTransfer } from './tensor-codec.ts';

export type OrtLogLevel = 'verbose' | 'info' | 'warning' | 'error' | 'fatal';

export interface ThreadData {
  logLevel: OrtLogLevel;
}

export type ThreadRequest =
  | { id: number; op: 'load'; session?: number; modelPath: string; options: EngineLoadOptions }
  | { id: number; op: 'run'; session?: number; inputs: Record<string, EngineTensor>; outputNames?: string[] }
  | { id: number; op: 'release'; session: number }
  | { id: number; op: 'ready' }
  | { id: number; op: 'close' };

/** What `load` reports: EngineInfo plus the providers the session actually got. */
export interface ThreadEngineInfo extends EngineInfo {
  executionProviders: string[];
}

export type ThreadResponse =
  | { id: number; ok: true; info: ThreadEngineInfo }
  | { id: number; ok: true; outputs: Record<string, EngineTensor> }
  | { id: number; ok: true; done: true }
  | { id: number; ok: false; message: string };

const SEVERITY: Record<OrtLogLevel, 0 | 1 | 2 | 3 | 4> = { verbose: 0, info: 1, warning: 2, error: 3, fatal: 4 };
const DTYPES = new Set<string>([
  'float32',
  'float16',
  'float64',
  'int8',
  'uint8',
  'int16',
  'uint16',
  'int32',
  'uint32',
  'int64',
  'uint64',
  'bool',
  'string',
]);

const port = parentPort;
if (!port) throw new Error('ort-thread.ts runs only as a worker thread (see thread-engine.ts)');
const { logLevel } = workerData as ThreadData;
const severity = SEVERITY[logLevel];
// ORT's logger is process-wide, set up by the process's first session (maybe this thread's);
// sessions and runs below also carry the severity, so it holds either way.
ort.env.logLevel = logLevel;

const sessions = new Map<number, ort.InferenceSession>();
let queue: Promise<void> = Promise.resolve();
/** Set as soon as 'close' arrives: requests still queued are skipped, nobody awaits them now. */
let closing = false;

port.on('message', (request: ThreadRequest) => {
  if (request.op === 'close') closing = true;
  queue = queue.then(() => handle(request));
});

/**
 * The thread ends itself, between forward passes. Terminating it from outside while ORT is
 * inside `run` aborts the whole process (a native exception escapes as the isolate stops).
 */
async function shutdown(): Promise<never> {
  await Promise.all([...sessions.values()].map((s) => s.release().catch(() => undefined)));
  process.exit(0);
}

async function handle(request: ThreadRequest): Promise<void> {
  if (request.op === 'close') return shutdown();
  if (closing) return;
  try {
    if (request.op === 'load') {
      const info = await load(request.session ?? 0, request.modelPath, request.options);
      port?.postMessage({ id: request.id, ok: true, info } satisfies ThreadResponse);
    } else if (request.op === 'release' || request.op === 'ready') {
      await (request.op === 'release' ? release(request.session) : prime());
      port?.postMessage({ id: request.id, ok: true, done: true } satisfies ThreadResponse);
    } else {
      const { tensors, transfer } = forTransfer(await run(request.session ?? 0, request.inputs, request.outputNames));
      const response = { id: request.id, ok: true, outputs: tensors } satisfies ThreadResponse;
      try {
        port?.postMessage(response, transfer);
      } catch {
        // A buffer ORT allocated outside V8 may not be detachable: send a copy instead.
        port?.postMessage(response);
      }
    }
  } catch (err) {
    const message = errorMessage(err);
    port?.postMessage({ id: request.id, ok: false, message } satisfies ThreadResponse);
  }
}

/**
 * Creates the new session before releasing the old one, so a failed reload leaves the engine
 * serving what it had.
 */
async function load(key: number, modelPath: string, options: EngineLoadOptions): Promise<ThreadEngineInfo> {
  const started = performance.now();
  const { created, providers } = await createWithFallback(modelPath, options);
  const previous = sessions.get(key);
  sessions.set(key, created);
  await previous?.release();
  return {
    inputNames: [...created.inputNames],
    outputNames: [...created.outputNames],
    loadMs: performance.now() - started,
    executionProviders: providers,
  };
}

/**
 * With more than one intra-op thread (or ORT's default pool, 0), ORT's threads busy-wait
 * between and after kernels. On a small host that spinning takes the core the worker's main
 * thread needs for the queue: draining `demo` at 2 threads cost 0.64–0.77 ms of CPU per job
 * against 0.51 at 1 (docs/BENCHMARKS.md). The node binding flattens `extra` into session config
 * entries, here `session.intra_op.allow_spinning` (onnxruntime_session_options_config_keys.h).
 */
const NO_SPINNING = { extra: { session: { intra_op: { allow_spinning: '0' } } } };

/**
 * ORT refuses the whole session when one listed provider cannot be set up (e.g. CUDA libraries
 * missing), so drop providers from the front until one list works; 'cpu' is always the last.
 */
async function createWithFallback(
  modelPath: string,
  options: EngineLoadOptions,
): Promise<{ created: ort.InferenceSession; providers: string[] }> {
  const accelerators = [...new Set(options.executionProviders.map((p) => p.trim().toLowerCase()))].filter((p) => p !== '' && p !== 'cpu');
  for (let skip = 0; ; skip++) {
    const providers = [...accelerators.slice(skip), 'cpu'];
    try {
      const created = await ort.InferenceSession.create(modelPath, {
        executionProviders: providers,
        graphOptimizationLevel: 'all',
        logSeverityLevel: severity,
        ...(options.intraOpThreads > 0 ? { intraOpNumThreads: options.intraOpThreads } : {}),
        ...(options.intraOpThreads !== 1 ? NO_SPINNING : {}),
      });
      return { created, providers };
    } catch (err) {
      if (skip >= accelerators.length) throw err;
    }
  }
}

/** A 124-byte model, `y = Relu(x)` FP32 [batch, 1] (built with scripts/fixtures/onnx-graph.ts), for prime(). */
const PRIMER =
  'CAgSE3dhcm1wb29sLW1ha2UtbW9kZWwaATE6WgoUCgF4EgF5GgZyZWx1XzAiBFJlbHUSDndhcm1wb29sLXJlYWR5WhgKAXgSEwoRCAESDQoHEgViYXRjaAoCCAFiGAoBeRITChEIARINCgcSBWJhdGNoCgIIAUIECgAQEQ==';
let primed = false;

/**
 * `ready`: creates, runs and releases one tiny session, once, so ONNX Runtime's process-wide state
 * (its environment, logger, kernel registry: about 28 MB of RSS on the first session of a process)
 * is up before a pool worker reports standby, and is not counted against the first model it loads.
 */
async function prime(): Promise<void> {
  if (primed) return;
  const created = await ort.InferenceSession.create(Buffer.from(PRIMER, 'base64'), { logSeverityLevel: severity, intraOpNumThreads: 1 });
  try {
    await created.run({ x: new ort.Tensor('float32', Float32Array.from([1]), [1, 1]) }, { logSeverityLevel: severity });
  } finally {
    await created.release();
  }
  primed = true;
}

/** Frees one session's native memory (weights, arena); the thread serves the others. */
async function release(key: number): Promise<void> {
  const session = sessions.get(key);
  sessions.delete(key);
  await session?.release();
}

async function run(key: number, inputs: Record<string, EngineTensor>, outputNames?: string[]): Promise<Record<string, EngineTensor>> {
  const session = sessions.get(key);
  if (!session) throw new Error('no model loaded: call load() first');
  const feeds: Record<string, ort.Tensor> = {};
  for (const [name, t] of Object.entries(inputs)) feeds[name] = new ort.Tensor(t.type, t.data, t.dims);
  const results = outputNames
    ? await session.run(feeds, outputNames, { logSeverityLevel: severity })
    : await session.run(feeds, { logSeverityLevel: severity });
  const outputs: Record<string, EngineTensor> = {};
  for (const [name, value] of Object.entries(results)) outputs[name] = toEngineTensor(name, value as ort.Tensor);
  return outputs;
}

function toEngineTensor(name: string, t: ort.Tensor): EngineTensor {
  if (!DTYPES.has(t.type)) throw new Error(`output "${name}" has unsupported type ${t.type}`);
  const type = t.type as EngineDtype;
  const data = t.data;
  // float16 travels as its raw bits, whatever array type this ORT build hands out for it.
  if (type === 'float16' && ArrayBuffer.isView(data) && !(data instanceof Uint16Array)) {
    return { type, dims: [...t.dims], data: new Uint16Array(data.buffer, data.byteOffset, data.byteLength / 2) };
  }
  return { type, dims: [...t.dims], data: data as EngineTensor['data'] };
}
