/**
 * What every `warmpool` command does when the reader of its output goes away
 * (`warmpool s3 ls … | head`). A write to a pipe nobody reads fails with EPIPE, which Node reports
 * as an 'error' event on the stream; with no listener that is an uncaught exception and a stack
 * trace. A Unix tool is ended quietly by SIGPIPE there (Node ignores that signal), so the CLI ends
 * the same way: exit 0 at once — the reader took what it wanted, and 'exit' handlers (a dev
 * stack's Redis child, the dev lock) still run. Any other failure to write (a full disk behind
 * `> file`) is one line on stderr and exit 1, never a stack.
 *
 * Installed once, by the process's entry (cli.ts `cliMain`), on stdout and stderr, for every
 * command: no command writes its own guard.
 */

/** The part of a stream this needs: its 'error' event. */
export interface OutputStream {
  on(event: 'error', listener: (err: Error) => void): unknown;
}

export interface ClosedOutputIo {
  /** Where a failure to write stdout is reported (stderr). */
  err(text: string): void;
  exit(code: number): void;
}

/** Whether a write failed because the reading end of the pipe was closed. */
export function isClosedPipe(err: unknown): boolean {
  return err instanceof Error && (err as NodeJS.ErrnoException).code === 'EPIPE';
}

/** Ends the process quietly when `stream`'s reader goes away; says why and exits 1 on another write error. */
export function endQuietlyWhenClosed(stream: OutputStream, name: 'stdout' | 'stderr', io: ClosedOutputIo): void {
  let ended = false;
  stream.on('error', (err) => {
    // Writes queued before the exit fail the same way: one ending is enough.
    if (ended) return;
    ended = true;
    if (isClosedPipe(err)) return io.exit(0);
    // stderr itself failing has nowhere to be reported.
    if (name === 'stdout') io.err(`warmpool: cannot write to stdout: ${err.message}\n`);
    io.exit(1);
  });
}
