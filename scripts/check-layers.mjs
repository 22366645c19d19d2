#!/usr/bin/env node
// Layering check (DESIGN.md §1, ../shared/LAYOUT.md). Plain JS so `npm test` can run it before
// anything is compiled. Four rules, each printed with the file, line and specifier that breaks it:
//   1. layers: api/ and worker/ import from infra/, never from each other; infra/ imports neither.
//   2. tiers: inside infra/, a module imports only from its own tier folder or a lower tier
//      (TIERS below); every infra module lives in a tier folder.
//   3. surfaces: a folder of infra/ with an index.ts is a subsystem, entered from outside only
//      through that index.ts, or its main.ts when it is a process of its own (the scaler); tests
//      may reach inside: they test the parts.
//   4. cycles: no import cycle anywhere (api, worker, infra, scripts, test, bin), found by a
//      depth-first search over the same graph (bullmq runs `madge --circular` for the same reason).
//
// Usage: node scripts/check-layers.mjs [ROOT]   (ROOT defaults to the repository root)
// Exits 1 and prints one line per offence, 0 when the tree is clean.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** layer → layers it must not import from */
const FORBIDDEN = {
  api: ['worker'],
  worker: ['api'],
  infra: ['api', 'worker'],
};
const SOURCE_FILE = /\.(?:[cm]?ts|tsx|[cm]?js)$/;
/** Folders whose imports form the graph the cycle rule searches. */
const GRAPH_ROOTS = ['api', 'worker', 'infra', 'scripts', 'test', 'bin'];

/**
 * infra/'s tiers, lowest first (LAYOUT.md): a folder imports only from itself and from folders of
 * a lower rank. Folders of one rank do not import each other either: a shared piece they both need
 * belongs a tier lower.
 */
export const TIERS = [
  ['kernel'],
  ['contracts'],
  ['redis', 'registry'],
  ['fleet', 'deployments', 'queue', 'tabular'],
  ['telemetry', 'bulk', 'pool', 'canary'],
  ['scaler'],
  ['simulator'],
];
const TIER_RANK = new Map(TIERS.flatMap((folders, rank) => folders.map((folder) => [folder, rank])));
const isTestFile = (relative) => relative.startsWith(`test${path.sep}`) || /\.test\.[cm]?[jt]s$/.test(relative);

// Statement-level forms are anchored at a line start, so prose in comments does not match.
const SPECIFIER_PATTERNS = [
  /^[ \t]*import\s+(?:type\s+)?[^'";]*?\bfrom\s*(['"])([^'"\n]+)\1/gm, // import x from '…'
  /^[ \t]*export\s+(?:type\s+)?(?:\*|\{)[^'";]*?\bfrom\s*(['"])([^'"\n]+)\1/gm, // export … from '…'
  /^[ \t]*import\s*(['"])([^'"\n]+)\1/gm, // import '…'
  /^[ \t]*import\s+\w+\s*=\s*require\(\s*(['"])([^'"\n]+)\1\s*\)/gm, // import x = require('…')
  /(?<![\w$.])(?:import|require)\s*\(\s*(['"])([^'"\n]+)\1\s*\)/g, // import('…'), require('…')
];

/** Every module specifier in a source text, with its 1-based line. */
export function importSpecifiers(source) {
  const found = new Map();
  for (const pattern of SPECIFIER_PATTERNS) {
    for (const match of source.matchAll(pattern)) {
      const specifier = match[2];
      const offset = (match.index ?? 0) + match[0].lastIndexOf(specifier);
      if (isInLineComment(source, offset)) continue;
      found.set(offset, { specifier, line: source.slice(0, offset).split('\n').length });
    }
  }
  return [...found.entries()].sort(([a], [b]) => a - b).map(([, v]) => v);
}

function isInLineComment(source, offset) {
  const lineStart = source.lastIndexOf('\n', offset) + 1;
  const before = source.slice(lineStart, offset).trimStart();
  return before.startsWith('//') || before.startsWith('*') || before.startsWith('/*');
}

async function* sourceFiles(dir) {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (err.code === 'ENOENT') return;
    throw err;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)); // one order on every filesystem
  for (const entry of entries) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(full);
    else if (entry.isFile() && SOURCE_FILE.test(entry.name) && !entry.name.endsWith('.d.ts')) yield full;
  }
}

/** Every relative import of every source file under ROOT's GRAPH_ROOTS, resolved to a repository path. */
async function importGraph(root) {
  const graph = new Map(); // file → [{ target, specifier, line }]
  for (const top of GRAPH_ROOTS) {
    for await (const file of sourceFiles(path.join(root, top))) {
      const source = await readFile(file, 'utf8');
      const edges = [];
      for (const { specifier, line } of importSpecifiers(source)) {
        if (!specifier.startsWith('.') && !path.isAbsolute(specifier)) continue;
        const target = path.relative(root, path.resolve(path.dirname(file), specifier));
        if (target.startsWith('..') || path.isAbsolute(target)) continue;
        edges.push({ target, specifier, line });
      }
      graph.set(path.relative(root, file), edges);
    }
  }
  return graph;
}

/** Rule 1: the three layers. */
function layerViolations(graph) {
  const out = [];
  for (const [file, edges] of graph) {
    const layer = file.split(path.sep)[0];
    const forbidden = FORBIDDEN[layer];
    if (!forbidden) continue;
    for (const { target, specifier, line } of edges) {
      const to = target.split(path.sep)[0];
      if (forbidden.includes(to)) out.push(`${file}:${line} imports '${specifier}': ${layer}/ must not import from ${to}/`);
    }
  }
  return out;
}

/** Rule 2: tiers inside infra/ import only downwards. */
function tierViolations(graph) {
  const out = [];
  for (const [file, edges] of graph) {
    const [top, folder, ...rest] = file.split(path.sep);
    if (top !== 'infra') continue;
    if (rest.length === 0 || !TIER_RANK.has(folder)) {
      out.push(`${file}: lives outside infra/'s tier folders (${[...TIER_RANK.keys()].join(', ')})`);
      continue;
    }
    for (const { target, specifier, line } of edges) {
      const [targetTop, targetFolder] = target.split(path.sep);
      if (targetTop !== 'infra' || targetFolder === folder || !TIER_RANK.has(targetFolder)) continue;
      if (TIER_RANK.get(targetFolder) >= TIER_RANK.get(folder)) {
        const how = TIER_RANK.get(targetFolder) === TIER_RANK.get(folder) ? 'the same tier' : 'a higher tier';
        out.push(`${file}:${line} imports '${specifier}': infra/${folder}/ must not import from infra/${targetFolder}/ (${how})`);
      }
    }
  }
  return out;
}

/** Rule 3: a subsystem (an infra/ folder with an index.ts) is entered through its index.ts. */
function surfaceViolations(graph) {
  const subsystems = new Set(
    [...graph.keys()].filter((f) => /^infra\/[^/]+\/index\.[cm]?ts$/.test(f.split(path.sep).join('/'))).map((f) => path.dirname(f)),
  );
  const out = [];
  for (const [file, edges] of graph) {
    if (isTestFile(file)) continue;
    for (const { target, specifier, line } of edges) {
      const folder = target.split(path.sep).slice(0, 2).join(path.sep);
      if (!subsystems.has(folder) || file.startsWith(folder + path.sep)) continue;
      // index.ts is the surface; main.ts is a process entry (like api/main.ts), wired by the CLI and the dev stack.
      if (/^(?:index|main)\.[cm]?ts$/.test(path.relative(folder, target))) continue;
      out.push(`${file}:${line} imports '${specifier}': enter ${folder}/ through its index.ts`);
    }
  }
  return out;
}

/** Rule 4: every import cycle, each reported once as the path that closes it. */
export function findCycles(graph) {
  const cycles = [];
  const state = new Map(); // file → 'open' while on the DFS stack, 'done' after
  const stack = [];
  const visit = (file) => {
    state.set(file, 'open');
    stack.push(file);
    for (const { target } of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (state.get(target) === 'open') cycles.push([...stack.slice(stack.indexOf(target)), target]);
      else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return cycles;
}

/** Every offence under ROOT, one line each. */
export async function findViolations(root) {
  const graph = await importGraph(root);
  const cycles = findCycles(graph).map((cycle) => `import cycle: ${cycle.join(' -> ')}`);
  return [...layerViolations(graph), ...tierViolations(graph), ...surfaceViolations(graph), ...cycles];
}

async function main() {
  const defaultRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const root = path.resolve(process.argv[2] ?? defaultRoot);
  const violations = await findViolations(root);
  for (const v of violations) console.error(v);
  if (violations.length > 0) {
    console.error(`layering: ${violations.length} offence(s) (see ../shared/LAYOUT.md)`);
    return 1;
  }
  console.log('layering: layers, infra tiers, subsystem surfaces clean; no import cycles');
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
