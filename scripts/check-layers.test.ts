// Runs the layering check as `npm test` does, on small trees written for each case.
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'check-layers.mjs');
const roots: string[] = [];

async function tree(files: Record<string, string>): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'check-layers-'));
  roots.push(root);
  for (const [file, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, file)), { recursive: true });
    await writeFile(path.join(root, file), text);
  }
  return root;
}

async function check(root: string): Promise<{ code: number; stderr: string }> {
  try {
    await promisify(execFile)(process.execPath, [script, root]);
    return { code: 0, stderr: '' };
  } catch (err) {
    const failure = err as { code: number; stderr: string };
    return { code: failure.code, stderr: failure.stderr };
  }
}

afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })));
});

describe('check-layers', () => {
  it('accepts api/ and worker/ importing infra/, packages and their own files', async () => {
    const root = await tree({
      'infra/kernel/clock.ts': `export const now = () => 0;\n`,
      'api/app.ts': `import { now } from '../infra/kernel/clock.ts';\nimport { Hono } from 'hono';\nimport { x } from './routes/x.ts';\n`,
      'worker/main.ts': `import type { Clock } from '../infra/kernel/clock.ts';\nexport * from './engine/engine.ts';\n`,
      // Prose that merely mentions the other layer is not an import.
      'infra/notes.ts': `/**\n * import { y } from '../worker/main.ts'\n */\n// see import('../api/app.ts')\nexport {};\n`,
    });
    expect(await check(root)).toEqual({ code: 0, stderr: '' });
  });

  it('reports every cross-layer import form with file, line and rule', async () => {
    const root = await tree({
      'api/routes/jobs.ts': `import { a } from '../../infra/a.ts';\nimport {\n  run,\n} from '../../worker/runner.ts';\n`,
      'worker/intake.ts': `export { route } from '../api/route.ts';\n`,
      'scripts/dev/stack.ts': `const m = await import('../../worker/main.ts');\nimport type { App } from '../../api/app.ts';\n`,
      'infra/side.mjs': `import '../api/side-effect.js';\n`,
    });
    const { code, stderr } = await check(root);
    expect(code).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines).toEqual(
      expect.arrayContaining([
        "api/routes/jobs.ts:4 imports '../../worker/runner.ts': api/ must not import from worker/",
        "worker/intake.ts:1 imports '../api/route.ts': worker/ must not import from api/",
        "scripts/dev/stack.ts:1 imports '../../worker/main.ts': infra/ must not import from worker/",
        "scripts/dev/stack.ts:2 imports '../../api/app.ts': infra/ must not import from api/",
        "infra/side.mjs:1 imports '../api/side-effect.js': infra/ must not import from api/",
      ]),
    );
    expect(lines).toHaveLength(6); // five violations and the summary line
  });
});
