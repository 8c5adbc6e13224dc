/**
 * What the client is doing, for a UI: the `Status` an app reads, and `StatusBoard`, which holds
 * it. `StatusBoard.setStatus` calls the listeners only when a field's value changed, so a UI is
 * not redrawn for nothing. The pull, the push and the stream each report to the one board.
 */

import type { Retry } from "../loop.js";
import type { QuarantinedEntry } from "../store/types.js";
import type { PullProgress } from "../wire.js";

/** What the client is doing, for a UI. */
export interface Status {
  /** Whether the realtime stream is connected. */
  connected: boolean;
  /**
   * Whether realtime comes by long-poll (`GET /sync/poll`), since something on the way refuses
   * the WebSocket upgrade: pings still arrive, presence does not.
   */
  longPoll: boolean;
  /** Whether a pull or a push is running. */
  syncing: boolean;
  /**
   * Mutations made locally that a pull has not yet shown applied. One made counts at once; one a
   * pull confirmed stops counting once the store holds that, so at 0 a reload finds none either.
   */
  pending: number;
  /**
   * Mutations the server rejected, with its errors, until retried or discarded and the store
   * holds that.
   */
  quarantined: readonly QuarantinedEntry[];
  /**
   * How far a pull that takes several pages has got (a first sync, a bucket opened), as the
   * server estimates it on each page; `null` once the pull ends.
   */
  progress: PullProgress | null;
  /** When the last pull finished (ms since the Unix epoch). */
  lastPullAt: number | null;
  /**
   * Whether the server refused this client's presence as too many (`too_many_presences`: the
   * actor is present too often on one server, over all its connections): none is announced
   * until the app tracks or untracks again.
   */
  presenceRefused: boolean;
  /** The last failure of a pull, a push or the stream, cleared by the next success. */
  lastError: string | null;
  /**
   * Why the last store write failed (a full disk, a quota), cleared by the next that succeeds.
   * Until then what it held is in memory only, and goes to the store with that next write.
   */
  storeError: string | null;
  /**
   * Whether changes wait for the store: a write is under way or asked for. What the app shows
   * is on this device once this is false, as before a reload (unless `storeError` says the
   * write failed). In a following tab, the leading tab's writes.
   */
  storing: boolean;
  /** The wait before a failed push or pull is tried again, while one is under way. */
  retry: ({ operation: "push" | "pull" } & Retry) | null;
}

/** The client's status and its listeners. */
export class StatusBoard {
  private statusNow: Status;
  private readonly statusListeners = new Set<(status: Status) => void>();
  /** Pulls and pushes running; `syncing` while above zero. */
  private running = 0;

  constructor(initial: Status) {
    this.statusNow = initial;
  }

  get now(): Status {
    return this.statusNow;
  }

  setStatus(change: Partial<Status>): void {
    const next = { ...this.statusNow, ...change };
    const changed = (Object.keys(change) as (keyof Status)[]).some(
      (key) => JSON.stringify(next[key]) !== JSON.stringify(this.statusNow[key]),
    );
    if (!changed) return;
    this.statusNow = next;
    for (const listener of this.statusListeners) listener(next);
  }

  setRetry(operation: "push" | "pull", retry: Retry | null): void {
    if (retry) this.setStatus({ retry: { operation, ...retry } });
    else if (this.statusNow.retry?.operation === operation) this.setStatus({ retry: null });
  }

  onStatus(listener: (status: Status) => void): () => void {
    this.statusListeners.add(listener);
    return () => this.statusListeners.delete(listener);
  }

  setSyncing(starts: boolean): void {
    this.running += starts ? 1 : -1;
    this.setStatus({ syncing: this.running > 0 });
  }

  recordError(err: unknown): void {
    this.setStatus({ lastError: errorText(err) });
  }

  recordStoreError(err: unknown): void {
    this.setStatus({ storeError: errorText(err) });
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
