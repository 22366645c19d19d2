#!/usr/bin/env node
// `npm test`: everything CI checks, in the order a failure is cheapest to read.
//   0. (in the background from the start) the system packages the tests need: redis-server,
//      Debian's chromium for the dashboard's browser tests and curl for the getting-started
//      walkthrough, installed with apt-get when missing and we are root (without them those
//      tests skip, saying why)
//   1. typecheck (tsc -p .)
//   2. layering (scripts/check-layers.mjs)
//   3. lint and formatting (biome ci: reports, never rewrites)
//   4. the packages of step 0 are there (waits for their install), redis-server found
//   5. vitest run, with any extra arguments passed through: `npm test -- scripts/dev`
// `--full` (`npm run test:full`) runs the long suites at full size (test/support/test-scale.ts):
// every chaos fault on both topologies, every round; `npm test` runs their short forms.
// Every step runs even when an earlier one fails, so one CI run shows every problem; the exit
// code is the first non-zero one.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { register } from 'tsx/esm/api';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// The code `warmpool dev` uses to find and install redis-server, loaded through tsx: no second copy.
const unregister = register();
const { ensureRedisServer, findRedisServer } = await import('./dev/redis-server.ts');
const bin = (name) => path.join(root, 'node_modules', '.bin', name);

/** Runs a command in the repository root with inherited stdio; resolves with its exit code. */
function run(command, args) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: root, stdio: 'inherit' });
    child.once('error', (err) => {
      console.error(`${command}: ${err.message}`);
      resolve(127);
    });
    child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
  });
}

/**
 * Debian packages some steps need: redis-server for every integration test, chromium for the
 * dashboard's browser tests, curl for the getting-started walkthrough (docs/GETTING-STARTED.md's
 * commands, run as written). The missing ones are installed with one `apt-get update` and one
 * `apt-get install`, started at once and run beside the static checks (they need the network and
 * the disk, the checks the CPU); without root or apt-get the browser and walkthrough tests skip,
 * saying why, and redis-server's own check below says how to install it.
 */
const PACKAGES = [
  // Found where `warmpool dev` looks for it (PATH, then the system folders), not only in /usr/bin.
  { pkg: 'redis-server', binary: '/usr/bin/redis-server', find: findRedisServer, purpose: 'every integration test' },
  { pkg: 'chromium', binary: '/usr/bin/chromium', purpose: 'the dashboard browser tests' },
  { pkg: 'curl', binary: '/usr/bin/curl', purpose: 'the getting-started walkthrough test' },
];

/** Whether a package's program is there: its own finder's answer, else its binary's path. */
async function present({ binary, find }) {
  return find ? (await find()) !== null : existsSync(binary);
}

/** Runs a command with its output kept, not shown: resolves with its exit code and that output. */
function runCaptured(command, args) {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.once('error', (err) => resolve({ code: 127, output: `${command}: ${err.message}` }));
    child.once('exit', (code, signal) => resolve({ code: code ?? (signal ? 128 : 1), output }));
  });
}

/** The packages of `packages` whose program is not there. */
async function missingOf(packages) {
  const there = await Promise.all(packages.map(present));
  return packages.filter((_, i) => !there[i]);
}

/** Starts installing the missing packages; resolves with the lines to print and an exit code. */
async function installPackages() {
  const missing = await missingOf(PACKAGES);
  // redis-server's own line comes from ensureRedis(), which finds it wherever it is.
  const lines = PACKAGES.filter((p) => !missing.includes(p) && !p.find).map(({ pkg, binary }) => `${pkg}: ${binary}`);
  if (missing.length === 0) return { code: 0, lines };
  const names = missing.map(({ pkg }) => pkg);
  const isRoot = process.getuid?.() === 0;
  if (!isRoot || !existsSync('/usr/bin/apt-get')) {
    const why = isRoot ? 'there is no apt-get here' : 'installing needs root';
    for (const { pkg, binary, purpose } of missing)
      lines.push(`${pkg}: ${binary} is missing and ${why}: ${purpose} will be skipped (apt-get install ${pkg})`);
    return { code: 0, lines };
  }
  const started = Date.now();
  // Wait for another apt (unattended upgrades, a second test run) rather than failing on its lock.
  const lock = ['-o', 'DPkg::Lock::Timeout=300'];
  let result = await runCaptured('apt-get', [...lock, 'update', '-qq']);
  if (result.code === 0) result = await runCaptured('apt-get', [...lock, 'install', '-y', '-qq', '--no-install-recommends', ...names]);
  const failed = await missingOf(missing);
  if (result.code === 0 && failed.length === 0) {
    lines.push(`installed with apt-get in ${Math.round((Date.now() - started) / 1000)} s: ${names.join(', ')}`);
    return { code: 0, lines };
  }
  lines.push(result.output.trimEnd());
  for (const { pkg, purpose } of failed)
    lines.push(`${pkg}: apt-get install ${pkg} failed (exit ${result.code}): ${purpose} would be skipped`);
  return { code: result.code || 1, lines };
}

async function ensureRedis() {
  // Finds what the step above installed, or installs redis-server itself where that step could not.
  try {
    const binary = await ensureRedisServer({ install: 'auto', log: (line) => console.log(line) });
    console.log(`redis-server: ${binary}`);
    return 0;
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    return 1;
  }
}

/**
 * Where a failing long scenario (the chaos suites, test/support/chaos-context.ts) writes its
 * violations in a line each: printed again after the summary, so that the end of the output,
 * which is all a CI log may keep, says what broke and not only where.
 */
const failuresFile = path.join(os.tmpdir(), `warmpool-test-failures-${process.pid}.log`);
process.env.WARMPOOL_TEST_FAILURES_FILE = failuresFile;

/** The lines of the failures file (at most 20, each at most 400 characters); none when there is none. */
function scenarioFailures() {
  if (!existsSync(failuresFile)) return [];
  const lines = readFileSync(failuresFile, 'utf8').split('\n').filter(Boolean);
  rmSync(failuresFile, { force: true });
  return lines.slice(0, 20).map((line) => (line.length > 400 ? `${line.slice(0, 400)}…` : line));
}

/**
 * Vitest's JSON report (beside its usual output), so that each failed test's name and the head
 * of its error are printed again after the summary, for the same reason as the scenarios above.
 */
const reportFile = path.join(os.tmpdir(), `warmpool-test-report-${process.pid}.json`);

/** Failed tests from the JSON report: `file › name: error` with the error's first lines, ANSI stripped. */
function testFailures() {
  if (!existsSync(reportFile)) return [];
  let report;
  try {
    report = JSON.parse(readFileSync(reportFile, 'utf8'));
  } catch {
    return [];
  } finally {
    rmSync(reportFile, { force: true });
  }
  const plain = (text) => stripVTControlCharacters(String(text));
  const lines = [];
  for (const file of report.testResults ?? []) {
    const where = path.relative(root, file.name ?? '');
    const failed = (file.assertionResults ?? []).filter((t) => t.status === 'failed');
    if (failed.length === 0 && file.status === 'failed' && file.message)
      lines.push(`${where}: ${plain(file.message).split('\n').slice(0, 6).join('\n  ')}`);
    for (const t of failed) {
      // The message and the first frame in our code; node_modules frames say nothing.
      const all = plain(t.failureMessages?.[0] ?? '')
        .split('\n')
        .filter(Boolean);
      const frame = all.find((l) => /^\s+at /.test(l) && !l.includes('node_modules'));
      const message = all.filter((l) => !/^\s+at /.test(l)).slice(0, 6);
      const head = [...message, ...(frame ? [frame.trim()] : [])].join('\n  ');
      lines.push(`${where} › ${t.fullName}:\n  ${head.length > 1200 ? `${head.slice(0, 1200)}…` : head}`);
    }
  }
  return lines.slice(0, 10);
}

const args = process.argv.slice(2);
if (args.includes('--full')) process.env.WARMPOOL_TEST_FULL = '1';
const vitestArgs = args.filter((a) => a !== '--full');
// Our reporters unless the caller chose its own.
const reporters = vitestArgs.some((a) => a.startsWith('--reporter'))
  ? []
  : ['--reporter=default', '--reporter=json', `--outputFile.json=${reportFile}`];
const installing = installPackages();
const steps = [
  ['typecheck: tsc -p .', () => run(bin('tsc'), ['-p', '.'])],
  ['layering: scripts/check-layers.mjs', () => run(process.execPath, [path.join(root, 'scripts', 'check-layers.mjs')])],
  ['lint and format: biome ci', () => run(bin('biome'), ['ci', '.'])],
  [
    'system packages: redis-server, chromium, curl (installed beside the steps above)',
    async () => {
      const { code, lines } = await installing;
      for (const line of lines) console.log(line);
      return code === 0 ? ensureRedis() : code;
    },
  ],
  ['tests: vitest run', () => run(bin('vitest'), ['run', ...reporters, ...vitestArgs])],
];

const results = [];
for (const [index, [title, step]] of steps.entries()) {
  console.log(`\n=== [${index + 1}/${steps.length}] ${title}`);
  const started = Date.now();
  const code = await step();
  results.push([title, code, Math.round((Date.now() - started) / 1000)]);
}

console.log('\n=== summary');
// Seconds per step (the package step: what its wait added after the static checks), so a slow
// run says where its time went.
for (const [title, code, seconds] of results) {
  console.log(`${code === 0 ? 'ok  ' : 'FAIL'} ${title}${code === 0 ? '' : ` (exit ${code})`} ${seconds} s`);
}
const failures = scenarioFailures();
if (failures.length > 0) {
  console.log('\n=== what the failed scenarios reported');
  for (const line of failures) console.log(line);
}
const failedTests = testFailures();
if (failedTests.length > 0) {
  console.log('\n=== the failed tests');
  for (const line of failedTests) console.log(line);
}
await unregister();
process.exitCode = results.find(([, code]) => code !== 0)?.[1] ?? 0;
