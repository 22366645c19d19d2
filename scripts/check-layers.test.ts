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
      'infra/kernel/notes.ts': `/**\n * import { y } from '../worker/main.ts'\n */\n// see import('../api/app.ts')\nexport {};\n`,
    });
    expect(await check(root)).toEqual({ code: 0, stderr: '' });
  });

  it('reports every cross-layer import form with file, line and rule', async () => {
    const root = await tree({
      'api/routes/jobs.ts': `import { a } from '../../infra/a.ts';\nimport {\n  run,\n} from '../../worker/runner.ts';\n`,
      'worker/intake.ts': `export { route } from '../api/route.ts';\n`,
      'infra/pool/stack.ts': `const m = await import('../../worker/main.ts');\nimport type { App } from '../../api/app.ts';\n`,
      'infra/kernel/side.mjs': `import '../../api/side-effect.js';\n`,
    });
    const { code, stderr } = await check(root);
    expect(code).toBe(1);
    const lines = stderr.trim().split('\n');
    expect(lines).toEqual(
      expect.arrayContaining([
        "api/routes/jobs.ts:4 imports '../../worker/runner.ts': api/ must not import from worker/",
        "worker/intake.ts:1 imports '../api/route.ts': worker/ must not import from api/",
        "infra/pool/stack.ts:1 imports '../../worker/main.ts': infra/ must not import from worker/",
        "infra/pool/stack.ts:2 imports '../../api/app.ts': infra/ must not import from api/",
        "infra/kernel/side.mjs:1 imports '../../api/side-effect.js': infra/ must not import from api/",
      ]),
    );
    expect(lines).toHaveLength(6); // five violations and the summary line
  });

  it('accepts infra/ tiers importing downwards and subsystems entered through index.ts', async () => {
    const root = await tree({
      'infra/kernel/clock.ts': `export const now = () => 0;\n`,
      'infra/contracts/job.ts': `import { now } from '../kernel/clock.ts';\n`,
      'infra/queue/job-queue.ts': `import type { Job } from '../contracts/job.ts';\nimport { now } from '../kernel/clock.ts';\n`,
      'infra/scaler/index.ts': `export { decide } from './policy.ts';\n`,
      'infra/scaler/policy.ts': `import '../queue/job-queue.ts';\nexport const decide = () => 0;\n`,
      'infra/simulator/world.ts': `import { decide } from '../scaler/index.ts';\n`,
      'api/app.ts': `import { decide } from '../infra/scaler/index.ts';\n`,
      'infra/scaler/main.ts': `export const scalerMain = () => 0;\n`,
      'scripts/cli.ts': `const { scalerMain } = await import('../infra/scaler/main.ts');\n`,
      // Tests may reach inside a subsystem: they test its parts.
      'test/policy.test.ts': `import { decide } from '../infra/scaler/policy.ts';\n`,
      'infra/scaler/policy.test.ts': `import { decide } from './policy.ts';\n`,
    });
    expect(await check(root)).toEqual({ code: 0, stderr: '' });
  });

  it('reports a wrong-tier import, a sideways one, a file outside the tiers and a subsystem entered from the side', async () => {
    const root = await tree({
      'infra/kernel/config.ts': `import { isCluster } from '../redis/client.ts';\n`,
      'infra/redis/client.ts': `export const isCluster = () => false;\nimport '../registry/store.ts';\n`,
      'infra/registry/store.ts': `export {};\n`,
      'infra/loose.ts': `export {};\n`,
      'infra/scaler/index.ts': `export {};\n`,
      'infra/scaler/policy.ts': `export const decide = () => 0;\n`,
      'api/app.ts': `import { decide } from '../infra/scaler/policy.ts';\n`,
    });
    const { code, stderr } = await check(root);
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toEqual([
      "infra/kernel/config.ts:1 imports '../redis/client.ts': infra/kernel/ must not import from infra/redis/ (a higher tier)",
      "infra/loose.ts: lives outside infra/'s tier folders (kernel, contracts, redis, registry, fleet, deployments, queue, tabular, telemetry, bulk, pool, canary, scaler, simulator)",
      "infra/redis/client.ts:2 imports '../registry/store.ts': infra/redis/ must not import from infra/registry/ (the same tier)",
      "api/app.ts:1 imports '../infra/scaler/policy.ts': enter infra/scaler/ through its index.ts",
      'layering: 4 offence(s) (see ../shared/LAYOUT.md)',
    ]);
  });

  it('knows tabular/ as a tier beside queue/: codecs never reach up into bulk runs, the worker enters through its index.ts', async () => {
    const root = await tree({
      'infra/contracts/bulk.ts': `export {};\n`,
      'infra/tabular/index.ts': `export { readChunkRows } from './chunk-io.ts';\n`,
      'infra/tabular/chunk-io.ts': `import '../contracts/bulk.ts';\nimport '../bulk/index.ts';\nimport '../queue/chunk-queue.ts';\nexport const readChunkRows = () => 0;\n`,
      'infra/queue/chunk-queue.ts': `export {};\n`,
      'infra/bulk/index.ts': `export {};\n`,
      'worker/bulk-formats.ts': `import('../infra/tabular/index.ts');\nimport '../infra/tabular/chunk-io.ts';\n`,
    });
    const { code, stderr } = await check(root);
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toEqual([
      "infra/tabular/chunk-io.ts:2 imports '../bulk/index.ts': infra/tabular/ must not import from infra/bulk/ (a higher tier)",
      "infra/tabular/chunk-io.ts:3 imports '../queue/chunk-queue.ts': infra/tabular/ must not import from infra/queue/ (the same tier)",
      "worker/bulk-formats.ts:2 imports '../infra/tabular/chunk-io.ts': enter infra/tabular/ through its index.ts",
      'layering: 3 offence(s) (see ../shared/LAYOUT.md)',
    ]);
  });

  it('reports an import cycle anywhere, through static, type-only and dynamic imports', async () => {
    const root = await tree({
      'infra/contracts/job.ts': `import type { Bulk } from './bulk.ts';\n`,
      'infra/contracts/bulk.ts': `import type { Job } from './job.ts';\n`,
      'scripts/commands/a.ts': `import { b } from './b.ts';\n`,
      'scripts/commands/b.ts': `import { c } from './c.ts';\n`,
      'scripts/commands/c.ts': `const a = await import('./a.ts');\n`,
      'scripts/commands/d.ts': `import { a } from './a.ts';\n`,
    });
    const { code, stderr } = await check(root);
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toEqual([
      'import cycle: infra/contracts/bulk.ts -> infra/contracts/job.ts -> infra/contracts/bulk.ts',
      'import cycle: scripts/commands/a.ts -> scripts/commands/b.ts -> scripts/commands/c.ts -> scripts/commands/a.ts',
      'layering: 2 offence(s) (see ../shared/LAYOUT.md)',
    ]);
  });
});
