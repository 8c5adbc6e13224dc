/**
 * The pull, as the client runs it: pages from `POST /sync/pull` until the server has no more,
 * each applied to the replica and written to the store before the next is asked for. One pull
 * runs at a time. A page that requeues mutations wakes the push. When the pull ends, the stream
 * learns which buckets are held now (`heldChanged`), whether the pull succeeded or not.
 */

import type { SyncLoop } from "../loop.js";
import type { Remote } from "../remote.js";
import type { Replica } from "../replica.js";
import { Serial } from "./serial.js";
import type { StatusBoard } from "./status.js";

export class Puller {
  private readonly pulls = new Serial<void>();

  constructor(
    private readonly remote: Remote,
    private readonly replica: Replica,
    private readonly settings: { readonly pullPage: number; readonly bucketTtlMs: number },
    private readonly status: StatusBoard,
    private readonly persist: () => Promise<void>,
    private readonly pushLoop: SyncLoop,
    private readonly heldChanged: () => void,
  ) {}

  /** One pull at a time: a caller arriving while one runs waits for it and pulls again. */
  pullOnce(): Promise<void> {
    return this.pulls.run(() => this.pullPages());
  }

  /** Settles once every pull asked for so far has. */
  idle(): Promise<unknown> {
    return this.pulls.idle();
  }

  private async pullPages(): Promise<void> {
    this.status.setSyncing(true);
    try {
      let cursor = this.replica.meta.cursor;
      for (;;) {
        const page = await this.remote.pull({ clientId: this.replica.clientId, cursor, limit: this.settings.pullPage });
        const applied = this.replica.applyPage(page, Date.now(), this.settings.bucketTtlMs);
        await this.persist();
        if (applied.requeued > 0) this.pushLoop.wake(true);
        if (!page.hasMore) break;
        cursor = page.cursor;
      }
      this.status.setStatus({ lastError: null, lastPullAt: Date.now() });
      this.heldChanged();
    } catch (err) {
      this.status.recordError(err);
      this.heldChanged();
      throw err;
    } finally {
      this.status.setSyncing(false);
    }
  }
}
