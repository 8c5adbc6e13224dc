/**
 * The client's side of the realtime stream: which buckets it follows, who is present, and what
 * each frame from the server means. A `ping` or `buckets_changed` wakes the pull. A presence
 * frame updates `PresenceStates` and reaches the app's listeners. An `error` frame narrows what is
 * asked for, so the server does not refuse it again: after `forbidden` only buckets held are
 * asked for (`strict`), after `meta_too_large` the largest presence meta goes, and after
 * `too_many_presences` no presence is announced (`presenceRefused`) until the app tracks or
 * untracks again: re-announcing the same presences on every connection would only have each
 * connection closed in turn. `reconcile` tells the server what changed since the connection
 * opened, through `plan` in `realtime.ts`.
 */

import type { SyncLoop } from "../loop.js";
import { PresenceStates, type PresenceEvent } from "../presence.js";
import { plan, Told } from "../realtime.js";
import type { Replica } from "../replica.js";
import type { CloseInfo, RealtimeSource } from "../websocket.js";
import type { PresenceMeta, PresenceState, ServerFrame } from "../wire.js";
import type { StatusBoard } from "./status.js";

export class Stream {
  private readonly presenceListeners = new Set<(event: PresenceEvent) => void>();
  private readonly presence = new PresenceStates();
  private readonly tracked = new Map<string, PresenceMeta>();
  private subscription: string[] | undefined;
  private strict = false;
  private told = new Told();
  /** No presence is announced: the server refused one as too many (`too_many_presences`). */
  private presenceRefused = false;
  /** Whether the connection being opened follows nothing until its `subscribe`. */
  private opensNarrowed = false;
  private held: Set<string>;

  constructor(
    private readonly source: RealtimeSource | undefined,
    private readonly replica: Replica,
    private readonly status: StatusBoard,
    private readonly pullLoop: SyncLoop,
    private readonly pushLoop: SyncLoop,
    /** Syncing only what is open: the stream follows what the pulls bring, the buckets held. */
    private readonly followHeld = false,
  ) {
    this.held = new Set(replica.heldBuckets());
  }

  onPresence(listener: (event: PresenceEvent) => void): () => void {
    this.presenceListeners.add(listener);
    return () => this.presenceListeners.delete(listener);
  }

  private emitPresence(events: PresenceEvent[]): void {
    for (const event of events) for (const listener of this.presenceListeners) listener(event);
  }

  subscribe(buckets: readonly string[] | null): void {
    this.subscription = buckets === null ? undefined : [...buckets];
    this.reconcile();
  }

  track(bucket: string, meta: PresenceMeta = {}): void {
    const changed = JSON.stringify(this.tracked.get(bucket)) !== JSON.stringify(meta);
    this.tracked.set(bucket, { ...meta });
    this.presenceChanged(changed);
  }

  untrack(bucket: string): void {
    this.presenceChanged(this.tracked.delete(bucket));
  }

  /**
   * Tell the server of the app's presence; when it `changed` (not the same meta tracked again,
   * as a view rendered again does), announce it even after a refusal.
   */
  private presenceChanged(changed: boolean): void {
    if (changed) {
      this.presenceRefused = false;
      this.status.setStatus({ presenceRefused: false });
    }
    this.reconcile();
  }

  /** Be present and follow as the tabs sharing this client together ask (`tabs.ts`). */
  want(tracked: Map<string, PresenceMeta>, subscription: string[] | null): void {
    const before = JSON.stringify([...this.tracked]);
    this.tracked.clear();
    for (const [bucket, meta] of tracked) this.tracked.set(bucket, { ...meta });
    this.subscription = subscription ?? undefined;
    // Wishes sent again unchanged (a tab joining) do not count as a change of presence.
    this.presenceChanged(JSON.stringify([...this.tracked]) !== before);
  }

  presenceState(bucket: string): PresenceState {
    return this.presence.get(bucket);
  }

  /**
   * After a pull: buckets lost leave the subscription and the presence, as they left the
   * server's. Whether the buckets held changed.
   */
  heldChanged(): boolean {
    const held = new Set(this.replica.heldBuckets());
    const lost = [...this.held].filter((b) => !held.has(b));
    const changed = lost.length > 0 || [...held].some((b) => !this.held.has(b));
    this.held = held;
    if (lost.length > 0) {
      if (this.subscription) this.subscription = this.subscription.filter((b) => !lost.includes(b));
      for (const bucket of lost) this.tracked.delete(bucket);
      this.emitPresence(this.presence.forget((b) => !lost.includes(b)));
    }
    if (changed) {
      this.source?.heldChanged?.([...held]);
      this.reconcile();
    }
    return changed;
  }

  /** Tell the server what changed in the subscription and presence. */
  private reconcile(): void {
    if (!this.source?.connected) return;
    const wanted = this.subscription ?? (this.followHeld ? [...this.held] : undefined);
    const tracked = this.presenceRefused ? new Map<string, PresenceMeta>() : this.tracked;
    const step = plan(wanted, tracked, this.held, this.strict, this.told);
    if (step === "reconnect") {
      this.source.reconnect();
      return;
    }
    for (const frame of step.frames) this.source.send(frame);
    const subscription = this.told.subscription;
    if (subscription) this.emitPresence(this.presence.forget((b) => subscription.has(b)));
  }

  /**
   * The stream's URL for the next connection, from its `base`: a stream that follows a narrowed
   * list (the app's subscription, or the buckets held when syncing what is open) asks to follow
   * nothing until its `subscribe` (`follow=subscription`), so the server does not send the
   * presence of every bucket held first.
   */
  streamUrl(base: string): string {
    this.opensNarrowed = this.subscription !== undefined || this.followHeld;
    return this.opensNarrowed ? `${base}?follow=subscription` : base;
  }

  streamOpened(): void {
    this.told = new Told();
    if (this.opensNarrowed) this.told.subscription = new Set();
    this.status.setStatus({ connected: true, longPoll: this.source?.transport === "long-poll" });
    // Nothing is pinged for what happened while away: catch up.
    this.pullLoop.wake(true);
    this.pushLoop.wake(true);
    this.reconcile();
  }

  streamClosed(info: CloseInfo): void {
    this.status.setStatus({ connected: false, ...(info.error ? { lastError: `stream: ${info.error}` } : {}) });
    // Who is present comes afresh with the next connection.
    this.emitPresence(this.presence.forget());
  }

  streamFrame(frame: ServerFrame): void {
    switch (frame.type) {
      case "ping":
      case "buckets_changed":
        this.pullLoop.wake(true);
        return;
      case "presence_state":
        // Presence of buckets not followed (sent before a narrowing reached the server) is left out.
        if (this.told.follows(frame.bucket)) this.emitPresence([this.presence.replace(frame.bucket, frame.state)]);
        return;
      case "presence_diff": {
        if (!this.told.follows(frame.bucket)) return;
        const event = this.presence.diff(frame.bucket, frame.joins, frame.leaves);
        if (event) this.emitPresence([event]);
        return;
      }
      case "error":
        if (frame.code === "forbidden") {
          // A bucket refused: ask only for buckets held from now on, and pull to learn them.
          this.strict = true;
          this.pullLoop.wake(true);
        } else if (frame.code === "meta_too_large") {
          // The largest meta announced goes; the app hears of it in the status.
          const largest = [...this.told.tracks].sort((a, b) => JSON.stringify(b[1]).length - JSON.stringify(a[1]).length)[0];
          if (largest) this.tracked.delete(largest[0]);
        } else if (frame.code === "too_many_presences") {
          // The actor is present too often on the server: hold presence back until the app
          // changes it, rather than have every connection closed as this one is.
          this.presenceRefused = true;
          this.status.setStatus({ presenceRefused: true });
        }
        this.status.setStatus({ lastError: `stream: ${frame.code}: ${frame.detail}` });
        return;
    }
  }
}
