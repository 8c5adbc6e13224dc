/**
 * A note's body, edited in place: a text area over the note's collaborative text column. What
 * the user types goes into a local `yjs` document at once, and out as `edit_note_body` updates
 * (what changed since the last one, every `FLUSH_MS`); what others typed arrives as the row's new
 * `body` and merges into the same document, so two people typing in one body converge, each
 * keeping their caret where it was in the text.
 *
 * Beside the body, the note's image (`images.ts`): shown large, and for those who may edit the
 * note, a file field that attaches one (offline too) and a button that takes it away.
 */

import { applyCrdtUpdate, createCrdtText, crdtStateVector, encodeCrdtUpdate, type CrdtText } from "@engine/db-collection";
import * as Y from "yjs";

import { button, el, setText } from "./dom.js";
import type { BlobImages } from "./images.js";

/** How long typing gathers before it is queued as one update. */
const FLUSH_MS = 250;

export class NoteBody {
  readonly element: HTMLElement;
  private readonly heading = el("h3", { id: "note-heading" });
  private readonly area = el("textarea", { id: "note-body", rows: "6", "data-testid": "body" });
  private readonly image = el("div", { class: "note-image", "data-testid": "note-image" });
  private readonly file = el("input", { type: "file", id: "note-image-file", accept: "image/*", "data-testid": "attach-image" });
  private readonly removeImage: HTMLButtonElement;
  private readonly imageControls: HTMLElement;
  private noteId: string | undefined;
  private document: CrdtText | undefined;
  /** The document's state vector when the last update was sent. */
  private sent: Uint8Array | undefined;
  /** Whether the user typed since the last update was sent. */
  private dirty = false;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly send: (noteId: string, update: string) => Promise<unknown>,
    private readonly close: () => void,
    private readonly images: BlobImages,
    /** Attach `file` to note `noteId` as its image (`null`: take the image away). */
    private readonly attach: (noteId: string, file: File | null) => void,
  ) {
    this.removeImage = button("Remove image", () => this.noteId !== undefined && this.attach(this.noteId, null), {
      class: "secondary",
      "data-testid": "remove-image",
    });
    this.imageControls = el(
      "div",
      { class: "image-controls" },
      el("label", { for: "note-image-file" }, "Image"),
      this.file,
      this.removeImage,
    );
    this.element = el(
      "section",
      { class: "note-pane", "aria-labelledby": "note-heading", "data-testid": "note-pane" },
      el("div", { class: "pane-head" }, this.heading, button("Close", () => this.close(), { "data-testid": "close-note" })),
      el("label", { for: "note-body" }, "Body"),
      this.area,
      el("p", { class: "hint-text" }, "Everyone with the list can type here at once; the text merges as you type."),
      this.image,
      this.imageControls,
    );
    this.element.hidden = true;
    this.image.hidden = true;
    this.file.addEventListener("change", () => {
      const file = this.file.files?.[0];
      if (file && this.noteId !== undefined) this.attach(this.noteId, file);
      this.file.value = "";
    });
    this.area.addEventListener("input", () => this.typed());
    this.area.addEventListener("blur", () => this.flush());
  }

  get open(): string | undefined {
    return this.noteId;
  }

  /** Show note `id` (titled `title`, its body `state`, its image `image`), or nothing. */
  show(id: string | undefined, title = "", state = "", readOnly = false, image: string | null = null): void {
    if (this.noteId !== id) {
      this.flush();
      this.noteId = id;
      this.document = id === undefined ? undefined : createCrdtText(state);
      this.sent = this.document && crdtStateVector(this.document);
      this.dirty = false;
      this.area.value = this.document?.text.toString() ?? "";
    }
    this.element.hidden = id === undefined;
    setText(this.heading, title);
    this.area.readOnly = readOnly;
    this.images.show(this.image, id === undefined ? null : image, `Image of ${title}`);
    this.imageControls.hidden = readOnly;
    this.file.disabled = readOnly;
    this.removeImage.hidden = image === null;
  }

  /** The open note's body as the server now has it: merged, the caret kept in its place in the text. */
  merge(state: string): void {
    const document = this.document;
    if (!document || !state) return;
    const { selectionStart, selectionEnd } = this.area;
    const start = Y.createRelativePositionFromTypeIndex(document.text, selectionStart);
    const end = Y.createRelativePositionFromTypeIndex(document.text, selectionEnd);
    applyCrdtUpdate(document, state);
    const text = document.text.toString();
    if (text === this.area.value) return;
    this.area.value = text;
    const at = (position: Y.RelativePosition) =>
      Y.createAbsolutePositionFromRelativePosition(position, document.doc)?.index ?? text.length;
    if (this.area === globalThis.document.activeElement) {
      this.area.setSelectionRange(at(start), at(end));
    }
  }

  /** The text area changed: the difference goes into the document as one edit. */
  private typed(): void {
    const document = this.document;
    if (!document) return;
    const before = document.text.toString();
    const after = this.area.value;
    let prefix = 0;
    while (prefix < before.length && prefix < after.length && before[prefix] === after[prefix]) prefix++;
    let suffix = 0;
    while (
      suffix < before.length - prefix &&
      suffix < after.length - prefix &&
      before[before.length - 1 - suffix] === after[after.length - 1 - suffix]
    ) {
      suffix++;
    }
    document.doc.transact(() => {
      document.text.delete(prefix, before.length - prefix - suffix);
      document.text.insert(prefix, after.slice(prefix, after.length - suffix));
    });
    this.dirty = true;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.flush(), FLUSH_MS);
  }

  /** Queue what was typed since the last update. */
  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const document = this.document;
    const id = this.noteId;
    if (!document || id === undefined || !this.dirty) return;
    // What others typed and merged here since may ride along: the server merges it again as a no-op.
    const update = encodeCrdtUpdate(document, this.sent);
    this.sent = crdtStateVector(document);
    this.dirty = false;
    void this.send(id, update).catch(() => undefined);
  }
}
