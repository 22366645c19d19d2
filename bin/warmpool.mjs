#!/usr/bin/env node
// The `warmpool` CLI. It runs the compiled JavaScript in dist/ (`npm run build`, scripts/build.mjs),
// not the TypeScript through a loader: a worker's boot is what a scale-up waits for, and the
// loader was most of it. dist/ must be what the sources say. When it is missing or stale (its
// stamp disagrees with a source file the build read) it is rebuilt first, with one line on
// stderr saying so; where esbuild is not installed (npm ci --omit=dev) the CLI stops and names
// `npm run build`. It never runs old files. The check costs a stat per source file.
//
// A checkout whose sources do not compile (an edit in progress anywhere in the tree fails the
// one bundle) runs its sources through tsx instead, as before the build existed, saying so:
// a half-edited dispatcher must not stop a worker from starting on a development machine. An
// image cannot get here: its build runs `npm run build`, which fails on the same error.
//
// Stack traces name dist/ chunks; NODE_OPTIONS=--enable-source-maps maps them to the TypeScript
// (the build writes the maps), at ~40 ms of every start, which is why it is not the default.
import { buildDist, staleReason } from '../scripts/build.mjs';

// The AWS SDK warns at every start that releases after January 2027 need Node 22; warmpool
// supports Node 20+, and the README says so. Set the variable to 'false' to see it again.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const stale = staleReason();
const cli = stale ? await rebuilt(stale) : await import('../dist/cli.js');
process.exitCode = await cli.cliMain(process.argv.slice(2));

/** dist/ rebuilt and loaded; where the sources do not compile, the sources through tsx. */
async function rebuilt(stale) {
  if (!canBuild()) {
    process.stderr.write(`warmpool: ${stale}, and esbuild (a dev dependency) is not installed to build it: run \`npm run build\`\n`);
    process.exit(2);
  }
  process.stderr.write(`warmpool: ${stale}; building dist/ first (npm run build)\n`);
  try {
    await buildDist({ quiet: true });
  } catch (err) {
    const lines = err instanceof Error ? err.message.split('\n') : [String(err)];
    const why = (lines.find((l) => l.includes('ERROR')) ?? lines[0] ?? '').trim();
    process.stderr.write(`warmpool: building dist/ failed (${why}); running the sources through tsx instead\n`);
    // Worker threads register tsx themselves (worker/engine/thread-bootstrap.mjs).
    const { register } = await import('tsx/esm/api');
    register();
    return import('../scripts/cli.ts');
  }
  return import('../dist/cli.js');
}

function canBuild() {
  try {
    import.meta.resolve('esbuild');
    return true;
  } catch {
    return false;
  }
}
