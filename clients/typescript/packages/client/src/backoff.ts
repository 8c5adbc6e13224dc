/**
 * Exponential backoff with full jitter: the `n`-th wait is uniform in `[0, min(max, base·2ⁿ)]`,
 * so many clients that failed together do not come back together.
 */

export class Backoff {
  private attempt = 0;

  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  /** Start over after a success. */
  reset(): void {
    this.attempt = 0;
  }

  /** The next wait, in milliseconds. */
  next(): number {
    const ceiling = Math.min(this.maxMs, this.baseMs * 2 ** Math.min(this.attempt, 20));
    this.attempt += 1;
    return Math.floor(ceiling * this.random());
  }
}
