/**
 * `npm run package:aws` (`node --import tsx scripts/package-aws.ts`): bundles the Lambda entries
 * with esbuild, then packages serverless.yml with the open-source Serverless Framework CLI (osls),
 * offline: no AWS login, no credentials, no telemetry, no dashboard. Output: `.serverless/`
 * (the CloudFormation template and one zip per function); the bundles are in `.build/aws/`.
 * Arguments after `--` go to `sls package`, e.g.
 * `npm run package:aws -- --stage prod --param "workerModel=fraud"`.
 *
 * Each bundle is one self-contained ESM file. What it must not contain, and is checked here:
 * onnxruntime-node or any native addon (the API and the scaler never run a model; an addon
 * built for this machine would not load on Lambda anyway).
 *
 * Like every production role, a function runs compiled JavaScript; these bundles differ from
 * `npm run build`'s dist/ (scripts/build.mjs) in carrying their packages inside, as a zip must.
 * The two share the build's target and its table of thread entries.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';
import { errorMessage } from '../infra/kernel/errors.ts';
import { ENTRIES as BUILD_ENTRIES, TARGET, THREAD_ENTRIES as THREAD_BOOTSTRAPS } from './build.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const BUILD_DIR = path.join(ROOT, '.build', 'aws');

/** Function name → entry file. serverless.yml's handlers point at `.build/aws/<name>/index.<export>`. */
export const ENTRIES: Record<string, string> = {
  api: 'api/lambda.ts',
  scaler: 'infra/scaler/lambda.ts',
};

/**
 * Left out of the bundles: msgpackr-extract, an optional native speed-up that msgpackr (BullMQ)
 * does without when it is absent. The AWS SDK is bundled on purpose: the Lambda runtime's copy
 * changes under us.
 */
export const EXTERNAL = ['msgpackr-extract'];

/**
 * The Kubernetes client serves POOL_PROVIDER=kubernetes only, never a Lambda, and is large. A
 * stub stands in: the names the code imports exist (esbuild fails the build if one is missing)
 * and throw when used. Not `external`: esbuild hoists a lazily imported module's imports to the
 * bundle's top, so an external would have to be present at every cold start.
 */
const KUBERNETES_STUB_EXPORTS = ['ApiException', 'AppsV1Api', 'CoreV1Api', 'KubeConfig', 'PatchStrategy', 'setHeaderOptions'];
const stubKubernetes: Plugin = {
  name: 'stub-kubernetes-client',
  setup(b) {
    b.onResolve({ filter: /^@kubernetes\/client-node$/ }, () => ({ path: 'kubernetes-client-stub', namespace: 'stub' }));
    b.onLoad({ filter: /.*/, namespace: 'stub' }, () => ({
      contents: [
        "const unavailable = () => { throw new Error('POOL_PROVIDER=kubernetes is not available in this Lambda bundle'); };",
        ...KUBERNETES_STUB_EXPORTS.map((n) => `export const ${n} = unavailable;`),
      ].join('\n'),
      loader: 'js',
    }));
  },
};

/**
 * Files code reads at run time from beside itself, copied next to the bundle so the same
 * relative paths resolve there: the operator dashboard's page and assets (`new URL('./assets/…',
 * import.meta.url)` in api/dashboard/page.ts) and uPlot's browser build (`require.resolve(
 * 'uplot/dist/…')`). A path that moves fails the copy, and test/deploy-aws.test.ts runs the
 * bundle alone to catch what is missing.
 */
export const RUNTIME_FILES: Record<string, Array<[from: string, to: string]>> = {
  api: [
    ['api/dashboard/assets', 'assets'],
    ['node_modules/uplot/package.json', 'node_modules/uplot/package.json'],
    ['node_modules/uplot/dist/uPlot.iife.min.js', 'node_modules/uplot/dist/uPlot.iife.min.js'],
    ['node_modules/uplot/dist/uPlot.min.css', 'node_modules/uplot/dist/uPlot.min.css'],
  ],
};

/**
 * Worker threads a function starts from a file beside its code (`new Worker(new URL('./x.mjs',
 * import.meta.url))`): each is bundled on its own, from the entry the build compiles in place of
 * that bootstrap (scripts/build.mjs THREAD_ENTRIES), under the name the code asks for, beside the
 * function's index.mjs, so the same relative URL resolves in the zip. There it is plain JS; in
 * the source tree the .mjs registers tsx first. The API's: the dashboard simulation's replay
 * thread (infra/simulator/bounded-replay.ts), which keeps a replay off the event loop.
 */
export const THREAD_ENTRIES: Record<string, Array<[entry: string, file: string]>> = {
  api: [threadEntry('infra/simulator/sweep-thread.mjs')],
};

/** A thread bootstrap's compiled entry and the file name the code asks for. */
function threadEntry(bootstrap: string): [entry: string, file: string] {
  const name = THREAD_BOOTSTRAPS[bootstrap];
  const entry = name === undefined ? undefined : BUILD_ENTRIES[name];
  if (entry === undefined) throw new Error(`scripts/build.mjs compiles no entry for the thread bootstrap ${bootstrap}`);
  return [entry, path.basename(bootstrap)];
}

/** Inputs a Lambda bundle must never contain. */
const FORBIDDEN = [/node_modules\/onnxruntime-(node|common)\//, /\.node$/];

/**
 * Some modules load CommonJS through `createRequire(import.meta.url)` (onnx-proto, package.json).
 * esbuild cannot see through that call, and in a Lambda zip there is no node_modules to resolve
 * from at run time; this plugin turns it into a plain `require`, which esbuild bundles.
 */
const bundleCreateRequire: Plugin = {
  name: 'bundle-create-require',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8');
      if (!source.includes('createRequire(import.meta.url)')) return undefined;
      const contents = source
        .replace(/^const require = createRequire\(import\.meta\.url\);$/m, '')
        .replaceAll('createRequire(import.meta.url)(', 'require(');
      return { contents, loader: 'ts' };
    });
  },
};

export interface Bundle {
  outfile: string;
  /** Every file esbuild read into it, relative to the repository. */
  inputs: string[];
}

/** Bundles every entry; returns each bundle's path and the inputs esbuild read for it. */
export async function bundleLambdas(): Promise<Record<string, Bundle>> {
  rmSync(BUILD_DIR, { recursive: true, force: true });
  const results: Record<string, Bundle> = {};
  const bundle = (entry: string, outfile: string) =>
    build({
      absWorkingDir: ROOT,
      entryPoints: [entry],
      outfile,
      bundle: true,
      platform: 'node',
      target: TARGET,
      format: 'esm',
      external: EXTERNAL,
      metafile: true,
      logLevel: 'warning',
      legalComments: 'none',
      // Smaller zips start faster; names stay, so stack traces and logs still read.
      minifyWhitespace: true,
      minifySyntax: true,
      // CommonJS dependencies call require(); an ESM bundle has none of its own.
      banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
      plugins: [bundleCreateRequire, stubKubernetes],
    });
  for (const [name, entry] of Object.entries(ENTRIES)) {
    const outfile = path.join(BUILD_DIR, name, 'index.mjs');
    const result = await bundle(entry, outfile);
    const threads = await Promise.all((THREAD_ENTRIES[name] ?? []).map(([from, file]) => bundle(from, path.join(BUILD_DIR, name, file))));
    // Beside the function's folder, so it stays out of the zip: what went in, for review and tests.
    writeFileSync(path.join(BUILD_DIR, `${name}.meta.json`), JSON.stringify(result.metafile));
    const inputs = [...new Set([result, ...threads].flatMap((r) => Object.keys(r.metafile.inputs)))];
    const forbidden = inputs.filter((i) => FORBIDDEN.some((re) => re.test(i)));
    if (forbidden.length > 0) throw new Error(`the ${name} bundle must not contain ${forbidden.join(', ')}`);
    for (const [from, to] of RUNTIME_FILES[name] ?? []) {
      cpSync(path.join(ROOT, from), path.join(BUILD_DIR, name, to), { recursive: true });
    }
    results[name] = { outfile, inputs };
  }
  return results;
}

/** `sls package` with `args` (e.g. `--package DIR`, `--param k=v`), on bundles already built. */
export function packageService(args: string[], baseEnv: NodeJS.ProcessEnv = process.env): void {
  const sls = path.join(ROOT, 'node_modules', 'osls', 'bin', 'serverless.js');
  const env = {
    ...baseEnv,
    SLS_TELEMETRY_DISABLED: '1',
    SLS_TRACKING_DISABLED: '1',
    SLS_NOTIFICATIONS_MODE: 'off',
    SLS_DEPRECATION_DISABLE: '*',
    SLS_INTERACTIVE_SETUP_DISABLE: '1',
    // Packaging reads no account: a region is all the AWS provider needs.
    AWS_REGION: baseEnv.AWS_REGION ?? 'us-east-1',
  };
  const run = spawnSync(process.execPath, [sls, 'package', ...args], { cwd: ROOT, env, stdio: 'inherit' });
  if (run.status !== 0) throw new Error(`sls package exited with ${run.status ?? run.signal}`);
}

async function main(): Promise<void> {
  const args = process.argv.slice(2).filter((a) => a !== '--');
  const bundles = await bundleLambdas();
  for (const [name, b] of Object.entries(bundles)) {
    process.stdout.write(`bundled ${name}: ${path.relative(ROOT, b.outfile)} (${b.inputs.length} inputs)\n`);
  }
  packageService(args);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    process.stderr.write(`package:aws failed: ${errorMessage(err)}\n`);
    process.exit(1);
  });
}
