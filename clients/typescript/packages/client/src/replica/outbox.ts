/**
 * The outbox and the quarantine. `mutate` runs a mutator's optimistic function, each write
 * checked against the write rules (`permissions.ts`), and queues the mutation. `recordResults`
 * records a push's answers: a rejection moves the entry to the quarantine, where it stays until
 * the app retries or discards it. `renumber` numbers the entries the server has not acknowledged
 * on from the server's sequence, after a `409 mutation_out_of_order`. A pull, not a push,
 * confirms an entry and takes it out (`pull.ts`).
 */

import { newUuid } from "../ids.js";
import type { OutboxEntry, QuarantinedEntry } from "../store/types.js";
import { frozen, Layer, LocalTx } from "../view.js";
import type { MutationResult, Problem } from "../wire.js";
import { MutationChecks } from "./permissions.js";
import { rebase, runOptimistic } from "./rebase.js";
import { byQuarantinedAt, type ReplicaState } from "./state.js";

/** A mutation queued by `mutate`. */
export interface Queued {
  mutationId: number;
  clientMutationId: string;
  /** What the optimistic mutator returned. */
  result: unknown;
}

/** A mutation another tab made, to queue as it was made there (`docs/design.md` §9). */
export interface Made {
  clientMutationId: string;
  hlc: string;
}

/**
 * Run mutator `name`'s optimistic function (if any) and queue the mutation; `made`: another
 * tab made it, with that id and clock reading.
 */
export function mutate(state: ReplicaState, name: string, input: unknown, now: number, made?: Made): Queued {
  if (!state.schema.mutators.includes(name)) throw new UnknownMutatorError(name);
  // The outbox keeps the arguments as they were when the mutation was made.
  const args = frozen(structuredClone(input));
  const hlc = made ? madeHlc(state, made.hlc) : state.clock.now();
  const clientMutationId = made?.clientMutationId ?? newUuid();
  const mutator = state.optimistic[name];
  const layer = new Layer(state.overlay);
  // A local run that throws refuses the mutation: nothing is queued. So does a write the
  // server's rules certainly refuse, even one the mutator caught.
  const checks = new MutationChecks(state);
  const tx = new LocalTx(state.schema, layer, state.actor, hlc, clientMutationId, checks.check);
  const result = mutator ? runOptimistic(mutator, tx, args) : undefined;
  checks.settle();
  for (const [table, rows] of layer.writes) for (const key of rows.keys()) state.noteView(table, key);
  state.overlay.absorb(layer);
  const mutationId = state.meta.lastMutationId + 1;
  state.setMeta({ lastMutationId: mutationId, lastHlc: hlc });
  const entry: OutboxEntry = { mutationId, clientMutationId, name, args, hlc, pushed: false, createdAt: now };
  state.outbox.push(entry);
  state.dirtyOutbox.add(clientMutationId);
  return { mutationId, clientMutationId, result };
}

/**
 * The reading a mutation made in another tab goes with: its own when it is past this clock's
 * last, so the readings of one client's mutations rise with their ids and stay past what pulls
 * brought, as the server's merges expect; a new one otherwise. The tabs share one clock node,
 * the client id, and two of them can read the same instant.
 */
function madeHlc(state: ReplicaState, hlc: string): string {
  if (hlc <= state.clock.last) return state.clock.now();
  state.clock.observe(hlc);
  return hlc;
}

/** Up to `limit` entries no push has acknowledged, in order. */
export function unpushed(state: ReplicaState, limit: number): OutboxEntry[] {
  return state.outbox.filter((e) => !e.pushed).slice(0, limit);
}

/** Record a push's results. Returns whether some mutation was applied. */
export function recordResults(state: ReplicaState, results: readonly MutationResult[], now: number): boolean {
  let rebaseNeeded = false;
  let applied = false;
  for (const result of results) {
    const entry = state.outbox.find((e) => e.clientMutationId === result.clientMutationId);
    if (!entry) continue;
    if (result.status === "rejected") {
      quarantineEntry(state, entry, result.error ?? rejectedWithoutReason(), now);
      rebaseNeeded = true;
      continue;
    }
    applied = true;
    entry.pushed = true;
    if (result.serverId !== undefined) entry.serverId = result.serverId;
    if (result.superseded === true && !entry.superseded) {
      // Every write lost its merge: the view shows the server's values, not this guess.
      entry.superseded = true;
      rebaseNeeded = true;
    }
    state.dirtyOutbox.add(entry.clientMutationId);
    // Settled before its answer came: a pull has shown it already.
    if (entry.mutationId <= state.meta.syncedMutationId) {
      state.removeOutbox((e) => e === entry);
    }
  }
  if (rebaseNeeded) rebase(state);
  return applied;
}

function quarantineEntry(state: ReplicaState, entry: OutboxEntry, error: Problem, now: number): void {
  const { clientMutationId, mutationId, name, args, hlc } = entry;
  state.quarantine = state.quarantine.filter((q) => q.clientMutationId !== clientMutationId);
  state.quarantine.push({ clientMutationId, mutationId, name, args, hlc, error, quarantinedAt: now });
  state.dirtyQuarantine.add(clientMutationId);
  state.removeOutbox((e) => e === entry);
}

/**
 * One mutation the server will never take (its request alone is refused as malformed or too
 * large): quarantined with that problem, unless a pull has shown it settled already.
 */
export function refuse(state: ReplicaState, entry: OutboxEntry, problem: Problem, now: number): void {
  if (entry.mutationId <= state.meta.syncedMutationId) {
    recordResults(state, [{ clientMutationId: entry.clientMutationId, mutationId: entry.mutationId, status: "duplicate" }], now);
  } else {
    quarantineEntry(state, entry, problem, now);
    rebase(state);
  }
}

/**
 * The server's sequence for this client is at `last` while the outbox goes further: entries
 * it acknowledged up to `last` stay; every other is numbered on from `last`, in order.
 */
export function renumber(state: ReplicaState, last: number): void {
  let next = last;
  for (const entry of state.outbox) {
    if (entry.pushed && entry.mutationId <= last) continue;
    next += 1;
    entry.mutationId = next;
    entry.pushed = false;
    state.dirtyOutbox.add(entry.clientMutationId);
  }
  state.outbox.sort((a, b) => a.mutationId - b.mutationId);
  state.setMeta({ lastMutationId: next, syncedMutationId: Math.min(last, state.meta.syncedMutationId) });
}

/** Take a quarantined mutation out; `undefined` when it is not there. */
export function unquarantine(state: ReplicaState, clientMutationId: string): QuarantinedEntry | undefined {
  const entry = state.quarantine.find((q) => q.clientMutationId === clientMutationId);
  if (!entry) return undefined;
  state.quarantine = state.quarantine.filter((q) => q !== entry);
  state.dirtyQuarantine.add(clientMutationId);
  return entry;
}

/** Put back an entry `unquarantine` took out. */
export function renewQuarantine(state: ReplicaState, entry: QuarantinedEntry): void {
  state.quarantine.push(entry);
  state.quarantine.sort(byQuarantinedAt);
  state.dirtyQuarantine.add(entry.clientMutationId);
}

function rejectedWithoutReason(): Problem {
  return {
    type: "urn:engine:problem:mutator_failed",
    title: "Mutator failed",
    status: 422,
    code: "mutator_failed",
    detail: "rejected without a reason",
  };
}

/** No mutator has this name in the app's schema. */
export class UnknownMutatorError extends Error {
  constructor(readonly mutator: string) {
    super(`the app has no mutator \`${mutator}\``);
    this.name = "UnknownMutatorError";
  }
}
