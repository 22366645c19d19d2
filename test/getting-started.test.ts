/**
 * docs/GETTING-STARTED.md, run as a newcomer runs it: every `sh` block of the page, as written
 * and in order, in one bash session in the folder of a real `warmpool dev` (its own redis-server,
 * S3 server, scaler, workers and dispatcher). The only stand-ins: `npx warmpool` runs this
 * checkout's bin/warmpool.mjs (the folder is not a checkout), `docs/` is linked into the folder, the
 * user's model is a small MLP with the page's input (`features` FP32 [batch, 4]), and the webhook
 * receiver gets a free port through the page's own `HOOK_PORT` default.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/dev/free-port.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { type DevChild, devEnv, devFolder, killDev, readLock, spawnDev } from './support/dev-child.ts';

const PAGE = fileURLToPath(new URL('../docs/GETTING-STARTED.md', import.meta.url));
const DOCS = fileURLToPath(new URL('../docs', import.meta.url));
const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const HAS_CURL = existsSync('/usr/bin/curl');

/** The page's `sh` blocks, in order. */
function shellBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1] as string);
}

describe.skipIf(!HAS_CURL)('docs/GETTING-STARTED.md, every command as written', () => {
  let dev: DevChild | undefined;
  let redisPid: number | undefined;

  afterAll(async () => {
    if (!dev) return;
    process.kill(-dev.pid, 'SIGINT');
    const exited = await Promise.race([dev.exited, new Promise((r) => setTimeout(r, 20_000))]);
    if (!exited) killDev(dev, redisPid);
  }, 30_000);

  it('has commands to run', () => {
    const blocks = shellBlocks(readFileSync(PAGE, 'utf8'));
    expect(blocks.length).toBeGreaterThanOrEqual(6);
    expect(blocks.join('\n')).toContain('npx warmpool bulk run');
  });

  it('serves the reader’s model, delivers a verified webhook, scores a file in bulk and shows the dashboard', async () => {
    const cwd = devFolder('getting-started');
    symlinkSync(DOCS, path.join(cwd, 'docs'));
    writeFileSync(path.join(cwd, 'my-model.onnx'), buildMlpModel({ features: 4 }));
    dev = spawnDev(cwd, await devEnv());
    await dev.waitFor(/warmpool is up: (\S+)/, 180_000);
    redisPid = readLock(cwd).redis?.pid;

    const script = [
      'set -eu',
      // Whatever the page starts in the background stops with the session.
      "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
      `npx() { if [ "$1" = warmpool ]; then shift; node ${JSON.stringify(BIN)} "$@"; else command npx "$@"; fi; }`,
      ...shellBlocks(readFileSync(PAGE, 'utf8')),
    ].join('\n');
    const run = await bash(script, cwd, { ...process.env, HOOK_PORT: String(await freePort()) }, 240_000);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);

    const out = run.stdout;
    expect(out).toContain('{"ready":true}');
    expect(out).toMatch(/"model_name":"my-model","model_version":"1".*"name":"score","datatype":"FP32","shape":\[2,1\]/);
    expect(out).toMatch(/^verified job\.succeeded job_\S+ succeeded$/m);
    expect(out).toMatch(/part-000000\.jsonl/);
    expect(out).toMatch(/^\{"id":"row-0","score":\[[-\d.e]+\]\}$/m);
    expect(out).toMatch(/^dashboard: http:\/\/\S+\/dashboard \(sign in with wp_\S+\)$/m);
    expect(out).toMatch(/^200$/m);
  }, 480_000);
});

function bash(
  script: string,
  cwd: string,
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
