/**
 * The write rules applied to the replica: the context `authorize.ts` evaluates a write in (the
 * buckets the pulls said are held, the view's live rows as the mutation began), the check each
 * write of a mutation's local run goes through, and whether the actor may update a row.
 */

import { authorizeWrite, type Permission, type WriteContext } from "../authorize.js";
import { ForbiddenError } from "../errors.js";
import { isSoftDeleted, type WriteCheck } from "../view.js";
import type { Row } from "../wire.js";
import type { ReplicaState } from "./state.js";

/** What a write is evaluated in: the replica as it is now, before the mutation's own writes. */
export function writeContext(state: ReplicaState): WriteContext {
  const view = state.overlay;
  return {
    schema: state.schema,
    actor: state.actor,
    held: (bucket) => state.held.get(bucket) === null,
    *rows(table) {
      const schema = state.schema.tables[table];
      if (!schema) return;
      for (const key of new Set(view.keys(table))) {
        const row = view.get(table, key);
        if (row && !isSoftDeleted(schema, row)) yield row;
      }
    },
    created: new Set(),
  };
}

/**
 * The writes of one local run of a mutator, each evaluated as it is made. A write the server
 * would certainly refuse throws `ForbiddenError`; the refusal is kept, so that the run fails
 * even when the mutator catches it and goes on, as the server fails the whole mutation.
 */
export class MutationChecks {
  private readonly context: WriteContext;
  private refusal: ForbiddenError | undefined;

  constructor(state: ReplicaState) {
    this.context = writeContext(state);
  }

  readonly check: WriteCheck = (table, before, after) => {
    const verdict = authorizeWrite(this.context, { table, before, after });
    if (verdict.kind !== "refused") return;
    this.refusal ??= new ForbiddenError(verdict.message);
    throw this.refusal;
  };

  /** Throw the run's refusal, if a write was refused. */
  settle(): void {
    if (this.refusal) throw this.refusal;
  }
}

/** Whether the actor may update `row` of `table`, as far as the client can tell. */
export function canWrite(state: ReplicaState, table: string, row: Row): Permission {
  const verdict = authorizeWrite(writeContext(state), { table, before: row, after: row });
  return verdict.kind === "unknown" ? "unknown" : verdict.kind === "allowed";
}
