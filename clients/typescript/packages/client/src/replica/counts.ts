/**
 * The counts the status shows, `pending` and `quarantined`: a mutation counts while the replica
 * or the store holds it. So a mutation queued counts at once, and one that leaves the outbox (a
 * pull confirmed it, the server refused it) or the quarantine (discarded, retried) stops counting
 * only once the store write recording that has finished. Not the replica's counts alone: those
 * fall before the write, and a reload in between starts from the store, where the mutation still
 * waits. So at "0 waiting" a reload finds none waiting either.
 *
 * The state keeps the outbox and the quarantine as the store holds them (`storedOutbox`,
 * `storedQuarantine`): read at the start, then changed by each write once it is in the store
 * (`written`), the client's own or, in a following tab, the leading tab's (`mirror.ts`).
 */

import type { QuarantinedEntry, StoreWrite } from "../store/types.js";
import { byQuarantinedAt, type ReplicaState } from "./state.js";

/** The status's counts. */
export interface Counts {
  pending: number;
  quarantined: QuarantinedEntry[];
}

/** The mutations the replica or the store holds, in the outbox and in the quarantine. */
export function counts(state: ReplicaState): Counts {
  let pending = state.outbox.length;
  if (state.storedOutbox.size > 0) {
    const queued = new Set(state.outbox.map((e) => e.clientMutationId));
    for (const id of state.storedOutbox) if (!queued.has(id)) pending++;
  }
  const quarantined = [...state.quarantine];
  if (state.storedQuarantine.size > 0) {
    const held = new Set(quarantined.map((e) => e.clientMutationId));
    const leaving = [...state.storedQuarantine.values()].filter((e) => !held.has(e.clientMutationId));
    if (leaving.length > 0) return { pending, quarantined: [...quarantined, ...leaving].sort(byQuarantinedAt) };
  }
  return { pending, quarantined };
}

/** `write` is in the store. */
export function written(state: ReplicaState, write: StoreWrite): void {
  for (const id of write.deleteOutbox) state.storedOutbox.delete(id);
  for (const entry of write.putOutbox) state.storedOutbox.add(entry.clientMutationId);
  for (const id of write.deleteQuarantine) state.storedQuarantine.delete(id);
  for (const entry of write.putQuarantine) state.storedQuarantine.set(entry.clientMutationId, entry);
}
