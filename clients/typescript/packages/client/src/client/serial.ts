/**
 * `Serial` runs work of one kind one at a time, in the order it was asked for. The client keeps
 * one for pulls and one for pushes, so a pull never overlaps a pull and a push never overlaps a
 * push. A pull and a push may still run at the same time.
 */

/** Runs of one kind, one at a time, in the order they were asked for. */
export class Serial<T> {
  private last: Promise<unknown> = Promise.resolve();

  run(work: () => Promise<T>): Promise<T> {
    const next = this.last.catch(() => undefined).then(work);
    this.last = next;
    return next;
  }

  /** Settles once every run asked for so far has. */
  idle(): Promise<unknown> {
    return this.last.catch(() => undefined);
  }
}
