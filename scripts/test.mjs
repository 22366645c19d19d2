#!/usr/bin/env node
// `npm test`: everything CI checks, in the order a failure is cheapest to read.
//   1. redis-server is present (installed with apt-get when missing and we are root), and so are
//      Debian's chromium for the dashboard's browser tests and curl for the getting-started
//      walkthrough (same rule; without them those tests skip, saying why)
//   2. typecheck (tsc -p .)
//   3. layering (scripts/check-layers.mjs)
//   4. lint and formatting (biome ci: reports, never rewrites)
//   5. vitest run, with any extra arguments passed through: `npm test -- scripts/dev`
// Every step runs even when an earlier one fails, so one CI run shows every problem; the exit
// code is the first non-zero one.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { register } from 'tsx/esm/api';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
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

async function ensureRedis() {
  // The same code `warmpool dev` uses, loaded through tsx: no second copy of the install logic.
  const unregister = register();
  try {
    const { ensureRedisServer } = await import('./dev/redis-server.ts');
    const binary = await ensureRedisServer({ install: 'auto', log: (line) => console.log(line) });
    console.log(`redis-server: ${binary}`);
    return 0;
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    return 1;
  } finally {
    await unregister();
  }
}

/**
 * A Debian package some tests drive: chromium for the dashboard's browser tests, curl for the
 * getting-started walkthrough (docs/GETTING-STARTED.md's commands, run as written). Installed
 * like redis-server, or the reason those tests will skip is said here.
 */
async function ensurePackage(binary, pkg, purpose) {
  if (existsSync(binary)) {
    console.log(`${pkg}: ${binary}`);
    return 0;
  }
  const isRoot = process.getuid?.() === 0;
  if (!isRoot || !existsSync('/usr/bin/apt-get')) {
    const why = isRoot ? 'there is no apt-get here' : 'installing needs root';
    console.log(`${pkg}: ${binary} is missing and ${why}: ${purpose} will be skipped (apt-get install ${pkg})`);
    return 0;
  }
  console.log(`${pkg}: installing with apt-get…`);
  process.env.DEBIAN_FRONTEND ??= 'noninteractive';
  // Wait for another apt (e.g. the redis-server install) rather than failing on its lock.
  const lock = ['-o', 'DPkg::Lock::Timeout=300'];
  const update = await run('apt-get', [...lock, 'update']);
  const code = update === 0 ? await run('apt-get', [...lock, 'install', '-y', '--no-install-recommends', pkg]) : update;
  if (code === 0 && existsSync(binary)) return 0;
  console.error(`${pkg}: apt-get install ${pkg} failed (exit ${code}): ${purpose} would be skipped`);
  return code || 1;
}

const steps = [
  ['redis-server', ensureRedis],
  ['chromium (dashboard browser tests)', () => ensurePackage('/usr/bin/chromium', 'chromium', 'the dashboard browser tests')],
  ['curl (the getting-started walkthrough)', () => ensurePackage('/usr/bin/curl', 'curl', 'the getting-started walkthrough test')],
  ['typecheck: tsc -p .', () => run(bin('tsc'), ['-p', '.'])],
  ['layering: scripts/check-layers.mjs', () => run(process.execPath, [path.join(root, 'scripts', 'check-layers.mjs')])],
  ['lint and format: biome ci', () => run(bin('biome'), ['ci', '.'])],
  ['tests: vitest run', () => run(bin('vitest'), ['run', ...process.argv.slice(2)])],
];

const results = [];
for (const [index, [title, step]] of steps.entries()) {
  console.log(`\n=== [${index + 1}/${steps.length}] ${title}`);
  results.push([title, await step()]);
}

console.log('\n=== summary');
for (const [title, code] of results) console.log(`${code === 0 ? 'ok  ' : 'FAIL'} ${title}${code === 0 ? '' : ` (exit ${code})`}`);
process.exitCode = results.find(([, code]) => code !== 0)?.[1] ?? 0;
