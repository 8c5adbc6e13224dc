/**
 * Presence as functions of a client, for apps that pass the client around rather than call its
 * methods: `track`, `untrack`, `presenceState` and `onPresence` are the client's own, and
 * `subscribePresence` and `presence` narrow them to one bucket. Presence holds several metas per
 * presence key and reports joins and leaves (`docs/protocol.md#presence`).
 */

import type { PresenceEvent } from "../presence.js";
import type { PresenceMeta, PresenceState } from "../wire.js";
import type { EngineClient } from "./api.js";

/** What presence needs of a client: any `EngineClient`, whatever its tables and mutators. */
export type PresenceClient = Pick<EngineClient, "track" | "untrack" | "presenceState" | "onPresence">;

/** Be present in `bucket` with `meta` (kept across reconnections); a new meta replaces the last. */
export function track(client: PresenceClient, bucket: string, meta: PresenceMeta = {}): void {
  client.track(bucket, meta);
}

/** Leave `bucket`'s presence. */
export function untrack(client: PresenceClient, bucket: string): void {
  client.untrack(bucket);
}

/** Who is present in `bucket`, as the stream last said. */
export function presenceState(client: PresenceClient, bucket: string): PresenceState {
  return client.presenceState(bucket);
}

/** Call `listener` with every presence change of every bucket; returns the unsubscribe. */
export function onPresence(client: PresenceClient, listener: (event: PresenceEvent) => void): () => void {
  return client.onPresence(listener);
}

/**
 * Call `listener` with who is present in `bucket`: now, and after every change of it (joins and
 * leaves in the event); returns the unsubscribe.
 */
export function subscribePresence(
  client: PresenceClient,
  bucket: string,
  listener: (state: PresenceState, event?: PresenceEvent) => void,
): () => void {
  const unsubscribe = client.onPresence((event) => {
    if (event.bucket === bucket) listener(event.state, event);
  });
  listener(client.presenceState(bucket));
  return unsubscribe;
}

/** One bucket's presence, from `presence(client, bucket)`. */
export interface BucketPresence {
  readonly bucket: string;
  /** Be present with `meta`; a new meta replaces the last. */
  track(meta?: PresenceMeta): void;
  untrack(): void;
  /** Who is present, as the stream last said. */
  state(): PresenceState;
  /** `subscribePresence` of this bucket. */
  subscribe(listener: (state: PresenceState, event?: PresenceEvent) => void): () => void;
}

/** The presence of `bucket` (a room, a document) through `client`. */
export function presence(client: PresenceClient, bucket: string): BucketPresence {
  return {
    bucket,
    track: (meta) => track(client, bucket, meta),
    untrack: () => untrack(client, bucket),
    state: () => presenceState(client, bucket),
    subscribe: (listener) => subscribePresence(client, bucket, listener),
  };
}
