/**
 * Stored state of older layouts brought up to the current one. Each step takes the state of
 * one version to the next; a store of a newer layout than this client knows is refused rather
 * than misread.
 */

import { CLIENT_STORE_VERSION, type StoredState } from "./types.js";

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
export function migrateClientStore(
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
