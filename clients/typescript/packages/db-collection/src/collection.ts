/**
 * `engineCollectionOptions`: a TanStack DB collection over one table of an engine client's view.
 *
 * The client already keeps the view: the confirmed rows with the pending mutations applied on
 * top, rebased after every pull. The collection's synced state follows that view, so a live query
 * shows a queued write at once and the server's result when it comes, and survives a reload when
 * the client's store does (IndexedDB in browsers). Writes go through the app's mutators, never
 * as table writes: the `onInsert`, `onUpdate` and `onDelete` handlers name the mutator each
 * collection operation is, and the collection's optimistic state gives way to the view's as soon
 * as the mutation is queued.
 *
 * A collection given `syncBuckets` keeps those buckets open while it is in use, so a client that
 * syncs only what is open pulls them then, and lets their rows go after the bucket TTL once the
 * collection is cleaned up.
 *
 * A collection narrowed to a sync rule holds the rows that buckets of the rule the client still
 * holds contain. A row's buckets can change without the row (a membership granted or revoked), so
 * besides the view's row changes the collection follows `onBuckets`: when a pull changes the
 * buckets held, every row of the table is weighed again.
 */

import type { ChangeMessageOrDeleteKeyMessage, CollectionConfig, UtilsRecord } from "@tanstack/db";
import type { EngineClient, MutatorTypes, RowChange, TableTypes } from "@engine/client";

/** A key as the collection knows it: a one-column key's value, or the key's text otherwise. */
export type CollectionKey = string | number;

/** What a collection of an engine table offers beside TanStack DB's own methods. */
export interface EngineCollectionUtils extends UtilsRecord {
  /** The client the collection reads. */
  client: EngineClient;
  /** Push and pull until the outbox is empty: what a "sync now" button calls. */
  sync: () => Promise<void>;
}

/** Options of `engineCollectionOptions` for table `name` of `client`. */
export interface EngineCollectionOptions<T extends TableTypes, M extends MutatorTypes, K extends keyof T & string> {
  /** The table's name. */
  name: K;
  /** The client whose view the collection follows (`createEngineClient`). */
  client: EngineClient<T, M>;
  /**
   * Only the rows held through buckets of this sync rule (and rows only pending writes made so
   * far). All of the table's rows when absent.
   */
  syncRule?: string;
  /**
   * Buckets the collection syncs while it is in use, on a client that syncs only what is open
   * (`syncOpen`): opened (`syncBucket`) when the collection's sync starts, at its first
   * subscriber or `preload`, and released when TanStack DB cleans it up (`gcTime` after its last
   * subscriber, or `cleanup()`). A list's notes: `syncBuckets: [buckets.shared({ list_id })]`.
   */
  syncBuckets?: readonly string[];
  /** The collection's id; `engine:<table>` (or `engine:<table>:<rule>`) when absent. */
  id?: string;
  /** Queue the mutator a `collection.insert(row)` is; resolve once it is queued. */
  onInsert?: (row: T[K]) => Promise<unknown>;
  /** Queue the mutator a `collection.update(key, draft => …)` is, given the changed columns. */
  onUpdate?: (row: T[K], changes: Partial<T[K]>, original: T[K]) => Promise<unknown>;
  /** Queue the mutator a `collection.delete(key)` is. */
  onDelete?: (row: T[K]) => Promise<unknown>;
}

/** The collection's key of `row` of the table with primary key columns `primaryKey`. */
function collectionKey(primaryKey: readonly string[], row: Record<string, unknown>): CollectionKey {
  if (primaryKey.length === 1) {
    const value = row[primaryKey[0]!];
    if (typeof value === "string" || typeof value === "number") return value;
  }
  return JSON.stringify(primaryKey.map((column) => row[column] ?? null));
}

/**
 * A TanStack DB collection configuration over table `name` of `client`:
 * `createCollection(engineCollectionOptions({ name: "notes", client, syncRule: "shared" }))`.
 */
export function engineCollectionOptions<T extends TableTypes, M extends MutatorTypes, K extends keyof T & string>(
  options: EngineCollectionOptions<T, M, K>,
): CollectionConfig<T[K] & object, CollectionKey, never, EngineCollectionUtils> & { utils: EngineCollectionUtils } {
  type Item = T[K] & object;
  const { client, name, syncRule } = options;
  const table = client.schema.tables[name];
  if (!table) throw new TypeError(`the app has no table \`${name}\``);
  if (syncRule !== undefined) {
    const rule = client.schema.syncRules[syncRule];
    if (!rule) throw new TypeError(`the app has no sync rule \`${syncRule}\``);
    if (!rule.tables.includes(name)) throw new TypeError(`sync rule \`${syncRule}\` selects no rows of \`${name}\``);
  }
  const getKey = (row: Item): CollectionKey => collectionKey(table.primaryKey, row as Record<string, unknown>);

  /**
   * Whether a row of the view belongs in the collection, with the buckets held now. A row only
   * pending writes made is in no bucket yet: it shows. A bucket the actor lost still holds its
   * rows for the bucket TTL (`bucketsOf` names it), but no longer brings them into the collection.
   */
  const wanted = (): ((row: Item) => boolean) => {
    if (syncRule === undefined) return () => true;
    const held = new Set(client.buckets());
    return (row) => {
      const buckets = client.bucketsOf(name, row as Record<string, unknown>);
      return buckets.length === 0 || buckets.some((bucket) => bucket.startsWith(`${syncRule}/`) && held.has(bucket));
    };
  };

  return {
    id: options.id ?? (syncRule === undefined ? `engine:${name}` : `engine:${name}:${syncRule}`),
    getKey,
    // A collection that opens buckets syncs them only while in use.
    startSync: options.syncBuckets === undefined,
    sync: {
      sync: ({ begin, write, commit, markReady }) => {
        const opened = (options.syncBuckets ?? []).map((bucket) => client.syncBucket(bucket));
        // The keys the collection's synced state holds now.
        const shown = new Set<CollectionKey>();
        const apply = (messages: ChangeMessageOrDeleteKeyMessage<Item, CollectionKey>[]) => {
          if (messages.length === 0) return;
          begin();
          for (const message of messages) write(message);
          commit();
        };
        /** The messages that bring the collection to the view's rows of `table` that are wanted. */
        const reweigh = (): ChangeMessageOrDeleteKeyMessage<Item, CollectionKey>[] => {
          const messages: ChangeMessageOrDeleteKeyMessage<Item, CollectionKey>[] = [];
          const keep = wanted();
          const left = new Set(shown);
          for (const row of client.rows(name) as Item[]) {
            const key = getKey(row);
            left.delete(key);
            if (keep(row)) {
              if (!shown.has(key)) messages.push({ type: "insert", value: row });
              shown.add(key);
            } else if (shown.delete(key)) {
              messages.push({ type: "delete", key });
            }
          }
          for (const key of left) {
            shown.delete(key);
            messages.push({ type: "delete", key });
          }
          return messages;
        };
        begin();
        for (const message of reweigh()) write(message);
        commit();
        // The local copy is the snapshot: offline, the collection is ready with what it holds.
        markReady();

        const unsubscribeChanges = client.onChange((changes: RowChange[]) => {
          const messages: ChangeMessageOrDeleteKeyMessage<Item, CollectionKey>[] = [];
          const keep = wanted();
          for (const change of changes) {
            if (change.table !== name) continue;
            const row = change.row as Item | undefined;
            const previous = change.previous as Item | undefined;
            const key = getKey((row ?? previous)!);
            if (row && keep(row)) {
              messages.push({ type: shown.has(key) ? "update" : "insert", value: row });
              shown.add(key);
            } else if (shown.delete(key)) {
              messages.push({ type: "delete", key });
            }
          }
          apply(messages);
        });
        const unsubscribeBuckets = syncRule === undefined ? () => {} : client.onBuckets(() => apply(reweigh()));
        return () => {
          unsubscribeChanges();
          unsubscribeBuckets();
          for (const bucket of opened) bucket.release();
        };
      },
    },
    onInsert: options.onInsert
      ? async ({ transaction }) => {
          for (const mutation of transaction.mutations) await options.onInsert!(mutation.modified as T[K]);
        }
      : undefined,
    onUpdate: options.onUpdate
      ? async ({ transaction }) => {
          for (const mutation of transaction.mutations) {
            await options.onUpdate!(
              mutation.modified as T[K],
              mutation.changes as Partial<T[K]>,
              mutation.original as T[K],
            );
          }
        }
      : undefined,
    onDelete: options.onDelete
      ? async ({ transaction }) => {
          for (const mutation of transaction.mutations) await options.onDelete!(mutation.original as T[K]);
        }
      : undefined,
    utils: { client: client as unknown as EngineClient, sync: () => client.sync() },
  };
}
