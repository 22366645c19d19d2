/**
 * `warmpool api` as a child process on a free port, under Node or another runtime (Bun), for
 * tests that need the API as it is started in production: its own process, its own Redis
 * connections and queues. Resolves once /v2/health/ready answers 200; close() stops it with
 * SIGTERM (it drains) and waits for it to exit.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { freePort } from '../../scripts/dev/free-port.ts';
import { stopChild } from '../../scripts/dev/stop-child.ts';
import { BIN } from './cli-child.ts';

export interface ApiChild {
  url: string;
  child: ChildProcess;
  /** What it has written to stdout so far (its JSON log lines). */
  stdout(): string;
  close(): Promise<void>;
}

export interface ApiChildOptions {
  env: NodeJS.ProcessEnv;
  /** The runtime's executable; Node's own by default. */
  runtime?: string;
  /** Prefixes its stderr lines on the test's stderr. */
  label?: string;
  readyTimeoutMs?: number;
}

export async function startApiChild(options: ApiChildOptions): Promise<ApiChild> {
  const { env, runtime = process.execPath, label = 'api', readyTimeoutMs = 60_000 } = options;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(runtime, [BIN, 'api'], { env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(`[${label}] ${chunk}`));
  const api: ApiChild = { url, child, stdout: () => out, close: () => stopChild(child) };
  const deadline = Date.now() + readyTimeoutMs;
  for (;;) {
    const ready = await fetch(`${url}/v2/health/ready`).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return api;
    if (child.exitCode !== null || Date.now() > deadline) {
      await api.close();
      throw new Error(`${label} at ${url} did not become ready (exit code ${child.exitCode})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}
