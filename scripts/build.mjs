#!/usr/bin/env node
/**
 * `npm run build`: the compiled JavaScript production roles run, in `dist/` (gitignored).
 *
 * esbuild bundles the CLI (scripts/cli.ts) with code splitting, so each role loads its own
 * chunks and nothing else (a worker never parses the API or the bench), plus the two worker
 * thread entries. Every output lies flat in dist/ (`cli.js`, `ort-thread.js`, `sweep-thread.js`,
 * chunks), with linked source maps (NODE_OPTIONS=--enable-source-maps reads them).
 *
 * The packages every role loads at start are bundled too (BUNDLED, with what they import):
 * Node's loader pays per module file, and the AWS SDK, BullMQ, ioredis and zod are hundreds of
 * them; bundled, a worker's boot took 290 ms instead of 440 (median of 11, same machine, same
 * load). The Lambda bundles (scripts/package-aws.ts) have always bundled these. The rest stay
 * external, resolved from node_modules at run time: native addons, what finds files beside its
 * own code (pino's transports, msgpackr's optional native extractor), and what only tools load.
 *
 * Code that finds files beside itself (`new URL('./assets/x', import.meta.url)`,
 * `createRequire(import.meta.url)`) keeps finding them in the source tree: in each module,
 * `import.meta.url` becomes the URL its source file has (dist/ sits in the repository root, one
 * level down). The exception is a thread entry the code asks for by URL (THREAD_ENTRIES): in the
 * source tree a small .mjs loads tsx and then the TypeScript; here it is the compiled entry.
 *
 * A stamp (dist/build-stamp.json) records every input with its mtime, size and hash (for a
 * bundled package, its package.json: an install that changes it changes its version), so
 * bin/warmpool.mjs can tell, with a stat per input, whether dist/ is still what the sources
 * and node_modules say (staleReason). Builds may run concurrently (parallel tests spawning the CLI): every file
 * is written to a temp name and renamed, chunks (content-hashed) before the entries that import
 * them, the stamp last. Files of earlier builds stay an hour for processes still running them.
 *
 *   node scripts/build.mjs            build
 *   node scripts/build.mjs --check    exit 1, saying why, when dist/ is missing or stale
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { builtinModules, createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const DIST = path.join(ROOT, 'dist');
export const STAMP = path.join(DIST, 'build-stamp.json');
const STAMP_VERSION = 1;

/** The Node.js the output must run on: package.json's engines. */
export const TARGET = 'node20';

/** Output name (dist/<name>.js) → source entry. */
export const ENTRIES = {
  cli: 'scripts/cli.ts',
  'ort-thread': 'worker/engine/ort-thread.ts',
  'sweep-thread': 'infra/simulator/sweep-thread.ts',
};

/** Thread bootstraps the sources start by URL → the compiled entry that stands in for them. */
export const THREAD_ENTRIES = {
  'worker/engine/thread-bootstrap.mjs': 'ort-thread',
  'infra/simulator/sweep-thread.mjs': 'sweep-thread',
};

/** Packages bundled where the sources import them (a name, or a scope ending in '/'), with what they import. */
export const BUNDLED = ['@aws-sdk/', '@smithy/', 'bullmq', 'ioredis', 'zod', 'prom-client', 'hono', '@hono/node-server'];

/** Never bundled, even where a bundled package imports them: they find files beside their own code. */
const UNBUNDLED = ['msgpackr', 'msgpackr-extract', 'onnxruntime-node', 'onnxruntime-common', 'pino', 'thread-stream'];

/** CommonJS inside the bundle calls require(); an ES module has none of its own. */
const REQUIRE_BANNER =
  "import { createRequire as __warmpoolCreateRequire } from 'node:module'; const require = __warmpoolCreateRequire(import.meta.url);";

/** Files read by the build besides the bundled sources: a change to one rebuilds too. */
const CONFIG_INPUTS = ['scripts/build.mjs', 'tsconfig.json'];

/** Old outputs younger than this are kept: a process started from them may still import a chunk. */
const KEEP_OLD_MS = 60 * 60 * 1000;

/**
 * Why dist/ cannot be run as it is (missing, built from other sources), or undefined when it is
 * fresh. A stat per input; a file is hashed only when its mtime moved but its size did not (a
 * checkout or a copy that rewrote it unchanged).
 * @param {string} [root]
 * @returns {string | undefined}
 */
export function staleReason(root = ROOT) {
  /** @type {{ version?: number; inputs?: Record<string, [number, number, string]>; entries?: string[] }} */
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(path.join(root, 'dist', 'build-stamp.json'), 'utf8'));
  } catch {
    return 'dist/ has not been built';
  }
  if (stamp.version !== STAMP_VERSION || !stamp.inputs || !stamp.entries) return 'dist/ was built by another version of the build';
  for (const entry of stamp.entries) {
    if (!statSync(path.join(root, 'dist', entry), { throwIfNoEntry: false })) return `dist/${entry} is missing`;
  }
  for (const [file, [mtimeMs, size, sha1]] of Object.entries(stamp.inputs)) {
    const st = statSync(path.join(root, file), { throwIfNoEntry: false });
    if (!st) return `${file} is gone`;
    if (st.size !== size || (st.mtimeMs !== mtimeMs && hashOf(path.join(root, file)) !== sha1)) return `${file} changed`;
  }
  return undefined;
}

/**
 * Builds dist/ and writes its stamp. Returns the outputs written, relative to dist/. `quiet`:
 * esbuild prints nothing (the error thrown still says what failed).
 * @param {{ root?: string; quiet?: boolean }} [options]
 * @returns {Promise<string[]>}
 */
export async function buildDist(options = {}) {
  const root = options.root ?? ROOT;
  const dist = path.join(root, 'dist');
  // Loaded here, not at the top: bin/warmpool.mjs imports this module on every start for
  // staleReason(), and production installs (npm ci --omit=dev) have no esbuild.
  const esbuild = await import('esbuild');
  /** @type {Record<string, [number, number, string]>} */
  const read = {};
  for (const file of CONFIG_INPUTS) {
    const { mtimeMs } = statSync(path.join(root, file));
    const bytes = readFileSync(path.join(root, file));
    read[file] = [mtimeMs, bytes.length, createHash('sha1').update(bytes).digest('hex')];
  }
  // esbuild serves builds from a child process it keeps; stop it once the build is done.
  const result = await esbuild
    .build({
      absWorkingDir: root,
      entryPoints: Object.fromEntries(Object.entries(ENTRIES).map(([name, file]) => [name, path.join(root, file)])),
      outdir: dist,
      entryNames: '[name]',
      chunkNames: '[name]-[hash]',
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: TARGET,
      banner: { js: REQUIRE_BANNER },
      sourcemap: 'linked',
      sourcesContent: false,
      metafile: true,
      write: false,
      logLevel: options.quiet ? 'silent' : 'warning',
      legalComments: 'none',
      plugins: [packagesBundledOrNot(root), sourcesAsRead(root, read, esbuild)],
    })
    .finally(() => esbuild.stop());
  mkdirSync(dist, { recursive: true });
  const entryOutputs = new Set(Object.keys(ENTRIES).flatMap((name) => [`${name}.js`, `${name}.js.map`]));
  const files = result.outputFiles.map((f) => ({ rel: path.relative(dist, f.path), contents: f.contents }));
  // Chunks first, then the entries that import them: a reader never sees an entry without its chunks.
  for (const f of files.filter((x) => !entryOutputs.has(x.rel))) writeAtomic(path.join(dist, f.rel), f.contents);
  for (const f of files.filter((x) => entryOutputs.has(x.rel))) writeAtomic(path.join(dist, f.rel), f.contents);

  // What the build read, as it read it; metafile lists the same files (checked: none missed).
  const inputs = Object.keys(result.metafile.inputs);
  const missed = inputs.filter((i) => !i.includes('node_modules/') && !(i in read));
  if (missed.length > 0) throw new Error(`the build read ${missed.join(', ')} without recording it`);
  for (const manifest of new Set(inputs.flatMap((i) => packageJsonOf(root, i) ?? []))) {
    const { mtimeMs } = statSync(path.join(root, manifest));
    const bytes = readFileSync(path.join(root, manifest));
    read[manifest] = [mtimeMs, bytes.length, createHash('sha1').update(bytes).digest('hex')];
  }
  const stamped = Object.fromEntries(Object.entries(read).sort(([a], [b]) => a.localeCompare(b)));
  const stamp = {
    version: STAMP_VERSION,
    builtAt: new Date().toISOString(),
    entries: Object.keys(ENTRIES).map((n) => `${n}.js`),
    inputs: stamped,
  };
  writeAtomic(path.join(dist, 'build-stamp.json'), JSON.stringify(stamp));
  pruneOld(dist, new Set([...files.map((f) => f.rel), 'build-stamp.json']));
  return files.map((f) => f.rel);
}

/**
 * The esbuild plugin that decides, per bare import, bundle or leave external: from the sources,
 * bundle what BUNDLED names; from inside a bundled package, bundle everything but UNBUNDLED.
 * An external import is resolved from dist/ at run time, so the build fails where that would
 * find another copy than the importer's own (a nested node_modules).
 * @param {string} root
 * @returns {import('esbuild').Plugin}
 */
function packagesBundledOrNot(root) {
  const builtins = new Set(builtinModules);
  const fromDist = createRequire(path.join(root, 'dist', 'x.js'));
  const named = (list, name) => list.some((p) => (p.endsWith('/') ? name.startsWith(p) : name === p));
  return {
    name: 'packages-bundled-or-not',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => {
        const name = packageName(args.path);
        if (args.path.startsWith('node:') || builtins.has(name)) return undefined;
        const inPackage = args.importer.includes(`${path.sep}node_modules${path.sep}`);
        if (inPackage ? !named(UNBUNDLED, name) : named(BUNDLED, name)) return undefined;
        if (inPackage) {
          const own = packageDir(createRequire(args.importer), name);
          const found = packageDir(fromDist, name);
          if (own && own !== found) {
            throw new Error(
              `${name}, imported by ${path.relative(root, args.importer)}, would load ${found ?? 'nothing'} from dist/, not ${own}`,
            );
          }
        }
        return { path: args.path, external: true };
      });
    },
  };
}

/** `@scope/pkg/sub` → `@scope/pkg`; `pkg/sub` → `pkg`. @param {string} specifier */
function packageName(specifier) {
  const parts = specifier.split('/');
  return (specifier.startsWith('@') ? parts.slice(0, 2) : parts.slice(0, 1)).join('/');
}

/** The folder a require from there would load `name` from, or undefined. @param {NodeJS.Require} req @param {string} name */
function packageDir(req, name) {
  try {
    const entry = req.resolve(name);
    const at = entry.lastIndexOf(`node_modules${path.sep}${name.split('/').join(path.sep)}${path.sep}`);
    return at < 0 ? entry : entry.slice(0, at + `node_modules/${name}`.length);
  } catch {
    return undefined;
  }
}

/** A metafile input inside node_modules → its package's package.json (relative), else undefined. @param {string} root @param {string} input */
function packageJsonOf(root, input) {
  const at = input.lastIndexOf('node_modules/');
  if (at < 0) return undefined;
  const rest = input.slice(at + 'node_modules/'.length).split('/');
  const name = (rest[0]?.startsWith('@') ? rest.slice(0, 2) : rest.slice(0, 1)).join('/');
  const file = `${input.slice(0, at)}node_modules/${name}/package.json`;
  return existsSync(path.join(root, file)) ? file : undefined;
}

/**
 * The esbuild plugin that loads every source file: it records what was read (the stamp must
 * describe the bytes compiled, not a file edited during the build), keeps `import.meta.url`
 * meaning what it means in the source tree (sourceRelativeUrls), and leaves the plain-JavaScript
 * .mjs modules of the tree (scripts/build.mjs, which bin/warmpool.mjs runs as it is) out of the
 * bundle: they are imported from where they lie, one copy, with their own import.meta.
 * @param {string} root
 * @param {Record<string, [number, number, string]>} read  filled: source → [mtimeMs, size, sha1]
 * @param {typeof import('esbuild')} esbuild
 * @returns {import('esbuild').Plugin}
 */
function sourcesAsRead(root, read, esbuild) {
  const tsconfigRaw = readFileSync(path.join(root, 'tsconfig.json'), 'utf8');
  const inTree = (file) => {
    const rel = path.relative(root, file).split(path.sep).join('/');
    return rel.startsWith('..') || rel.includes('node_modules/') ? undefined : rel;
  };
  return {
    name: 'sources-as-read',
    setup(b) {
      b.onResolve({ filter: /^\.\.?\/.*\.mjs$/ }, (args) => {
        const rel = args.importer ? inTree(path.resolve(path.dirname(args.importer), args.path)) : undefined;
        return rel ? { path: `../${rel}`, external: true } : undefined;
      });
      b.onLoad({ filter: /\.(ts|mts|mjs|js)$/ }, async (args) => {
        const rel = inTree(args.path);
        if (rel === undefined) return undefined;
        // Stat before reading: a write after it moves the mtime, so the stamp cannot call it fresh.
        const { mtimeMs } = statSync(args.path);
        const bytes = readFileSync(args.path);
        read[rel] = [mtimeMs, bytes.length, createHash('sha1').update(bytes).digest('hex')];
        const loader = /\.m?ts$/.test(args.path) ? 'ts' : 'js';
        const source = bytes.toString('utf8');
        if (!source.includes('import.meta.url')) return { contents: source, loader };
        return { contents: await sourceRelativeUrls(esbuild, source, rel, loader, tsconfigRaw), loader: 'js' };
      });
    },
  };
}

/**
 * `source` (the file `rel`) compiled to JavaScript with every `import.meta.url` expression
 * turned into its source file's URL, `new URL('../<rel>', import.meta.url).href` (every output
 * is one level below the root), except `new URL('./<bootstrap>', import.meta.url)` for a thread
 * bootstrap, which becomes its compiled entry beside the output. esbuild's `define` finds the
 * expressions, so the same characters in a string or a comment stay as they are. An inline
 * source map carries the lines through to the bundle's map.
 * @param {typeof import('esbuild')} esbuild
 * @param {string} source
 * @param {string} rel
 * @param {'ts' | 'js'} loader
 * @param {string} [tsconfigRaw]
 * @returns {Promise<string>}
 */
export async function sourceRelativeUrls(esbuild, source, rel, loader, tsconfigRaw) {
  const marker = '__warmpool_import_meta_url__';
  const { code } = await esbuild.transform(source, {
    loader,
    format: 'esm',
    target: TARGET,
    sourcemap: 'inline',
    sourcefile: path.posix.basename(rel),
    define: { 'import.meta.url': marker },
    ...(tsconfigRaw ? { tsconfigRaw } : {}),
  });
  const dir = path.posix.dirname(rel);
  return code
    .replace(new RegExp(`new URL\\("([^"]+)", ${marker}\\)`, 'g'), (whole, target) => {
      const entry = THREAD_ENTRIES[/** @type {keyof typeof THREAD_ENTRIES} */ (path.posix.join(dir, target))];
      return entry ? `new URL(${JSON.stringify(`./${entry}.js`)}, import.meta.url)` : whole;
    })
    .replaceAll(marker, `new URL(${JSON.stringify(`../${rel}`)}, import.meta.url).href`);
}

/** @param {string} file */
function hashOf(file) {
  return createHash('sha1').update(readFileSync(file)).digest('hex');
}

/** @param {string} file @param {Uint8Array} contents */
function writeAtomic(file, contents) {
  const tmp = `${file}.${process.pid}.${randomBytes(3).toString('hex')}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, file);
}

/** Removes outputs of earlier builds once no process is likely to still run them. @param {string} dist @param {Set<string>} keep */
function pruneOld(dist, keep) {
  const now = Date.now();
  for (const name of readdirSync(dist)) {
    if (keep.has(name)) continue;
    const file = path.join(dist, name);
    const st = statSync(file, { throwIfNoEntry: false });
    if (st?.isFile() && now - st.mtimeMs > KEEP_OLD_MS) rmSync(file, { force: true });
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.includes('--check')) {
    const why = staleReason();
    if (why) process.stderr.write(`dist/ is not current: ${why}; run \`npm run build\`\n`);
    process.exitCode = why ? 1 : 0;
  } else {
    const started = performance.now();
    const outputs = await buildDist();
    const js = outputs.filter((f) => f.endsWith('.js'));
    process.stdout.write(`built dist/: ${js.length} files in ${Math.round(performance.now() - started)} ms\n`);
  }
}
