/** Where `warmpool simulate` and `simulate calibrate` print: stdout and stderr, or a test's buffers. */
export interface SimulateOut {
  out(text: string): void;
  err(text: string): void;
  /** Whether `err` is a terminal: only there is a progress line drawn (simulate-progress.ts). */
  errIsTTY?: boolean;
}
