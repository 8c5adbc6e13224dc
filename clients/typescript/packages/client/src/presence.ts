/**
 * Presence: who is present in the buckets the stream follows, kept from the server's
 * `presence_state` and `presence_diff` frames (`docs/protocol.md#presence`). Metas are told apart
 * by the `presenceRef` the server gives them.
 */

import type { PresenceMeta, PresenceState } from "./wire.js";

/** A bucket's presence changed. */
export interface PresenceEvent {
  bucket: string;
  /** Everyone present in it now. */
  state: PresenceState;
  /** Metas that joined, by presence key. */
  joins: PresenceState;
  /** Metas that left, by presence key. */
  leaves: PresenceState;
}

const refOf = (meta: PresenceMeta) => meta.presenceRef;

/** The metas of `a` that `b` lacks, by presence key. */
function missing(a: PresenceState, b: PresenceState): PresenceState {
  const out: PresenceState = {};
  for (const [key, metas] of Object.entries(a)) {
    const others = b[key] ?? [];
    const gone = metas.filter((m) => !others.some((o) => refOf(o) === refOf(m)));
    if (gone.length > 0) out[key] = gone;
  }
  return out;
}

export class PresenceStates {
  private readonly states = new Map<string, PresenceState>();

  get(bucket: string): PresenceState {
    return structuredClone(this.states.get(bucket) ?? {});
  }

  /** Replace a bucket's state; the event says who joined and left against what was known. */
  replace(bucket: string, state: PresenceState): PresenceEvent {
    const before = this.states.get(bucket) ?? {};
    this.states.set(bucket, structuredClone(state));
    return { bucket, state: this.get(bucket), joins: missing(state, before), leaves: missing(before, state) };
  }

  /**
   * Apply a diff. `undefined` when the bucket has no state: the server sends a bucket's state
   * before its diffs, so a diff without one is late, for a bucket no longer followed.
   */
  diff(bucket: string, joins: PresenceState, leaves: PresenceState): PresenceEvent | undefined {
    const state = this.states.get(bucket);
    if (!state) return undefined;
    for (const [key, metas] of Object.entries(leaves)) {
      const present = (state[key] ?? []).filter((m) => !metas.some((left) => refOf(left) === refOf(m)));
      if (present.length > 0) state[key] = present;
      else delete state[key];
    }
    for (const [key, metas] of Object.entries(joins)) {
      const present = (state[key] ??= []);
      for (const meta of metas) if (!present.some((m) => refOf(m) === refOf(meta))) present.push(meta);
    }
    return { bucket, state: this.get(bucket), joins, leaves };
  }

  /** Forget the buckets `keep` rejects; an event for each that had someone present. */
  forget(keep: (bucket: string) => boolean = () => false): PresenceEvent[] {
    const events: PresenceEvent[] = [];
    for (const [bucket, state] of [...this.states]) {
      if (keep(bucket)) continue;
      this.states.delete(bucket);
      events.push({ bucket, state: {}, joins: {}, leaves: state });
    }
    return events;
  }
}
