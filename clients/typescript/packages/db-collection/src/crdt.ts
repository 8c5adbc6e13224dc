/**
 * Collaborative columns from TypeScript, with `yjs`: the wire carries a column's document as the
 * standard base64 of a v1 update, the encoding the server's `yrs` reads and writes, and an edit
 * as the update that carries only the edit (`docs/protocol.md#collaborative-columns`).
 *
 * A text column keeps its text in the root text named `text`, a map column its entries in the
 * root map named `map`. The server accepts plain text (no formatting attributes or embeds) and
 * plain map values (JSON values, no nested shared types); anything else is refused as
 * `validation_failed`.
 *
 * ```ts
 * const body = createCrdtText(note.body);
 * const update = editCrdtText(body, (text) => text.insert(text.length, " and more"));
 * await mutators.editNoteBody({ id: note.id, update });
 * ```
 */

import * as Y from "yjs";

/** The root text of a text column's document. */
export const TEXT_ROOT = "text";
/** The root map of a map column's document. */
export const MAP_ROOT = "map";

/** A text column's document. */
export interface CrdtText {
  readonly doc: Y.Doc;
  readonly text: Y.Text;
}

/** A map column's document. */
export interface CrdtMap {
  readonly doc: Y.Doc;
  readonly map: Y.Map<unknown>;
}

type Document = CrdtText | CrdtMap | Y.Doc;

function docOf(document: Document): Y.Doc {
  return document instanceof Y.Doc ? document : document.doc;
}

function fromBase64(text: string): Uint8Array {
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
}

function toBase64(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** A text document, holding `state` (a column's value as a row carries it) when given. */
export function createCrdtText(state?: string): CrdtText {
  const doc = new Y.Doc();
  const text = doc.getText(TEXT_ROOT);
  if (state) applyCrdtUpdate(doc, state);
  return { doc, text };
}

/** A map document, holding `state` (a column's value as a row carries it) when given. */
export function createCrdtMap(state?: string): CrdtMap {
  const doc = new Y.Doc();
  const map = doc.getMap<unknown>(MAP_ROOT);
  if (state) applyCrdtUpdate(doc, state);
  return { doc, map };
}

/** Merge `update` (base64, such as a newer value of the column) into `document`. */
export function applyCrdtUpdate(document: Document, update: string): void {
  Y.applyUpdate(docOf(document), fromBase64(update));
}

/**
 * The base64 update of `document`: all of it, or what it gained since `since` (a state vector
 * from `crdtStateVector`).
 */
export function encodeCrdtUpdate(document: Document, since?: Uint8Array): string {
  return toBase64(Y.encodeStateAsUpdate(docOf(document), since));
}

/** What `document` holds, as a state vector: what `encodeCrdtUpdate` counts from. */
export function crdtStateVector(document: Document): Uint8Array {
  return Y.encodeStateVector(docOf(document));
}

/** Edit `document`'s text and return the update carrying only the edit, for a mutator's arguments. */
export function editCrdtText(document: CrdtText, edit: (text: Y.Text) => void): string {
  const before = crdtStateVector(document);
  document.doc.transact(() => edit(document.text));
  return encodeCrdtUpdate(document, before);
}

/** Edit `document`'s map and return the update carrying only the edit, for a mutator's arguments. */
export function editCrdtMap(document: CrdtMap, edit: (map: Y.Map<unknown>) => void): string {
  const before = crdtStateVector(document);
  document.doc.transact(() => edit(document.map));
  return encodeCrdtUpdate(document, before);
}
