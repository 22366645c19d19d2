/**
 * `warmpool edge build` and `warmpool edge serve`: the edge gateway (api/edge/) as one Worker
 * bundle, and a local workerd running it in front of a regional API.
 *
 * build: esbuild bundles api/edge/worker.ts for workerd (ES module, browser conditions, nothing
 * from node:), minified, into DIR/worker.js, and writes DIR/workerd.capnp beside it: the Worker,
 * its two Durable Object namespaces on local disk (DIR/do-storage) and its bindings. For
 * Cloudflare itself, deploy/edge/wrangler.toml names the same bundle and bindings.
 *
 * serve: build, then run the workerd from node_modules on that config until interrupted, with
 * API_KEYS taken from the environment (or .warmpool/dev.env) as a secret, never written down.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, stop } from 'esbuild';
import { EDGE_BUILD, EDGE_SERVE } from './cli-options.ts';
import { parseCommand, UsageError, usageError } from './cli-spec.ts';
import type { CliIo } from './deploy.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const ENTRY = path.join(ROOT, 'api', 'edge', 'worker.ts');

/** The date the gateway was last checked against (workerd's compatibility date, not newer than the runtime's). */
export const EDGE_COMPATIBILITY_DATE = '2025-09-01';

export interface EdgeBundle {
  file: string;
  bytes: number;
}

/** Bundles the gateway into `outDir/worker.js`; refuses any import of a Node built-in. */
export async function buildEdgeBundle(outDir: string): Promise<EdgeBundle> {
  mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, 'worker.js');
  const result = await build({
    entryPoints: [ENTRY],
    outfile: file,
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    mainFields: ['browser', 'module', 'main'],
    conditions: ['workerd', 'worker', 'browser'],
    metafile: true,
    logLevel: 'silent',
    legalComments: 'none',
  }).finally(() => stop()); // no esbuild service left running after the one build
  const nodeImports = Object.values(result.metafile.inputs).flatMap((i) => i.imports.filter((imp) => imp.path.startsWith('node:')));
  if (nodeImports.length > 0) {
    throw new Error(
      `the edge bundle imports Node built-ins (${[...new Set(nodeImports.map((i) => i.path))].join(', ')}); api/edge/ may not`,
    );
  }
  const output = Object.values(result.metafile.outputs)[0];
  return { file, bytes: output?.bytes ?? 0 };
}

export interface WorkerdConfigOptions {
  /** Where worker.js is; the config is written beside it and names it by its file name. */
  outDir: string;
  regionUrl: string;
  /** host:port the gateway listens on. */
  listen: string;
  /** Extra text bindings (RATE_LIMIT_RPS, FORWARD_TIMEOUT_MS, …: api/edge/edge-config.ts). */
  vars?: Record<string, string>;
}

/** capnp text strings: a double-quoted literal. */
const capnpString = (s: string) => JSON.stringify(s);

/** The workerd config (capnp text) that serves the bundle in `outDir` with its Durable Objects on local disk. */
export function workerdConfig(options: WorkerdConfigOptions): string {
  const storage = path.join(path.resolve(options.outDir), 'do-storage');
  const vars = Object.entries({ REGION_URL: options.regionUrl, ...options.vars })
    .map(([name, value]) => `    (name = ${capnpString(name)}, text = ${capnpString(value)}),`)
    .join('\n');
  return `# Written by \`warmpool edge build\`: the edge gateway under a local workerd.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "gateway", worker = .gateway),
    (name = "do-disk", disk = (path = ${capnpString(storage)}, writable = true)),
    (name = "internet", network = (allow = ["public", "private", "local"])),
  ],
  sockets = [ (name = "http", address = ${capnpString(options.listen)}, http = (), service = "gateway") ],
);

const gateway :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = embed "worker.js") ],
  compatibilityDate = ${capnpString(EDGE_COMPATIBILITY_DATE)},
  compatibilityFlags = ["nodejs_compat"],
  durableObjectNamespaces = [
    (className = "EdgeRateLimiter", uniqueKey = "warmpool-edge-rate-limiter"),
    (className = "EdgeBuffer", uniqueKey = "warmpool-edge-buffer"),
  ],
  durableObjectStorage = (localDisk = "do-disk"),
  globalOutbound = "internet",
  bindings = [
${vars}
    (name = "API_KEYS", fromEnvironment = "API_KEYS"),
    (name = "LIMITER", durableObjectNamespace = "EdgeRateLimiter"),
    (name = "BUFFER", durableObjectNamespace = "EdgeBuffer"),
  ],
);
`;
}

/** Bundle and config into `outDir`; the config's path. */
export async function buildEdge(options: WorkerdConfigOptions): Promise<{ bundle: EdgeBundle; config: string }> {
  const bundle = await buildEdgeBundle(options.outDir);
  mkdirSync(path.join(options.outDir, 'do-storage'), { recursive: true });
  const config = path.join(options.outDir, 'workerd.capnp');
  writeFileSync(config, workerdConfig(options));
  return { bundle, config };
}

/**
 * The workerd binary npm installed (the `workerd` package's default export is its path). It is
 * CommonJS: through tsx the path is `default`, under plain Node (the compiled CLI in dist/)
 * `default` is the whole `module.exports` and the path is its own `default`.
 */
export async function workerdBinary(): Promise<string> {
  const name = 'workerd'; // untyped package: imported by name, its one export read as a string
  const mod = (await import(name)) as { default: string | { default: string } };
  return typeof mod.default === 'string' ? mod.default : mod.default.default;
}

export interface RunningEdge {
  /** http://127.0.0.1:port */
  url: string;
  child: ChildProcess;
  /** Stops workerd (SIGTERM, then SIGKILL after 3 s); idempotent. */
  close(): Promise<void>;
}

/**
 * Builds the gateway into `outDir` and runs it under workerd until `close()`; resolves once it
 * answers /v2/health/live. For tests and the bench, which measure the real runtime.
 */
export async function startEdge(options: WorkerdConfigOptions & { apiKeys: string; readyTimeoutMs?: number }): Promise<RunningEdge> {
  const { config } = await buildEdge(options);
  const child = spawn(await workerdBinary(), ['serve', config, '--experimental'], {
    env: { ...process.env, API_KEYS: options.apiKeys },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4000);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
        await exited;
        clearTimeout(timer);
      }
    })();
    return closing;
  };
  const url = `http://${options.listen}`;
  const deadline = Date.now() + (options.readyTimeoutMs ?? 20_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`workerd exited with ${child.exitCode} before it served: ${stderr.trim()}`);
    const live = await fetch(`${url}/v2/health/live`).then(
      (r) => r.ok,
      () => false,
    );
    if (live) return { url, child, close };
    if (Date.now() > deadline) {
      await close();
      throw new Error(`workerd did not serve ${url} in time: ${stderr.trim()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const processIo: CliIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

interface EdgeFlags {
  outDir: string;
  regionUrl: string;
  listen: string;
}

function parseFlags(command: 'build' | 'serve', args: string[], env: NodeJS.ProcessEnv): EdgeFlags {
  const spec = command === 'build' ? EDGE_BUILD : EDGE_SERVE;
  const { values } = parseCommand(spec, args);
  const regionUrl = values.region ?? `http://127.0.0.1:${env.PORT ?? 8080}`;
  if (!/^https?:\/\/[^/\s]+/.test(regionUrl)) throw usageError(spec, `--region must be an http(s) URL (got '${regionUrl}')`);
  const port = values.port ?? '8787';
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) throw usageError(spec, `--port must be a port number (got '${port}')`);
  return { outDir: path.resolve(values.out ?? path.join('.warmpool', 'edge')), regionUrl, listen: `127.0.0.1:${port}` };
}

export async function edgeMain(command: 'build' | 'serve', args: string[], env: NodeJS.ProcessEnv, io: CliIo = processIo): Promise<number> {
  let flags: EdgeFlags;
  try {
    flags = parseFlags(command, args, env);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.err(`${err.message}\n`);
    return 2;
  }
  const { bundle, config } = await buildEdge(flags);
  io.err(
    `edge gateway: ${path.relative(process.cwd(), bundle.file)} (${Math.round(bundle.bytes / 1024)} KiB), ${path.relative(process.cwd(), config)}\n`,
  );
  if (command === 'build') return 0;
  if (!env.API_KEYS) {
    io.err('warmpool edge serve: API_KEYS is not set: the gateway checks the same tenant:key list as the region\n');
    return 2;
  }
  const binary = await workerdBinary();
  io.err(`edge gateway on http://${flags.listen}, in front of ${flags.regionUrl}\n`);
  const child = spawn(binary, ['serve', config, '--experimental'], { stdio: 'inherit', env: { ...process.env, API_KEYS: env.API_KEYS } });
  const stop = () => child.kill('SIGTERM');
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve(signal ? 0 : (code ?? 1)));
    child.once('error', (err) => {
      io.err(`warmpool edge serve: could not start workerd (${err.message})\n`);
      resolve(1);
    });
  });
}
