/**
 * The pull, as the client runs it: pages from `POST /sync/pull` until the server has no more,
 * each applied to the replica and written to the store before the next is asked for. One pull
 * runs at a time. A page that requeues mutations wakes the push. When the pull ends, the stream
 * learns which buckets are held now (`heldChanged`), whether the pull succeeded or not.
 */

import { bucketRule } from "../bucket.js";
import type { SyncLoop } from "../loop.js";
import type { Remote } from "../remote.js";
import type { Replica } from "../replica.js";
import type { PullRequest } from "../wire.js";
import { Serial } from "./serial.js";
import type { StatusBoard } from "./status.js";

export class Puller {
  private readonly pulls = new Serial<void>();

  constructor(
    private readonly remote: Remote,
    private readonly replica: Replica,
    private readonly settings: {
      readonly pullPage: number;
      readonly bucketTtlMs: number;
      /** The always-synced rules when syncing only what is open. */
      readonly syncOpen: readonly string[] | undefined;
    },
    private readonly status: StatusBoard,
    private readonly persist: () => Promise<void>,
    private readonly pushLoop: SyncLoop,
    private readonly heldChanged: () => void,
    private readonly openBuckets: () => string[],
  ) {}

  /** One pull at a time: a caller arriving while one runs waits for it and pulls again. */
  pullOnce(): Promise<void> {
    return this.pulls.run(() => this.pullPages());
  }

  /** Settles once every pull asked for so far has. */
  idle(): Promise<unknown> {
    return this.pulls.idle();
  }

  /**
   * The first request of a pull: every bucket held, or, syncing only what is open, the
   * always-synced rules and the open buckets, those whose rows the replica does not hold
   * restarted (`docs/design.md` §3, "Sync what is open"). The buckets held it leaves out are
   * released first.
   */
  private async firstRequest(): Promise<PullRequest> {
    const request: PullRequest = { clientId: this.replica.clientId, cursor: this.replica.meta.cursor, limit: this.settings.pullPage };
    const always = this.settings.syncOpen;
    if (always === undefined) return request;
    const open = this.openBuckets();
    this.replica.release((b) => always.includes(bucketRule(b)) || open.includes(b), Date.now());
    await this.persist();
    const held = new Set(this.replica.heldBuckets());
    return { ...request, rules: [...always], open, restart: open.filter((b) => !held.has(b)) };
  }

  private async pullPages(): Promise<void> {
    this.status.setSyncing(true);
    try {
      const first = await this.firstRequest();
      let request = first;
      for (;;) {
        const page = await this.remote.pull(request);
        const applied = this.replica.applyPage(page, Date.now(), this.settings.bucketTtlMs);
        this.status.setStatus({ progress: page.progress ?? null });
        await this.persist();
        if (applied.requeued > 0) this.pushLoop.wake(true);
        if (!page.hasMore) break;
        // Later pages go on from the cursor: a restart again would start the bucket over.
        request = { ...first, cursor: page.cursor, restart: undefined };
      }
      this.status.setStatus({ lastError: null, lastPullAt: Date.now() });
      this.heldChanged();
    } catch (err) {
      this.status.recordError(err);
      this.heldChanged();
      throw err;
    } finally {
      this.status.setStatus({ progress: null });
      this.status.setSyncing(false);
    }
  }
}
