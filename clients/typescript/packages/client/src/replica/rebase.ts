/**
 * The rebase: the optimistic view built again by running the pending mutations, in order, over
 * the confirmed base. A pull's last page, a push result that is superseded or rejected, a
 * mutation `refuse` quarantines and newly registered optimistic functions each call `rebase`.
 * `rebase` notes every row either overlay wrote, so the app hears what the new overlay changed.
 */

import { Layer, LocalTx, type OptimisticMutator } from "../view.js";
import type { ReplicaState } from "./state.js";

/** The optimistic mutators, by name; the view is rebased with them. */
export function setOptimistic(state: ReplicaState, mutators: Record<string, OptimisticMutator<never, never>>): void {
  state.optimistic = { ...state.optimistic, ...mutators };
  rebase(state);
}

/** Run the pending mutations again over the base, in order. */
export function rebase(state: ReplicaState): void {
  state.rebases += 1;
  const before = state.overlay;
  rebuildOverlay(state);
  const after = state.overlay;
  // Compare what either overlay wrote: the old values are read through the old overlay.
  state.overlay = before;
  for (const layer of [before, after]) {
    for (const [table, rows] of layer.writes) for (const key of rows.keys()) state.noteView(table, key);
  }
  state.overlay = after;
}

export function rebuildOverlay(state: ReplicaState): void {
  const overlay = new Layer(state);
  for (const entry of state.outbox) {
    if (entry.mutationId <= state.meta.syncedMutationId || entry.superseded) continue;
    const mutator = state.optimistic[entry.name];
    if (!mutator) continue;
    const layer = new Layer(overlay);
    try {
      runOptimistic(mutator, new LocalTx(state.schema, layer, state.actor, entry.hlc, entry.clientMutationId), entry.args);
      overlay.absorb(layer);
    } catch {
      // It fails now: it has no effect, and the server decides.
    }
  }
  state.overlay = overlay;
}

/** Run an optimistic mutator, which must not be asynchronous: replays run inside a rebase. */
export function runOptimistic(mutator: OptimisticMutator<never, never>, tx: LocalTx, args: unknown): unknown {
  const result = (mutator as unknown as (tx: LocalTx, args: unknown) => unknown)(tx, args);
  if (typeof (result as { then?: unknown } | undefined)?.then === "function") {
    throw new TypeError("an optimistic mutator runs synchronously: it must not return a promise");
  }
  return result;
}
