/**
 * `warmpool models …` (DESIGN §2):
 *
 *   models publish FILE.onnx --name M --version V [--max-batch N] [--warmup-batches 1,8,32]
 *                            [--warmup-shape [INPUT:]3,48,192 …] [--label k=v …] [--outputs NAME,…]
 *                            [--batch-axis NAME:AXIS,… | --no-batching] [--overwrite]
 *   models list
 *   models show M [--version V]
 *
 * Exit codes: 0 done; 1 the registry refused (invalid model, version exists, not found);
 * 2 bad arguments or an unreadable file. Other failures (S3 down) propagate to the dispatcher.
 *
 * `--warmup-shape` gives an input's non-batch dimensions for the worker's warm-up (the manifest's
 * `batching.warmupShapes`): `x:3,48,192`, once per input, or `3,48,192` for a model's single input.
 * A model with dynamic dimensions (images of any size) is profiled at the size it will serve.
 *
 * `--batch-axis state:1,sr:none` says where a tensor keeps its rows where the model's dimension
 * names do not (AXIS an integer ≥ 0, or none); `--no-batching` serves every tensor whole
 * (onnx-metadata.ts reads the plan). Publish prints the plan in one line when there is one, and
 * `show` lists each tensor's batch axis, in the model's own shape, after the manifest.
 */
import fs from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { type BatchAxis, modelShape } from '../../infra/contracts/batch-axes.ts';
import type { ModelManifest, TensorSpec } from '../../infra/contracts/manifest.ts';
import { inputsWithoutWarmupShape, warmupShapeFlag } from '../../infra/contracts/warmup-shapes.ts';
import { errorMessage, InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import type { ModelRegistry } from '../../infra/registry/model-registry.ts';
import { readOnnxMetadata } from '../../infra/registry/onnx-metadata.ts';
import { withNearestName } from './cli-errors.ts';
import { MODELS_LIST, MODELS_PUBLISH, MODELS_SHOW } from './cli-options.ts';

export interface ModelsCommandDeps {
  registry: ModelRegistry;
  out: (line: string) => void;
  /** Where errors go (default: `out`). */
  err?: (line: string) => void;
  /**
   * The CLI's name for the command (`warmpool models`): errors read `warmpool models show: …` and
   * point at the subcommand's --help. Unset: `error: …` and the usage.
   */
  prefix?: string;
}

export const MODELS_USAGE = [
  'usage: warmpool models publish FILE.onnx --name M --version V [--max-batch N] [--warmup-batches 1,8,32]',
  '                                [--warmup-shape [INPUT:]3,48,192 ...] [--label k=v ...] [--outputs NAME,...]',
  '                                [--batch-axis NAME:AXIS,... | --no-batching] [--overwrite]',
  '       warmpool models list',
  '       warmpool models show M [--version V]',
].join('\n');

/** A problem with the command line: printed with the usage, exit code 2. */
class UsageError extends Error {}

export async function modelsCommand(args: string[], deps: ModelsCommandDeps): Promise<number> {
  const [sub, ...rest] = args;
  try {
    switch (sub) {
      case 'publish':
        return await publish(rest, deps);
      case 'list':
        return await list(rest, deps);
      case 'show':
        return await show(rest, deps);
      case undefined:
      case 'help':
      case '--help':
        deps.out(MODELS_USAGE);
        return sub === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown models subcommand "${sub}"`);
    }
  } catch (err) {
    const say = deps.err ?? deps.out;
    const prefix = deps.prefix ? `${deps.prefix} ${sub}` : 'error';
    if (err instanceof UsageError) {
      say(`${prefix}: ${err.message}`);
      say(deps.prefix ? `see '${deps.prefix} ${sub} --help'` : MODELS_USAGE);
      return 2;
    }
    if (err instanceof InvalidInputError || err instanceof NotFoundError) {
      say(`${prefix}: ${err.message}`);
      if (err instanceof InvalidInputError && err.code === 'version_exists') say('`--overwrite` replaces it');
      if (err instanceof NotFoundError) say('`warmpool models list` shows what is published; `warmpool models publish` adds a model');
      return 1;
    }
    throw err;
  }
}

async function publish(args: string[], deps: ModelsCommandDeps): Promise<number> {
  const { values, positionals } = parse(args, MODELS_PUBLISH.options);
  const [file, ...extra] = positionals;
  if (!file) throw new UsageError('publish needs the path of an .onnx file');
  if (extra.length > 0) throw new UsageError(`unexpected arguments: ${extra.join(' ')}`);
  const name = requireString(values.name, '--name');
  const version = requireString(values.version, '--version');
  const bytes = await readModelFile(file);
  const shapes = values['warmup-shape'] ?? [];
  const manifest = await deps.registry.publish({
    name,
    version,
    bytes,
    ...(values['max-batch'] !== undefined ? { maxBatch: parsePositiveInt(values['max-batch'], '--max-batch') } : {}),
    ...(values['warmup-batches'] !== undefined ? { warmupBatches: parseIntList(values['warmup-batches'], '--warmup-batches') } : {}),
    ...(shapes.length > 0 ? { warmupShapes: parseWarmupShapes(shapes, bytes) } : {}),
    labels: parseLabels(values.label ?? []),
    ...(values.outputs !== undefined ? { outputs: parseNameList(values.outputs, '--outputs') } : {}),
    ...(values['batch-axis'] !== undefined ? { batchAxes: parseBatchAxes(values['batch-axis']) } : {}),
    ...(values['no-batching'] ? { noBatching: true } : {}),
    overwrite: values.overwrite ?? false,
  });
  deps.out(`published ${manifest.name} ${manifest.version} (sha256 ${manifest.sha256}, ${manifest.sizeBytes} bytes)`);
  const plan = planLine(manifest);
  if (plan) deps.out(plan);
  const unsized = inputsWithoutWarmupShape(manifest.inputs, manifest.batching.warmupShapes);
  if (unsized.length > 0) (deps.err ?? deps.out)(unsizedHint(unsized));
  return 0;
}

/** What the manifest's batching plan means for requests, in one line; undefined for a model batched on its first axes. */
function planLine(manifest: ModelManifest): string | undefined {
  const tensors = [...manifest.inputs, ...manifest.outputs];
  if (manifest.inputs.every((i) => i.batchAxis === 'none')) return 'no batch axis: one request a forward pass, its shapes exact';
  const fixed = manifest.batching.fixedBatch;
  if (fixed !== undefined) {
    return `the model fixes its batch at ${fixed}: it runs ${fixed} row a forward pass, and a request of several rows as several passes`;
  }
  const moved = tensors.filter((t) => t.batchAxis !== undefined);
  if (moved.length === 0) return undefined;
  const said = moved.map((t) => (t.batchAxis === 'none' ? `${t.name} none (one value a pass)` : `${t.name} on axis ${t.batchAxis}`));
  return `batching plan: ${said.join(', ')}; every other tensor on axis 0`;
}

/** `state:1,sr:none` → { state: 1, sr: 'none' }; a malformed pair is a usage error naming the flag. */
function parseBatchAxes(value: string): Record<string, BatchAxis> {
  const axes: Record<string, BatchAxis> = {};
  for (const pair of value.split(',')) {
    const m = /^\s*([^:\s]+)\s*:\s*(none|\d+)\s*$/.exec(pair);
    if (!m)
      throw new UsageError(`--batch-axis takes NAME:AXIS pairs separated by commas, AXIS a number or none (got ${JSON.stringify(pair)})`);
    const [, name = '', axis = ''] = m;
    if (Object.hasOwn(axes, name)) throw new UsageError(`--batch-axis names "${name}" twice`);
    axes[name] = axis === 'none' ? 'none' : Number(axis);
  }
  return axes;
}

/** `a,b` → ['a', 'b']; an empty name is a usage error naming the flag. */
function parseNameList(value: string, flag: string): string[] {
  const names = value.split(',').map((n) => n.trim());
  if (names.some((n) => n === '')) throw new UsageError(`${flag} takes names separated by commas (got ${JSON.stringify(value)})`);
  return names;
}

/**
 * Published without a warm-up shape for dynamic dimensions: the worker's warm-up will pick a size
 * and measure the batch profile there, not at the size the model serves (worker/warmup.ts).
 */
function unsizedHint(inputs: readonly TensorSpec[]): string {
  const named = inputs.map((i) => `${i.name} [${i.shape.join(', ')}]`).join(', ');
  return (
    `hint: ${inputs.length === 1 ? 'input' : 'inputs'} ${named} ${inputs.length === 1 ? 'has' : 'have'} dynamic dimensions after the batch axis and no --warmup-shape: ` +
    `a worker's warm-up picks a size for them and measures its batch profile there, not at the size you serve. ` +
    `Give the size: ${inputs.map(warmupShapeFlag).join(' ')} (on a new version, or this one with --overwrite)`
  );
}

async function list(args: string[], deps: ModelsCommandDeps): Promise<number> {
  parse(args, MODELS_LIST.options, 0);
  const models = await deps.registry.list();
  if (models.length === 0) {
    deps.out('no models in the registry');
    return 0;
  }
  const rows = models.map((m) => [m.name, m.versions.join(', ')]);
  const width = Math.max('MODEL'.length, ...rows.map(([n = '']) => n.length));
  deps.out(`${'MODEL'.padEnd(width)}  VERSIONS`);
  for (const [n = '', v = ''] of rows) deps.out(`${n.padEnd(width)}  ${v}`);
  return 0;
}

async function show(args: string[], deps: ModelsCommandDeps): Promise<number> {
  const { values, positionals } = parse(args, MODELS_SHOW.options, 1);
  const [name] = positionals;
  if (!name) throw new UsageError('show needs a model name');
  const manifest = await deps.registry.getManifest(name, values.version).catch(async (err: unknown) => {
    throw await withNearestName(err, name, async () => (await deps.registry.list()).map((m) => m.name));
  });
  for (const line of JSON.stringify(manifest, null, 2).split('\n')) deps.out(line);
  // After the JSON and on stderr, so `show … | jq` still reads a manifest.
  for (const line of axisLines(manifest)) (deps.err ?? deps.out)(line);
  return 0;
}

/**
 * Each tensor's batch axis and its shape as the model declares it (`input state [2, -1, 3]: batch
 * axis 1`), for a manifest with a batching plan; none for one batched on every first axis.
 */
function axisLines(manifest: ModelManifest): string[] {
  const tensors = [...manifest.inputs.map((t) => ({ role: 'input', t })), ...manifest.outputs.map((t) => ({ role: 'output', t }))];
  if (tensors.every(({ t }) => t.batchAxis === undefined)) return [];
  const axis = (t: TensorSpec) => (t.batchAxis === 'none' ? 'no batch axis' : `batch axis ${t.batchAxis ?? 0}`);
  return [
    "batch axes (each tensor's shape as the model takes it, -1 dynamic):",
    ...tensors.map(({ role, t }) => `  ${role} ${t.name} [${modelShape(t.shape, t.batchAxis).join(', ')}]: ${axis(t)}`),
  ];
}

type Options = NonNullable<Parameters<typeof parseArgs>[0]>['options'];

/** parseArgs in strict mode over the command's table (cli-options.ts), with its errors turned into usage errors. */
function parse<O extends Options>(args: string[], options: O, maxPositionals = Infinity) {
  const parsed = (() => {
    try {
      return parseArgs({ args, options, allowPositionals: true, strict: true });
    } catch (err) {
      throw new UsageError(errorMessage(err));
    }
  })();
  if (parsed.positionals.length > maxPositionals) {
    throw new UsageError(`unexpected arguments: ${parsed.positionals.slice(maxPositionals).join(' ')}`);
  }
  return parsed;
}

function requireString(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`${flag} is required`);
  return value;
}

async function readModelFile(file: string): Promise<Uint8Array> {
  try {
    return await fs.readFile(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new UsageError(`no such file: ${file}`);
    if (code === 'EISDIR') throw new UsageError(`${file} is a directory, not an .onnx file`);
    throw new UsageError(`cannot read ${file}: ${errorMessage(err)}`);
  }
}

function parsePositiveInt(raw: string, flag: string): number {
  if (!/^\d+$/.test(raw.trim())) throw new UsageError(`${flag} must be a positive integer (got "${raw}")`);
  const n = Number(raw.trim());
  if (n < 1) throw new UsageError(`${flag} must be a positive integer (got "${raw}")`);
  return n;
}

function parseIntList(raw: string, flag: string): number[] {
  const parts = raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.length === 0) throw new UsageError(`${flag} needs comma-separated batch sizes, e.g. 1,8,32`);
  return parts.map((p) => parsePositiveInt(p, flag));
}

/**
 * `--warmup-shape` values → dimensions by input name. `INPUT:D,D,…` names the input (the last
 * ':' splits, as converted models name inputs `input_1:0`); a bare `D,D,…` is the model's single
 * input, read from the model. Whether the dimensions fit the input is the registry's check.
 */
function parseWarmupShapes(values: string[], bytes: Uint8Array): Record<string, number[]> {
  const shapes = new Map<string, number[]>();
  for (const value of values) {
    const colon = value.lastIndexOf(':');
    const name = colon < 0 ? singleInputName(bytes) : value.slice(0, colon).trim();
    const dims = (colon < 0 ? value : value.slice(colon + 1)).split(',').map((d) => d.trim());
    if (!name) throw new UsageError(`--warmup-shape "${value}": the input name before ':' is empty`);
    if (dims.some((d) => !/^[1-9]\d*$/.test(d))) {
      throw new UsageError(`--warmup-shape "${value}": dimensions are positive integers separated by commas, e.g. x:3,48,192`);
    }
    if (shapes.has(name)) throw new UsageError(`--warmup-shape gives input ${name} twice`);
    shapes.set(name, dims.map(Number));
  }
  return Object.fromEntries(shapes);
}

function singleInputName(bytes: Uint8Array): string {
  const names = readOnnxMetadata(bytes).inputs.map((i) => i.name);
  if (names.length !== 1 || names[0] === undefined) {
    throw new UsageError(
      `the model has ${names.length} inputs (${names.join(', ')}): name the input in each --warmup-shape, e.g. INPUT:3,48,192`,
    );
  }
  return names[0];
}

function parseLabels(pairs: string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of pairs) {
    const at = pair.indexOf('=');
    if (at < 1) throw new UsageError(`--label must be key=value (got "${pair}")`);
    labels[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return labels;
}
