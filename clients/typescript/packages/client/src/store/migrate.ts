/**
 * Stored state of older layouts brought up to the current one, and a store's state moved into
 * another store. Each step takes the state of one version to the next; a store of a newer
 * layout than this client knows is refused rather than misread. `migrateClientStore` moves a
 * whole store (an IndexedDB one into `webSqlitePersistence`'s SQLite), outbox included.
 */

import { CLIENT_STORE_VERSION, type ClientStore, type StoredState } from "./types.js";

/** A step from one layout version to the next: it receives the state of version `from`. */
export type ClientStoreMigration = (state: StoredState) => StoredState;

/**
 * The client's own steps, by the version they start from. Layout 1 is the first: none yet.
 * A change of the layout adds the step from the version before it here.
 */
export const CLIENT_STORE_MIGRATIONS: Readonly<Record<number, ClientStoreMigration>> = {};

/** A store holds a layout this client cannot read. */
export class ClientStoreVersionError extends Error {
  constructor(
    readonly found: number,
    readonly supported: number,
  ) {
    super(
      found > supported
        ? `the store was written by a newer client (layout ${found}; this client reads up to ${supported})`
        : `the store's layout ${found} has no migration to ${supported}`,
    );
    this.name = "ClientStoreVersionError";
  }
}

/**
 * `state` in layout `target` (this client's, by default), each step of `migrations` applied in
 * order from the state's own version.
 */
export function upgradeStoredState(
  state: StoredState,
  migrations: Readonly<Record<number, ClientStoreMigration>> = CLIENT_STORE_MIGRATIONS,
  target: number = CLIENT_STORE_VERSION,
): StoredState {
  let current = state;
  let version = current.meta.version;
  if (version > target) throw new ClientStoreVersionError(version, target);
  while (version < target) {
    const step = migrations[version];
    if (!step) throw new ClientStoreVersionError(version, target);
    current = step(current);
    version += 1;
    current = { ...current, meta: { ...current.meta, version } };
  }
  return current;
}

/**
 * Move what `from` holds into `to`, in this client's layout, as one write: the rows, the buckets,
 * the cursor, the client id with its mutation sequence, the outbox and the quarantine. Then
 * `from` is emptied (when it has `clear`), so a store is moved once. Nothing happens when `from`
 * holds nothing, or when `to` already holds a state: that is the store in use, and a second copy
 * would replay an outbox under the same client id (both are then left as they are). Resolves
 * to whether it moved anything. `from` is read first, so an emptied one costs little to check.
 */
export async function migrateClientStore(from: ClientStore, to: ClientStore): Promise<boolean> {
  const loaded = await from.load();
  if (loaded === undefined || (await to.load()) !== undefined) return false;
  const state = upgradeStoredState(loaded);
  await to.write({
    meta: state.meta,
    putRows: state.rows,
    deleteRows: [],
    putBuckets: state.buckets,
    deleteBuckets: [],
    putOutbox: state.outbox,
    deleteOutbox: [],
    putQuarantine: state.quarantine,
    deleteQuarantine: [],
  });
  await from.clear?.();
  return true;
}
