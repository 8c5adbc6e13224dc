/**
 * `@engine/db-collection`: the engine's TypeScript client as TanStack DB collections, and CRDT
 * helpers for collaborative columns.
 *
 * - `engineCollectionOptions`: `createCollection(engineCollectionOptions({ name, client }))`
 *   gives live queries over a table of the client's view, with its optimistic writes.
 * - `createCrdtText`, `createCrdtMap`, `applyCrdtUpdate`, `encodeCrdtUpdate`, `editCrdtText`,
 *   `editCrdtMap`: collaborative columns with `yjs`, in the encoding the server reads.
 */

export { engineCollectionOptions } from "./collection.js";
export type { CollectionKey, EngineCollectionOptions, EngineCollectionUtils } from "./collection.js";
export {
  applyCrdtUpdate,
  createCrdtMap,
  createCrdtText,
  crdtStateVector,
  editCrdtMap,
  editCrdtText,
  encodeCrdtUpdate,
  MAP_ROOT,
  TEXT_ROOT,
} from "./crdt.js";
export type { CrdtMap, CrdtText } from "./crdt.js";
