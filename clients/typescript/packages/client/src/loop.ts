/**
 * A background loop: runs its work when woken and on a timer, waiting after a failure for the
 * backoff or the server's `Retry-After`, whichever is longer. A wake never cuts a `Retry-After`
 * short; during a backoff after a failure, only an urgent wake (the stream came back) does.
 */

import { Backoff } from "./backoff.js";
import { ServerError } from "./errors.js";

export interface LoopTiming {
  /** The wait after a success. */
  idleMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

/** How a loop waits after a failure. */
export interface Retry {
  /** Failures in a row so far. */
  attempt: number;
  waitMs: number;
  /** The problem code of the failure, when the engine answered. */
  code: string | null;
}

export class SyncLoop {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running = false;
  private again = false;
  private failures = 0;
  private notBefore = 0;
  private stopped = false;
  private readonly backoff: Backoff;

  constructor(
    private readonly work: () => Promise<unknown>,
    private readonly timing: LoopTiming,
    private readonly onRetry: (retry: Retry | null, error: unknown) => void,
  ) {
    this.backoff = new Backoff(timing.backoffBaseMs, timing.backoffMaxMs);
  }

  /** Run soon: at once, unless a failure's wait is under way. */
  wake(urgent = false): void {
    if (this.stopped) return;
    if (this.running || (this.failures > 0 && !urgent)) {
      this.again = this.running;
      return;
    }
    this.schedule(Math.max(0, this.notBefore - Date.now()));
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private async tick(): Promise<void> {
    this.timer = undefined;
    this.running = true;
    this.again = false;
    let error: unknown;
    let failed = false;
    try {
      await this.work();
    } catch (err) {
      error = err;
      failed = true;
    }
    this.running = false;
    if (this.stopped) return;
    if (!failed) {
      this.backoff.reset();
      this.failures = 0;
      this.notBefore = 0;
      this.onRetry(null, undefined);
      this.schedule(this.again ? 0 : this.timing.idleMs);
      return;
    }
    const retryAfter = error instanceof ServerError ? error.retryAfterMs : undefined;
    const waitMs = Math.max(retryAfter ?? 0, this.backoff.next());
    this.failures += 1;
    this.notBefore = retryAfter === undefined ? 0 : Date.now() + retryAfter;
    this.onRetry({ attempt: this.failures, waitMs, code: error instanceof ServerError ? error.code : null }, error);
    this.schedule(waitMs);
  }
}
