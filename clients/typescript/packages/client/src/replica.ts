/**
 * The client's replica of its buckets, in memory: the confirmed base, the buckets held and lost,
 * the outbox, the quarantine and the optimistic view above the base. Every operation is
 * synchronous and records what it changed, both for the store (`flush`) and for the app (the
 * view's row changes); the client writes the one and announces the other.
 *
 * `Replica` is the face the client sees. The state lives in `replica/state.ts`, and each flow
 * that changes it in a module of its own: `rebase.ts`, `outbox.ts`, `pull.ts`, `changes.ts` and
 * `counts.ts`.
 */

import type { Permission } from "./authorize.js";
import type { HlcClock } from "./hlc.js";
import { flush, takeViewChanges, unflushed, unwritten, type RowChange } from "./replica/changes.js";
import { counts, written, type Counts } from "./replica/counts.js";
import { mutate, recordResults, refuse, renewQuarantine, renumber, unpushed, unquarantine, type Made, type Queued } from "./replica/outbox.js";
import { applyWrite, replaceWith } from "./replica/mirror.js";
import { canWrite } from "./replica/permissions.js";
import { applyPage, type PageApplied } from "./replica/pull.js";
import { rebase, rebuildOverlay, setOptimistic } from "./replica/rebase.js";
import { ReplicaState } from "./replica/state.js";
import type { AnySchema } from "./schema.js";
import type { OutboxEntry, QuarantinedEntry, StoredState, StoreMeta, StoreWrite } from "./store/types.js";
import type { Actor, OptimisticMutator } from "./view.js";
import type { MutationResult, Problem, PullResponse, Row } from "./wire.js";

export class Replica {
  private readonly state: ReplicaState;

  constructor(
    readonly schema: AnySchema,
    readonly actor: Actor,
    stored: StoredState | undefined,
  ) {
    this.state = new ReplicaState(schema, actor, stored);
    rebuildOverlay(this.state);
    this.state.viewBefore.clear();
  }

  get meta(): StoreMeta {
    return this.state.meta;
  }

  get clock(): HlcClock {
    return this.state.clock;
  }

  get clientId(): string {
    return this.state.clientId;
  }

  // --- The view ----------------------------------------------------------------------------

  /** The live row of the view, or `undefined`. */
  viewRow(table: string, key: string): Row | undefined {
    return this.state.viewRow(table, key);
  }

  /** The buckets holding the confirmed row of `table` with key text `key` (none for a row only
   * pending writes made). */
  rowBuckets(table: string, key: string): readonly string[] {
    return this.state.rowBuckets(table, key);
  }

  /** Whether a pending mutation's optimistic run wrote the row of `table` with key text `key`. */
  pendingOn(table: string, key: string): boolean {
    return this.state.pendingOn(table, key);
  }

  /** Every live row of `table` in the view, by key text. */
  viewRows(table: string): Iterable<[string, Row]> {
    return this.state.viewRows(table);
  }

  /** The changes of the view since the last call. */
  takeViewChanges(): RowChange[] {
    return takeViewChanges(this.state);
  }

  /** The optimistic mutators, by name; the view is rebased with them. */
  setOptimistic(mutators: Record<string, OptimisticMutator<never, never>>): void {
    setOptimistic(this.state, mutators);
  }

  /** Run the pending mutations again over the base, in order. */
  rebase(): void {
    rebase(this.state);
  }

  // --- Mutations ---------------------------------------------------------------------------

  /**
   * Run mutator `name`'s optimistic function (if any) and queue the mutation; `made`: another
   * tab made it, with that id and clock reading.
   */
  mutate(name: string, input: unknown, now: number, made?: Made): Queued {
    return mutate(this.state, name, input, now, made);
  }

  /** Whether the actor may update `row` of `table`, as far as the client can tell. */
  canWrite(table: string, row: Row): Permission {
    return canWrite(this.state, table, row);
  }

  /** Up to `limit` entries no push has acknowledged, in order. */
  unpushed(limit: number): OutboxEntry[] {
    return unpushed(this.state, limit);
  }

  /** Mutations a pull has not yet shown. */
  get pendingCount(): number {
    return this.state.pendingCount;
  }

  get quarantined(): readonly QuarantinedEntry[] {
    return this.state.quarantined;
  }

  /** Record a push's results. Returns whether some mutation was applied. */
  recordResults(results: readonly MutationResult[], now: number): boolean {
    return recordResults(this.state, results, now);
  }

  /** One mutation the server will never take: see `refuse` in `replica/outbox.ts`. */
  refuse(entry: OutboxEntry, problem: Problem, now: number): void {
    refuse(this.state, entry, problem, now);
  }

  /** Number the outbox on from the server's sequence: see `renumber` in `replica/outbox.ts`. */
  renumber(last: number): void {
    renumber(this.state, last);
  }

  /** Take a quarantined mutation out; `undefined` when it is not there. */
  unquarantine(clientMutationId: string): QuarantinedEntry | undefined {
    return unquarantine(this.state, clientMutationId);
  }

  /** Put back an entry `unquarantine` took out. */
  renewQuarantine(entry: QuarantinedEntry): void {
    renewQuarantine(this.state, entry);
  }

  // --- Pulls -------------------------------------------------------------------------------

  /** The buckets the replica holds (not those the actor lost), in key order. */
  heldBuckets(): string[] {
    return this.state.heldBuckets();
  }

  /** The buckets held that `synced` leaves out count as left at `now`: their rows go after the TTL. */
  release(synced: (bucket: string) => boolean, now: number): void {
    for (const bucket of this.state.heldBuckets()) if (!synced(bucket)) this.state.setBucket(bucket, now);
  }

  /** Apply one pull page. */
  applyPage(page: PullResponse, now: number, bucketTtlMs: number): PageApplied {
    return applyPage(this.state, page, now, bucketTtlMs);
  }

  // --- Tabs ----------------------------------------------------------------------------------

  /** Apply a store write the leading tab made; see `replica/mirror.ts`. */
  applyWrite(write: StoreWrite, rebased: boolean, local: ReadonlySet<string>): void {
    applyWrite(this.state, write, rebased, local);
  }

  /** Hold what `stored` holds, keeping the `local` entries it lacks; see `replica/mirror.ts`. */
  replaceWith(stored: StoredState, local: ReadonlySet<string>): void {
    replaceWith(this.state, stored, local);
  }

  /** Take an entry no leader took out of the outbox. */
  dropLocal(clientMutationId: string): void {
    if (this.state.removeOutbox((e) => e.clientMutationId === clientMutationId) > 0) rebase(this.state);
  }

  /** The outbox entry `clientMutationId`, if queued. */
  outboxEntry(clientMutationId: string): OutboxEntry | undefined {
    return this.state.outbox.find((e) => e.clientMutationId === clientMutationId);
  }

  /** How many rebases the replica has made: the other tabs rebase where the leader did. */
  get rebases(): number {
    return this.state.rebases;
  }

  // --- Persistence -------------------------------------------------------------------------

  /** Whether something changed since the last flush. */
  get unflushed(): boolean {
    return unflushed(this.state);
  }

  /** Everything changed since the last flush, as one store write. */
  flush(): StoreWrite {
    return flush(this.state);
  }

  /** `change` is in the store. */
  written(change: StoreWrite): void {
    written(this.state, change);
  }

  /** `change`, which the store failed to write, goes again with the next flush. */
  unwritten(change: StoreWrite): void {
    unwritten(this.state, change);
  }

  /** The status's counts: the mutations the replica or the store holds; see `replica/counts.ts`. */
  get counts(): Counts {
    return counts(this.state);
  }
}
