#!/usr/bin/env node
// Layering check (DESIGN.md §1): api/ and worker/ import from infra/, never from each other;
// infra/ imports neither. Plain JS so `npm test` can run it before anything is compiled.
//
// Usage: node scripts/check-layers.mjs [ROOT]   (ROOT defaults to the repository root)
// Exits 1 and prints one line per offending import, 0 when the layers are clean.
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

/** The top-level folder a specifier resolves to, or null for packages and node: builtins. */
function targetLayer(root, fromFile, specifier) {
  if (!specifier.startsWith('.') && !path.isAbsolute(specifier)) return null;
  const resolved = path.resolve(path.dirname(fromFile), specifier);
  const relative = path.relative(root, resolved);
  if (relative.startsWith('..') || path.isAbsolute(relative)) return null;
  return relative.split(path.sep)[0] ?? null;
}

async function* sourceFiles(dir) {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if (err.code === 'ENOENT') return;
    throw err;
  }
  for (const entry of entries) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(full);
    else if (entry.isFile() && SOURCE_FILE.test(entry.name) && !entry.name.endsWith('.d.ts')) yield full;
  }
}

/** Every forbidden import under ROOT's api/, worker/ and infra/. */
export async function findViolations(root) {
  const violations = [];
  for (const [layer, forbidden] of Object.entries(FORBIDDEN)) {
    for await (const file of sourceFiles(path.join(root, layer))) {
      const source = await readFile(file, 'utf8');
      for (const { specifier, line } of importSpecifiers(source)) {
        const target = targetLayer(root, file, specifier);
        if (target === null || !forbidden.includes(target)) continue;
        const where = `${path.relative(root, file)}:${line}`;
        violations.push(`${where} imports '${specifier}': ${layer}/ must not import from ${target}/`);
      }
    }
  }
  return violations;
}

async function main() {
  const defaultRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
  const root = path.resolve(process.argv[2] ?? defaultRoot);
  const violations = await findViolations(root);
  for (const v of violations) console.error(v);
  if (violations.length > 0) {
    console.error(`layering: ${violations.length} forbidden import(s) (see DESIGN.md §1)`);
    return 1;
  }
  console.log('layering: api/, worker/ and infra/ are clean');
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
