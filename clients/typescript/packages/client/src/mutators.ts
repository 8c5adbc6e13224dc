/**
 * Optimistic mutators: the app's TypeScript function for a mutator runs against the view at
 * once, and again on the server's rows after every pull until the server's result shows; the
 * mutation itself is queued durably and runs on the server as the app's Rust mutator.
 */

import type { EngineClient, OptimisticMutators } from "./client/api.js";
import type { Queued } from "./replica/outbox.js";
import type { MutatorTypes, TableTypes } from "./schema.js";

/** A call per mutator of the app, by its name. */
export type MutatorCalls<M extends MutatorTypes> = { [K in keyof M & string]: (args: M[K]) => Promise<Queued> };

/**
 * Register `optimistic` functions on `client` and return a call for every mutator of the app:
 * those with an optimistic function show their effect at once; the others queue and sync, and
 * their effect shows once a pull brings it.
 *
 * ```ts
 * const mutate = createEngineMutators(client, {
 *   add_note: (tx, args) => {
 *     tx.insert("notes", { id: args.id || tx.newId(), list_id: args.list_id, title: args.title, … });
 *   },
 * });
 * await mutate.add_note({ list_id: "groceries", title: "Oat milk" });
 * ```
 */
export function createEngineMutators<T extends TableTypes, M extends MutatorTypes>(
  client: EngineClient<T, M>,
  optimistic: OptimisticMutators<T, M>,
): MutatorCalls<M> {
  client.registerOptimistic(optimistic);
  const calls = {} as MutatorCalls<M>;
  for (const name of client.schema.mutators) {
    calls[name] = (args) => client.mutate(name, args);
  }
  return calls;
}
