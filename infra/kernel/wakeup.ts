/**
 * A wake-up that is remembered when it fires while nobody waits, so a chunk completing between
 * two polls still wakes the next wait at once. `next()` pairs with `cancel()` when the wait ended
 * another way (its timer), so a stale waiter never swallows a later wake-up.
 */
export class Wakeup {
  private pending = false;
  private resolve: (() => void) | undefined;

  readonly fire = (): void => {
    const resolve = this.resolve;
    this.resolve = undefined;
    if (resolve) resolve();
    else this.pending = true;
  };

  next(): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  cancel(): void {
    this.resolve = undefined;
  }
}
