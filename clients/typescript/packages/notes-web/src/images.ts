/**
 * The images attached to notes, as elements that follow their blob's status
 * (`createEngineBlobs`). The bytes show as soon as they are on this device: at once for the user
 * who attached them, offline too, with "Uploading…" beside them until the server has them.
 * Another member sees "Uploading…" in their place until the bytes arrive, then the image; a
 * member who may not read it (removed from the list) sees "Image unavailable".
 *
 * One watch and one object URL per blob, however many elements show it (the note's row and its
 * open pane). Elements leave the page without telling (the note list draws only the rows on
 * screen): a sweep a moment after a change forgets the ones no longer on the page (not at once:
 * an element is shown before it is put on the page), and a blob shown nowhere any more lets its
 * watch and its object URL go.
 */

import type { BlobStatus, EngineBlobs } from "@engine/client";

import { el } from "./dom.js";

/** How long after a change the sweep waits. */
const SWEEP_MS = 2_000;

/** A blob shown on the page. */
interface Shown {
  readonly elements: Set<HTMLElement>;
  status: BlobStatus;
  /** The object URL of its bytes, once they are on this device. */
  url: string | undefined;
  stop: () => void;
}

/** What stands beside (or in place of) the image, by status; `""` for nothing. */
function caption(status: BlobStatus, url: string | undefined): string {
  switch (status.state) {
    case "uploading":
      return "Uploading…";
    case "missing":
      return "Image unavailable";
    case "failed":
      return "Not uploaded";
    case "available":
      return url ? "" : "Loading image…";
    default:
      return "Loading image…";
  }
}

export class BlobImages {
  private readonly shown = new Map<string, Shown>();
  private sweep: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly blobs: EngineBlobs) {}

  /** Show in `element` the image `key` (`null`: none, and the element hides), described as `alt`. */
  show(element: HTMLElement, key: string | null, alt: string): void {
    const before = element.dataset.blob;
    element.dataset.alt = alt;
    if (before !== undefined && before !== key) {
      this.shown.get(before)?.elements.delete(element);
      this.sweepSoon();
    }
    if (key === null) {
      delete element.dataset.blob;
      delete element.dataset.state;
      element.replaceChildren();
      element.hidden = true;
      return;
    }
    element.hidden = false;
    element.dataset.blob = key;
    let shown = this.shown.get(key);
    if (!shown) {
      const entry: Shown = { elements: new Set(), status: this.blobs.status(key), url: undefined, stop: () => undefined };
      this.shown.set(key, entry);
      shown = entry;
      entry.stop = this.blobs.watch(key, (status) => this.changed(key, status));
    }
    shown.elements.add(element);
    this.render(element, shown);
    this.sweepSoon();
  }

  private changed(key: string, status: BlobStatus): void {
    const shown = this.shown.get(key);
    if (!shown) return;
    shown.status = status;
    if (!status.local && shown.url) {
      // The bytes left this device (the rows naming them did): so does their image.
      URL.revokeObjectURL(shown.url);
      shown.url = undefined;
    }
    if (status.local && !shown.url) void this.load(key, shown);
    for (const element of shown.elements) this.render(element, shown);
    this.sweepSoon();
  }

  /** Make the object URL of `key`'s bytes, kept on this device. */
  private async load(key: string, shown: Shown): Promise<void> {
    const [bytes, type] = await Promise.all([this.blobs.get(key), this.blobs.type(key)]).catch(() => [undefined, ""] as const);
    if (!bytes || shown.url || this.shown.get(key) !== shown) return;
    shown.url = URL.createObjectURL(new Blob([bytes as Uint8Array<ArrayBuffer>], type ? { type } : {}));
    for (const element of shown.elements) this.render(element, shown);
  }

  private render(element: HTMLElement, shown: Shown): void {
    const { status, url } = shown;
    const text = caption(status, url);
    const alt = element.dataset.alt ?? "";
    const signature = `${url ?? ""}\n${text}\n${alt}`;
    element.dataset.state = status.state;
    element.title = status.state === "failed" && status.error ? status.error : "";
    if (element.dataset.signature === signature) return;
    element.dataset.signature = signature;
    const children: HTMLElement[] = [];
    if (url) children.push(el("img", { src: url, alt }));
    if (text) children.push(el("span", { class: "image-state" }, text));
    element.replaceChildren(...children);
  }

  /** Sweep in a moment: forget the elements no longer on the page, and the blobs none shows. */
  private sweepSoon(): void {
    if (this.sweep !== undefined) return;
    this.sweep = setTimeout(() => {
      this.sweep = undefined;
      for (const [key, shown] of this.shown) {
        for (const element of shown.elements) {
          if (!element.isConnected || element.dataset.blob !== key) shown.elements.delete(element);
        }
        if (shown.elements.size > 0) continue;
        shown.stop();
        if (shown.url) URL.revokeObjectURL(shown.url);
        this.shown.delete(key);
      }
    }, SWEEP_MS);
  }
}
