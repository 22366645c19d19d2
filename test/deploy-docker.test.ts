/**
 * The Dockerfile, linted where no Docker engine exists (CI here), and built where one does:
 * multi-stage; every base pinned to an exact version; no ADD (so no remote URL fetched at build
 * time); the runtime images run as a non-root user and carry a HEALTHCHECK; .npmrc (with
 * onnxruntime-node-install=skip) is copied before `npm ci`, which installs production deps only;
 * the GPU image asks onnxruntime-node for the CUDA 12 providers; the compiled dist/ is built in
 * a stage of its own and shipped with the sources it came from; every path it copies exists and
 * is not hidden by .dockerignore; the image's entry is the warmpool CLI.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '..');

interface Instruction {
  op: string;
  args: string;
  line: number;
}
interface Stage {
  base: string;
  name?: string;
  body: Instruction[];
}

/** Instructions with line continuations joined and comments dropped (the Dockerfile reference's rules). */
function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = '';
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!pending && (line === '' || line.startsWith('#'))) return;
    if (pending && line.startsWith('#')) return; // comments inside a continued instruction
    if (!pending) start = i + 1;
    pending += `${line.replace(/\\$/, '')} `;
    if (line.endsWith('\\')) return;
    const [op = '', ...rest] = pending.trim().split(/\s+/);
    out.push({ op: op.toUpperCase(), args: rest.join(' '), line: start });
    pending = '';
  });
  return out;
}

function stagesOf(instructions: Instruction[]): { args: Map<string, string>; stages: Stage[] } {
  const args = new Map<string, string>();
  const stages: Stage[] = [];
  for (const ins of instructions) {
    if (ins.op === 'FROM') {
      const [base = '', as, name] = ins.args.split(/\s+/);
      stages.push({
        base: base.replace(/\$\{(\w+)\}/g, (_, n: string) => args.get(n) ?? `\${${n}}`),
        ...(as?.toUpperCase() === 'AS' && name ? { name } : {}),
        body: [],
      });
    } else if (stages.length === 0 && ins.op === 'ARG') {
      const [k = '', v = ''] = ins.args.split('=');
      args.set(k, v);
    } else stages.at(-1)?.body.push(ins);
  }
  return { args, stages };
}

const dockerfile = parseDockerfile(readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8'));
const { stages } = stagesOf(dockerfile);
const stage = (name: string): Stage => {
  const s = stages.find((x) => x.name === name);
  if (!s) throw new Error(`no stage ${name}`);
  return s;
};
const RUNTIMES = ['runtime', 'runtime-gpu'];

describe('the Dockerfile', () => {
  it('is multi-stage, and every base image outside the file is pinned to an exact version', () => {
    expect(stages.length).toBeGreaterThanOrEqual(4);
    const names = new Set(stages.flatMap((s) => s.name ?? []));
    for (const s of stages) {
      if (names.has(s.base) || s.base === 'scratch') continue;
      expect(s.base, 'unresolved ARG in FROM').not.toContain('${');
      // repo:1.2.3-variant or repo@sha256:… — never `latest`, never a bare major.
      expect(s.base).toMatch(/(:\d+\.\d+\.\d+[\w.-]*|@sha256:[0-9a-f]{64})$/);
    }
  });

  it('fetches nothing with ADD (remote URLs or archives): COPY only', () => {
    expect(dockerfile.filter((i) => i.op === 'ADD')).toEqual([]);
  });

  it('runs the runtime images as a non-root user, with a HEALTHCHECK and the warmpool CLI as entry', () => {
    for (const name of RUNTIMES) {
      const body = stage(name).body;
      const users = body.filter((i) => i.op === 'USER');
      expect(users.length, name).toBeGreaterThan(0);
      const last = users.at(-1) as Instruction;
      expect(last.args).not.toMatch(/^(root|0)(:|$)/);
      // Nothing after the last USER runs as root again.
      expect(body.filter((i) => i.line > last.line && i.op === 'RUN')).toEqual([]);
      const health = body.filter((i) => i.op === 'HEALTHCHECK');
      expect(health).toHaveLength(1);
      expect(health[0]?.args).toContain('/app/deploy/docker/healthcheck.mjs');
      expect(body.find((i) => i.op === 'ENTRYPOINT')?.args).toBe('["node", "/app/bin/warmpool.mjs"]');
    }
    expect(existsSync(path.join(ROOT, 'bin/warmpool.mjs'))).toBe(true);
  });

  it('copies .npmrc (onnxruntime-node-install=skip) before `npm ci`, which installs production dependencies only', () => {
    const body = stage('deps').body;
    const copy = body.findIndex((i) => i.op === 'COPY' && i.args.split(/\s+/).includes('.npmrc'));
    const ci = body.findIndex((i) => i.op === 'RUN' && /\bnpm ci\b/.test(i.args));
    expect(copy).toBeGreaterThanOrEqual(0);
    expect(ci).toBeGreaterThan(copy);
    expect(body[ci]?.args).toContain('--omit=dev');
    expect(dockerfile.filter((i) => i.op === 'RUN' && /\bnpm (install|i)\b/.test(i.args))).toEqual([]);
    expect(readFileSync(path.join(ROOT, '.npmrc'), 'utf8')).toMatch(/^onnxruntime-node-install=skip$/m);
  });

  it('builds the GPU variant with ONNX Runtime’s CUDA 12 providers on a CUDA + cuDNN base', () => {
    expect(stage('deps-gpu').body.some((i) => i.op === 'RUN' && i.args.includes('ONNXRUNTIME_NODE_INSTALL=cuda12'))).toBe(true);
    expect(stage('runtime-gpu').base).toMatch(/^nvidia\/cuda:12\.\d+\.\d+-cudnn-runtime-/);
    const env = stage('runtime-gpu')
      .body.filter((i) => i.op === 'ENV')
      .map((i) => i.args)
      .join(' ');
    expect(env).toContain('EXECUTION_PROVIDERS=cuda,cpu');
    expect(env).toContain('WORKER_HEALTH_PORT=9090');
  });

  it('builds dist/ in a stage of its own, and ships it with the very sources it was built from', () => {
    const build = stage('build').body;
    const runs = build.filter((i) => i.op === 'RUN').map((i) => i.args);
    expect(runs.some((r) => /\bnpm ci\b/.test(r) && !r.includes('--omit=dev'))).toBe(true);
    expect(runs.some((r) => r.includes('npm run build') && r.includes('scripts/build.mjs --check'))).toBe(true);
    // The app copies from the build stage only (same bytes, same times: the stamp holds at every
    // start); the runtimes take it, and their node_modules come from the production-only stages.
    const app = stage('app').body.filter((i) => i.op === 'COPY');
    const fromBuild = app.filter((i) => i.args.startsWith('--from=build'));
    for (const dir of ['bin', 'api', 'infra', 'worker', 'scripts', 'dist']) {
      expect(fromBuild.some((i) => i.args.endsWith(`./${dir}`))).toBe(true);
    }
    expect(app.filter((i) => !i.args.startsWith('--from')).map((i) => i.args)).toEqual([
      'deploy/docker/healthcheck.mjs ./deploy/docker/healthcheck.mjs',
    ]);
    for (const name of RUNTIMES) {
      const copies = stage(name)
        .body.filter((i) => i.op === 'COPY')
        .map((i) => i.args);
      expect(copies).toContain('--from=app /app ./');
      expect(copies.some((c) => c.startsWith('--from=build'))).toBe(false);
    }
    expect(readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')).toMatch(/^dist$/m);
  });

  it('copies only paths that exist and that .dockerignore leaves in the build context', () => {
    const ignored = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const required of ['node_modules', '.git', '.serverless', '.build', 'test', '**/*.test.ts']) expect(ignored).toContain(required);
    const sources = dockerfile
      .filter((i) => i.op === 'COPY' && !i.args.startsWith('--from'))
      .flatMap((i) =>
        i.args
          .split(/\s+/)
          .filter((a) => !a.startsWith('--'))
          .slice(0, -1),
      );
    expect(sources.length).toBeGreaterThan(5);
    for (const src of sources) {
      expect(existsSync(path.join(ROOT, src)), src).toBe(true);
      expect(
        ignored.some((p) => p === src || src.startsWith(`${p}/`)),
        `${src} is ignored`,
      ).toBe(false);
    }
  });

  const docker = spawnSync('docker', ['info'], { stdio: 'ignore' }).status === 0;
  it.skipIf(!docker)('builds the CPU image where a Docker engine exists', () => {
    const build = spawnSync('docker', ['build', '--target', 'runtime', '-t', 'warmpool:test', '.'], { cwd: ROOT, encoding: 'utf8' });
    expect(build.status, build.stderr).toBe(0);
    const help = spawnSync('docker', ['run', '--rm', 'warmpool:test', '--help'], { encoding: 'utf8' });
    expect(help.stdout).toContain('warmpool');
  });
});
