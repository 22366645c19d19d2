/**
 * The real `warmpool` CLI (bin/warmpool.mjs) as a child process, for tests that run commands as a
 * user types them. A command still running after `timeoutMs` is killed: a hang then shows as its
 * signal. bin/warmpool.mjs's one-line notice when another edit in this checkout made dist/ stale
 * (or sources run through tsx) is not the command's output, and is left out of stderr.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env: NodeJS.ProcessEnv;
  cwd: string;
  timeoutMs?: number;
  /**
   * Close the reading end of stdout before the command runs a line, as `| head` does once it has
   * its lines: every write the command makes then fails with EPIPE.
   */
  closeStdout?: boolean;
}

export function runCli(args: readonly string[], options: CliOptions): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], { env: options.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    if (options.closeStdout) child.stdout.destroy();
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 30_000);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr: withoutBuildNotice(stderr) });
    });
  });
}

export function withoutBuildNotice(stderr: string): string {
  return stderr.replace(/^warmpool: .*(building dist\/|through tsx).*\n/gm, '');
}
