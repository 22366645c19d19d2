/**
 * `npm run build` and the CLI's use of it, on a copy of this checkout (so dist/ here is never
 * touched while other processes run it): the build emits every entry with its thread entries
 * working from dist/, bundles the packages it should and no other, its stamp tells fresh from
 * stale at the cost of a stat per input, and
 * bin/warmpool.mjs runs dist/ when fresh, rebuilds it first (saying so) when stale, and stops
 * with `npm run build` named when it cannot build.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import * as esbuild from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testServices } from '../test/support/services.ts';
import { buildDist, sourceRelativeUrls, staleReason } from './build.mjs';
import { buildMlpModel } from './fixtures/onnx-models.ts';

const REPO = path.resolve(import.meta.dirname, '..');
let root: string;

beforeAll(() => {
  root = mkdtempSync(path.join(testServices().tmpDir, 'build-'));
  for (const dir of ['api', 'infra', 'worker', 'scripts', 'bin']) {
    cpSync(path.join(REPO, dir), path.join(root, dir), { recursive: true, filter: (src) => !src.includes(`${path.sep}results`) });
  }
  for (const file of ['package.json', 'tsconfig.json']) cpSync(path.join(REPO, file), path.join(root, file));
  symlinkSync(path.join(REPO, 'node_modules'), path.join(root, 'node_modules'));
});

afterAll(() => {
  if (root) rmSync(root, { recursive: true, force: true });
});

const dist = (...p: string[]) => path.join(root, 'dist', ...p);

function cli(...args: string[]) {
  const run = spawnSync(process.execPath, [path.join(root, 'bin', 'warmpool.mjs'), ...args], { cwd: root, encoding: 'utf8' });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

/** Appends a comment to a source file; returns a function that puts the original back. */
function edit(file: string): () => void {
  const full = path.join(root, file);
  const before = readFileSync(full);
  writeFileSync(full, `${before}\n// edited\n`);
  return () => writeFileSync(full, before);
}

describe('the build', () => {
  it('is reported missing before the first build', () => {
    expect(staleReason(root)).toBe('dist/ has not been built');
  });

  it('emits the CLI and the thread entries, and stamps every input it read', async () => {
    const outputs = await buildDist({ root });
    for (const entry of ['cli.js', 'ort-thread.js', 'sweep-thread.js']) {
      expect(outputs).toContain(entry);
      expect(outputs).toContain(`${entry}.map`);
    }
    const stamp = JSON.parse(readFileSync(dist('build-stamp.json'), 'utf8')) as { inputs: Record<string, unknown> };
    for (const input of [
      'scripts/cli.ts',
      'worker/main.ts',
      'worker/engine/ort-thread.ts',
      'api/app.ts',
      'scripts/build.mjs',
      'tsconfig.json',
    ]) {
      expect(Object.keys(stamp.inputs)).toContain(input);
    }
    // Bundled packages by their package.json (an install that changes one changes its version).
    // (This copy's node_modules is a link to the checkout's: its inputs are named by where they lie.)
    const packages = Object.keys(stamp.inputs)
      .filter((i) => i.includes('node_modules/'))
      .map((i) => i.slice(i.lastIndexOf('node_modules/')));
    for (const p of packages) expect(p).toMatch(/^node_modules\/(@[^/]+\/)?[^/]+\/package\.json$/);
    for (const name of ['bullmq', 'ioredis', 'zod', '@aws-sdk/client-s3']) expect(packages).toContain(`node_modules/${name}/package.json`);
    for (const name of ['onnxruntime-node', 'pino', 'msgpackr']) expect(packages).not.toContain(`node_modules/${name}/package.json`);
    expect(staleReason(root)).toBeUndefined();
  });

  it('keeps import.meta.url pointing into the source tree, except for thread entries, which point at dist/', () => {
    const files = readdirSync(dist()).filter((f) => f.endsWith('.js'));
    const code = files.map((f) => readFileSync(dist(f), 'utf8')).join('\n');
    // Every use is rewritten to the source file's URL, or names a compiled thread entry.
    const uses = [...code.matchAll(/new URL\("([^"]+)", import\.meta\.url\)/g)].map((m) => m[1] ?? '');
    expect(uses).toContain('./ort-thread.js');
    expect(uses).toContain('./sweep-thread.js');
    expect(uses).toContain('../api/dashboard/page.ts');
    for (const use of uses) expect(use).toMatch(/^(\.\/(ort|sweep)-thread\.js|\.\.\/(api|infra|worker|scripts)\/.+\.ts)$/);
    // Besides those, once per file: the banner's createRequire, for the CommonJS packages bundled.
    expect(code.match(/__warmpoolCreateRequire\(import\.meta\.url\)/g)?.length).toBe(files.length);
    expect(code.match(/import\.meta\.url/g)?.length).toBe(uses.length + files.length);
    expect(code).not.toContain('thread-bootstrap.mjs');
    expect(code).not.toContain('sweep-thread.mjs');
  });

  it('is stale when a bundled package changes', () => {
    // A bundled package's package.json stands for it (npm rewrites it on install); a copy keeps the original intact.
    const stampFile = dist('build-stamp.json');
    const stamp = readFileSync(stampFile, 'utf8');
    const parsed = JSON.parse(stamp) as { inputs: Record<string, [number, number, string]> };
    try {
      const zod = Object.keys(parsed.inputs).find((i) => i.endsWith('node_modules/zod/package.json'));
      expect(zod).toBeDefined();
      writeFileSync(stampFile, JSON.stringify({ ...parsed, inputs: { ...parsed.inputs, [zod ?? '']: [0, 1, 'x'] } }));
      expect(staleReason(root)).toBe(`${zod} changed`);
    } finally {
      writeFileSync(stampFile, stamp);
    }
    expect(staleReason(root)).toBeUndefined();
  });

  it('leaves the plain-JavaScript modules of the tree out of the bundle, imported from where they lie', () => {
    const code = readdirSync(dist())
      .filter((f) => f.endsWith('.js'))
      .map((f) => readFileSync(dist(f), 'utf8'))
      .join('\n');
    // The bench builds a stale dist/ before timing a cold start: it imports the build script itself.
    expect(code).toMatch(/from "\.\.\/scripts\/build\.mjs"/);
    expect(code).not.toContain('sources-as-read');
  });

  it('rewrites import.meta.url expressions only, never the same characters in a string', async () => {
    const source = [
      "const said: string = 'import.meta.url, in a string';",
      "export const thread = new URL('./thread-bootstrap.mjs', import.meta.url);",
      "export const asset = new URL('./assets/page.css', import.meta.url);",
      'export const here = import.meta.url;',
      'export { said };',
    ].join('\n');
    const code = await sourceRelativeUrls(esbuild, source, 'worker/engine/x.ts', 'ts');
    await esbuild.stop();
    expect(code).toContain('"import.meta.url, in a string"');
    expect(code).toContain('const thread = new URL("./ort-thread.js", import.meta.url);');
    expect(code).toContain('const asset = new URL("./assets/page.css", new URL("../worker/engine/x.ts", import.meta.url).href);');
    expect(code).toContain('const here = new URL("../worker/engine/x.ts", import.meta.url).href;');
  });

  it('runs the inference thread from dist/: it loads a model with ONNX Runtime', async () => {
    const model = path.join(root, 'mlp.onnx');
    writeFileSync(model, buildMlpModel());
    const thread = new Worker(dist('ort-thread.js'), { workerData: { logLevel: 'fatal' } });
    const exited = new Promise<number>((resolve) => thread.once('exit', resolve));
    const answer = new Promise<{ id: number; ok: boolean; info?: { inputNames: string[] } }>((resolve, reject) => {
      thread.once('message', resolve);
      thread.once('error', reject);
    });
    thread.postMessage({ id: 1, op: 'load', modelPath: model, options: { executionProviders: ['cpu'], intraOpThreads: 1 } });
    expect(await answer).toMatchObject({ id: 1, ok: true, info: { inputNames: ['features'] } });
    thread.postMessage({ id: 2, op: 'close' });
    expect(await exited).toBe(0);
  });

  it('runs the simulator sweep thread from dist/', async () => {
    const thread = new Worker(dist('sweep-thread.js'), { workerData: { trace: { arrivals: [] } } });
    const ready = await new Promise<unknown>((resolve, reject) => {
      thread.once('message', resolve);
      thread.once('error', reject);
    });
    expect(ready).toMatchObject({ ready: true });
    await thread.terminate();
  });

  it('is stale when a source changes, naming it; not when a file is only touched', () => {
    const file = path.join(root, 'worker', 'main.ts');
    const later = new Date(Date.now() + 60_000);
    utimesSync(file, later, later);
    expect(staleReason(root)).toBeUndefined();
    const restore = edit('worker/main.ts');
    try {
      expect(staleReason(root)).toBe('worker/main.ts changed');
    } finally {
      restore();
    }
    expect(staleReason(root)).toBeUndefined();
  });

  it('is stale when the build script changes, an input is gone, an output is missing, or the stamp is foreign', () => {
    const restore = edit('scripts/build.mjs');
    expect(staleReason(root)).toBe('scripts/build.mjs changed');
    restore();
    const stamp = readFileSync(dist('build-stamp.json'), 'utf8');
    try {
      const parsed = JSON.parse(stamp) as { version: number; inputs: Record<string, unknown> };
      writeFileSync(dist('build-stamp.json'), JSON.stringify({ ...parsed, inputs: { ...parsed.inputs, 'worker/gone.ts': [0, 0, ''] } }));
      expect(staleReason(root)).toBe('worker/gone.ts is gone');
      writeFileSync(dist('build-stamp.json'), JSON.stringify({ ...parsed, version: 0 }));
      expect(staleReason(root)).toBe('dist/ was built by another version of the build');
      writeFileSync(dist('build-stamp.json'), stamp);
      const cliJs = readFileSync(dist('cli.js'));
      rmSync(dist('cli.js'));
      expect(staleReason(root)).toBe('dist/cli.js is missing');
      writeFileSync(dist('cli.js'), cliJs);
    } finally {
      writeFileSync(dist('build-stamp.json'), stamp);
    }
    expect(staleReason(root)).toBeUndefined();
  });
});

describe('bin/warmpool.mjs', () => {
  it('runs dist/ as it is when fresh', () => {
    const run = cli('--help');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('warmpool dev');
    expect(run.stderr).toBe('');
  });

  it('rebuilds a stale dist/ first, in one line on stderr, and runs the new code', () => {
    const restore = edit('scripts/commands/cli-options.ts');
    try {
      // A change the output shows: the usage text itself.
      const cliTs = path.join(root, 'scripts', 'commands', 'cli-options.ts');
      writeFileSync(cliTs, readFileSync(cliTs, 'utf8').replace('the whole stack on this machine', 'the whole stack, rebuilt'));
      const run = cli('--help');
      expect(run.code).toBe(0);
      expect(run.stderr).toBe('warmpool: scripts/commands/cli-options.ts changed; building dist/ first (npm run build)\n');
      expect(run.stdout).toContain('the whole stack, rebuilt');
      expect(cli('--help').stderr).toBe('');
    } finally {
      restore();
    }
    // Putting the file back is a change too.
    expect(cli('--help').stderr).toBe('warmpool: scripts/commands/cli-options.ts changed; building dist/ first (npm run build)\n');
  });

  it('stops, naming `npm run build`, when dist/ is stale and esbuild is not installed', () => {
    const restore = edit('worker/main.ts');
    // node_modules without esbuild, as `npm ci --omit=dev` leaves it.
    const modules = path.join(root, 'node_modules');
    rmSync(modules);
    mkdirSync(modules);
    for (const name of readdirSync(path.join(REPO, 'node_modules'))) {
      if (name !== 'esbuild') symlinkSync(path.join(REPO, 'node_modules', name), path.join(modules, name));
    }
    try {
      const run = cli('--help');
      expect(run.code).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toBe(
        'warmpool: worker/main.ts changed, and esbuild (a dev dependency) is not installed to build it: run `npm run build`\n',
      );
    } finally {
      restore();
      rmSync(modules, { recursive: true });
      symlinkSync(path.join(REPO, 'node_modules'), modules);
    }
  });

  it('runs the sources through tsx, saying why, where they do not compile', () => {
    const file = path.join(root, 'worker', 'main.ts');
    const before = readFileSync(file);
    writeFileSync(file, `${before}\nexport const broken = ;\n`);
    try {
      const run = cli('--help');
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('warmpool dev');
      const lines = run.stderr.trimEnd().split('\n');
      expect(lines).toHaveLength(2);
      expect(lines[0]).toBe('warmpool: worker/main.ts changed; building dist/ first (npm run build)');
      expect(lines[1]).toMatch(
        /^warmpool: building dist\/ failed \(worker\/main\.ts:\d+:\d+: ERROR: .+\); running the sources through tsx instead$/,
      );
    } finally {
      writeFileSync(file, before);
    }
  });
});
