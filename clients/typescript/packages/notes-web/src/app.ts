/**
 * The signed-in app: lists, the selected list's notes (renamed in place, done, filtered,
 * cleared, reordered by keyboard or by touch), its members and their roles, who else is looking,
 * a status line (which also says when the device's store refuses a write), and the writes the
 * server refused with what the user can do about each.
 *
 * Rendering is incremental. `NoteList` changes only the notes a change names and draws only
 * the notes on screen, so a write costs the same at 10 notes and at 10,000 (`BENCHMARKS.md`, "The
 * notes web app"). The short lists (lists, members, refused writes) are keyed and rebuilt on
 * their own changes only.
 *
 * A note may carry an image (`images.ts`): attached in its pane (offline too: the bytes are kept
 * on the device and uploaded when it is online), shown small in its row and large in its pane.
 *
 * The client syncs only what is open (`main.ts`): the user's index of lists (`own`,
 * `memberships`, `invitations`) always, and the selected list's `shared` bucket (its notes and
 * members) while it is selected. The lists in the sidebar are the user's accepted memberships,
 * which carry their list's title, so they need no list's own bucket.
 *
 * Roles come from the rules the client holds (`client.canWrite`): a viewer sees no editing
 * controls and a "View only" badge; only the owner sees sharing; any other member may leave.
 * A 401 from the server signs the user out without touching the outbox: the status says so,
 * and signing in again as the same user sends what waited.
 */

import {
  BearerToken,
  BlobError,
  newUuid,
  type EngineBlobs,
  type EngineClient,
  type QuarantinedEntry,
  type Queued,
  type Status,
  type SyncedBucket,
} from "@engine/client";
import { engineCollectionOptions } from "@engine/db-collection";
import { buckets, mutators, type Mutators, type ShareRole, type Tables } from "@engine/notes";
import { createCollection, type ChangeMessage, type Collection } from "@tanstack/db";

import { NoteBody } from "./body.js";
import { button, el, Keyed, setAttribute, setText } from "./dom.js";
import { BlobImages } from "./images.js";
import { describeFailure, describeRefused, type KnownList, type Names } from "./messages.js";
import { ask, signInForm } from "./session.js";

export type NotesClient = EngineClient<Tables, Mutators>;
type Note = Tables["notes"];
type List = Tables["lists"];
type Member = Tables["list_members"];
type Filter = "all" | "active" | "done";

/**
 * An auth provider that notices the server's refusal of its token (`refused`, since
 * `refusedAt`). A pull that succeeds after the refusal clears it: a request sent with the old
 * token can be refused after `set` gave a new one, and must not sign the user out again.
 */
export class SessionToken extends BearerToken {
  refused = false;
  refusedAt = 0;
  onRefused: () => void = () => undefined;

  override set(token: string): void {
    super.set(token);
    this.refused = false;
  }

  /** Called by the client after a 401: there is no other token to try, the user must sign in. */
  refresh(): void {
    this.refusedAt = Date.now();
    if (this.refused) return;
    this.refused = true;
    this.onRefused();
  }

  /** Whether the token is refused, given the client's `status`. */
  refusedNow(status: Status): boolean {
    if (this.refused && status.lastError === null && (status.lastPullAt ?? 0) > this.refusedAt) this.refused = false;
    return this.refused;
  }
}

/** What the app needs from the page around it. */
export interface Shell {
  /** Sign in again with `token`: the same user keeps this page, another reloads it. */
  signInAgain(token: string): void;
  /** Sign out: forget the token and this user's local copy. */
  signOut(): Promise<void>;
}

function input(name: string, label: string, attributes: Record<string, string> = {}): HTMLInputElement {
  return el("input", { name, placeholder: label, "aria-label": label, autocomplete: "off", ...attributes });
}

function roleSelect(label: string): HTMLSelectElement {
  return el(
    "select",
    { name: "role", "aria-label": label },
    el("option", { value: "editor" }, "can edit"),
    el("option", { value: "viewer" }, "can view"),
  );
}

/**
 * A form whose submit calls `submit` with its fields' values, then clears its text fields. When
 * `submit` fails the values are put back, unless something new was typed since.
 */
function form(
  testId: string,
  label: string,
  fields: (HTMLInputElement | HTMLSelectElement)[],
  action: string,
  submit: (values: string[]) => Promise<unknown> | undefined,
): HTMLFormElement {
  const element = el("form", { "data-testid": testId, "aria-label": label }, ...fields, el("button", { type: "submit" }, action));
  const texts = fields.filter((f): f is HTMLInputElement => f instanceof HTMLInputElement);
  element.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = fields.map((f) => f.value.trim());
    if (values.some((v) => v === "")) return;
    const before = texts.map((f) => f.value);
    void submit(values)?.catch(() => {
      if (texts.every((field) => field.value === "")) texts.forEach((field, i) => (field.value = before[i]!));
    });
    for (const field of texts) field.value = "";
  });
  return element;
}

/** The time of day, for "Synced at 14:03:12". */
const clock = (ms: number) => new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });

/** One note's row: its controls, made once and updated in place. */
interface NoteRow {
  item: HTMLLIElement;
  done: HTMLInputElement;
  title: HTMLAnchorElement;
  /** The note's image, small; hidden when it has none. */
  image: HTMLElement;
  rename: HTMLButtonElement;
  remove: HTMLButtonElement;
  up: HTMLButtonElement;
  down: HTMLButtonElement;
  note: Note;
}

/**
 * The selected list's notes, kept in `position` order and drawn as a window: only the notes on
 * screen (and a screen's height either side) have nodes, and the list's padding stands for the
 * rest, so a list of 10,000 costs the page what 30 cost it. A change costs a binary search in
 * `order` and the nodes of the notes it names; the window follows the page's scroll.
 *
 * Heights are measured as rows are drawn (a long title wraps to several lines); a note not yet
 * drawn counts as `ESTIMATE` pixels high.
 */
class NoteList {
  readonly element = el("ul", { class: "notes", "data-testid": "notes", "data-filter": "all", "data-size": "0" });
  private readonly notes = new Map<string, Note>();
  /** Nodes of the notes drawn now. */
  private readonly drawn = new Map<string, NoteRow>();
  private readonly heights = new Map<string, number>();
  /** Ids in display order. */
  private order: string[] = [];
  /** `order` through the filter; `undefined` until asked for after a change. */
  private filtered: string[] | undefined;
  private filter: Filter = "all";
  private doneCount = 0;
  private readOnly = false;
  /** Whether rows show their move buttons in place of rename and delete. */
  private reordering = false;
  private frame = 0;

  constructor(
    private readonly make: (note: Note) => NoteRow,
    private readonly counted: () => void,
    /** Whether note `id` has writes (its add, or a change) that have not reached the server. */
    private readonly unsent: (id: string) => boolean,
    private readonly images: BlobImages,
  ) {
    addEventListener("scroll", () => this.schedule(), { passive: true });
    addEventListener("resize", () => this.schedule());
  }

  get size(): number {
    return this.order.length;
  }

  get done(): number {
    return this.doneCount;
  }

  doneIds(): string[] {
    return this.order.filter((id) => this.notes.get(id)!.done);
  }

  /** The notes of a newly selected list. */
  reset(notes: Note[]): void {
    this.notes.clear();
    this.drawn.clear();
    this.element.replaceChildren();
    this.doneCount = 0;
    notes.sort(compare);
    this.order = notes.map((note) => note.id);
    for (const note of notes) {
      this.notes.set(note.id, note);
      if (note.done) this.doneCount++;
    }
    this.changed();
    this.draw();
  }

  /** Put each note in (added or changed; `undefined` takes it out), then draw once. */
  putAll(changes: [id: string, note: Note | undefined][]): void {
    let moved = false;
    for (const [id, note] of changes) moved = this.put(id, note) || moved;
    this.counted();
    if (moved) {
      this.filtered = undefined;
      this.element.dataset.size = String(this.order.length);
      this.draw();
    }
  }

  /** Put `note` in (added or changed); `undefined` takes note `id` out. Returns whether the window must be drawn again. */
  private put(id: string, note: Note | undefined): boolean {
    const before = this.notes.get(id);
    if (!note) {
      if (!before) return false;
      this.order.splice(this.indexOf(before), 1);
      this.notes.delete(id);
      if (before.done) this.doneCount--;
    } else if (!before) {
      this.order.splice(this.insertionPoint(note), 0, id);
      this.notes.set(id, note);
      if (note.done) this.doneCount++;
    } else {
      if (before.done !== note.done) this.doneCount += note.done ? 1 : -1;
      if (compare(before, note) !== 0) {
        this.order.splice(this.indexOf(before), 1);
        this.notes.set(id, note);
        this.order.splice(this.insertionPoint(note), 0, id);
      } else {
        this.notes.set(id, note);
        // Changed in place, and as shown through the filter as before: only its own nodes change.
        if (this.passes(note) === this.passes(before)) {
          const row = this.drawn.get(id);
          if (row) {
            row.note = note;
            this.show(row);
          }
          return false;
        }
      }
    }
    return true;
  }

  setFilter(filter: Filter): void {
    this.filter = filter;
    this.element.dataset.filter = filter;
    this.filtered = undefined;
    this.draw();
  }

  /** Mark again which drawn notes are not on the server yet (a push or a pull ended). */
  refreshUnsent(): void {
    for (const row of this.drawn.values()) row.item.classList.toggle("unsent", this.unsent(row.note.id));
  }

  /** Read-only rows (a viewer's): every drawn row changes, which happens when the role does. */
  setReadOnly(readOnly: boolean): void {
    if (this.readOnly === readOnly) return;
    this.readOnly = readOnly;
    for (const row of this.drawn.values()) this.show(row);
  }

  /** Move buttons in place of rename and delete on every row (`reordering`), or not. */
  setReordering(reordering: boolean): void {
    if (this.reordering === reordering) return;
    this.reordering = reordering;
    for (const row of this.drawn.values()) this.show(row);
  }

  /**
   * The position that puts note `id` one place up (`-1`) or down (`1`): between the neighbour
   * it passes and the one after it. `undefined` at either end.
   */
  positionPast(id: string, step: -1 | 1): number | undefined {
    const note = this.notes.get(id);
    if (!note) return undefined;
    const at = this.indexOf(note);
    const passed = this.order[at + step];
    if (passed === undefined) return undefined;
    const passedAt = this.notes.get(passed)!.position;
    const beyond = this.order[at + 2 * step];
    if (beyond === undefined) return passedAt + step * 1_000;
    const beyondAt = this.notes.get(beyond)!.position;
    const between = Math.floor((passedAt + beyondAt) / 2);
    // Neighbours one apart leave no room between them: the note takes the farther one's place.
    return between === passedAt ? beyondAt : between;
  }

  private changed(): void {
    this.filtered = undefined;
    this.element.dataset.size = String(this.order.length);
    this.counted();
  }

  private passes(note: Note): boolean {
    return this.filter === "all" || note.done === (this.filter === "done");
  }

  private shown(): string[] {
    this.filtered ??= this.filter === "all" ? this.order : this.order.filter((id) => this.passes(this.notes.get(id)!));
    return this.filtered;
  }

  private schedule(): void {
    if (this.frame !== 0) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.draw();
    });
  }

  /** Draw the notes in the window: on screen, and a screen's height above and below. */
  private draw(): void {
    const shown = this.shown();
    const top = this.element.getBoundingClientRect().top;
    const from = -top - innerHeight;
    const to = -top + 2 * innerHeight;
    let offset = 0;
    let first = shown.length;
    let last = shown.length;
    let before = 0;
    for (let i = 0; i < shown.length; i++) {
      const height = this.heights.get(shown[i]!) ?? ESTIMATE;
      if (first === shown.length && offset + height > from) {
        first = i;
        before = offset;
      }
      offset += height;
      if (offset >= to) {
        last = i + 1;
        break;
      }
    }
    let after = 0;
    for (let i = last; i < shown.length; i++) after += this.heights.get(shown[i]!) ?? ESTIMATE;
    const ids = shown.slice(first, last);
    const keep = new Set(ids);
    for (const id of this.drawn.keys()) if (!keep.has(id)) this.drawn.delete(id);
    const nodes = ids.map((id, i) => {
      let row = this.drawn.get(id);
      const note = this.notes.get(id)!;
      if (!row) {
        row = this.make(note);
        this.drawn.set(id, row);
      }
      row.note = note;
      this.show(row);
      setAttribute(row.item, "aria-posinset", String(first + i + 1));
      setAttribute(row.item, "aria-setsize", String(shown.length));
      return row.item;
    });
    this.element.style.paddingTop = `${before}px`;
    this.element.style.paddingBottom = `${after}px`;
    const now = [...this.element.children];
    if (now.length !== nodes.length || now.some((node, i) => node !== nodes[i])) {
      // Moving nodes takes the focus out of them: put it back.
      const focused = this.element.contains(document.activeElement) ? (document.activeElement as HTMLElement) : null;
      this.element.replaceChildren(...nodes);
      if (focused?.isConnected) focused.focus();
    }
    let remeasured = false;
    for (const id of ids) {
      const height = this.drawn.get(id)!.item.offsetHeight;
      if (height > 0 && height !== (this.heights.get(id) ?? ESTIMATE)) remeasured = true;
      if (height > 0) this.heights.set(id, height);
    }
    // Heights unlike the estimate move the window: draw again once they are known.
    if (remeasured) this.schedule();
  }

  private show(row: NoteRow): void {
    const { note } = row;
    if (row.done.checked !== note.done) row.done.checked = note.done;
    row.item.classList.toggle("done", note.done);
    row.item.classList.toggle("read-only", this.readOnly);
    row.item.classList.toggle("unsent", this.unsent(note.id));
    setText(row.title, note.title);
    this.images.show(row.image, note.image, `Image of ${note.title}`);
    setAttribute(row.done, "aria-label", `Done: ${note.title}`);
    setAttribute(row.rename, "aria-label", `Rename ${note.title}`);
    setAttribute(row.remove, "aria-label", `Delete ${note.title}`);
    setAttribute(row.up, "aria-label", `Move ${note.title} up`);
    setAttribute(row.down, "aria-label", `Move ${note.title} down`);
    row.done.disabled = this.readOnly;
    setAttribute(row.done, "aria-describedby", this.readOnly ? "view-only" : null);
    const editing = !this.readOnly && !this.reordering;
    row.rename.hidden = row.remove.hidden = !editing;
    row.rename.disabled = row.remove.disabled = !editing;
    const moving = !this.readOnly && this.reordering;
    row.up.hidden = row.down.hidden = !moving;
    // Moved past the notes the filter hides too: the ends are the list's, not the filter's.
    const at = moving ? this.indexOf(note) : -1;
    row.up.disabled = !moving || at === 0;
    row.down.disabled = !moving || at === this.order.length - 1;
  }

  private indexOf(note: Note): number {
    const at = this.insertionPoint(note);
    return this.order[at] === note.id ? at : this.order.indexOf(note.id);
  }

  /** Where `note` goes in `order`, by binary search. */
  private insertionPoint(note: Note): number {
    let low = 0;
    let high = this.order.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (compare(this.notes.get(this.order[mid]!)!, note) < 0) low = mid + 1;
      else high = mid;
    }
    return low;
  }
}

/** The largest image the notes server takes (`example_notes::BLOB_MAX_SIZE`). */
export const IMAGE_MAX_BYTES = 10 * 1024 * 1024;

/** `bytes` in megabytes, for people. */
const megabytes = (bytes: number) => `${(bytes / 1024 / 1024).toLocaleString("en", { maximumFractionDigits: 1 })} MB`;

/** The height of a note's row before it is drawn and measured (one line), in pixels. */
const ESTIMATE = 45;

const compare = (a: Note, b: Note) => a.position - b.position || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export class NotesApp {
  private readonly call: ReturnType<typeof mutators<Promise<Queued>>>;
  private readonly notes: Collection<Note, string | number>;
  private readonly members: Collection<Member, string | number>;
  /**
   * The user's index of lists: the memberships its `memberships` bucket holds. Not every row of
   * `members`: the rows of a list the user left or lost stay in the view until a pull drops them
   * (and for the bucket TTL), held by the list's bucket, which no longer makes them the user's.
   */
  private readonly index: Collection<Member, string | number>;
  private selected: string | undefined;
  /** The selected list's bucket, synced while it is selected. */
  private selectedBucket: SyncedBucket | undefined;
  private filter: Filter = "all";
  /** Lists the user has seen, kept after they lose one, so a refusal can name it. */
  private readonly known: Map<string, KnownList>;
  private readonly knownKey: string;
  private readonly names: Names;
  // The page is built once; a render changes what its parts hold and never moves them, so focus
  // and what is typed survive the renders a sync brings.
  private readonly newList: HTMLFormElement;
  private readonly newNote: HTMLFormElement;
  private readonly share: HTMLFormElement;
  private readonly connection = el("span", { "data-testid": "connection", class: "badge" });
  private readonly statusText = el("span", { class: "status-text", "data-testid": "status" });
  private readonly pending = el("span", { class: "pending", "data-testid": "pending" });
  /** Why the device's store refused the last write, while it does (`status.storeError`). */
  private readonly storeError = el("span", { class: "store-error", "data-testid": "store-error" });
  /** How far a first sync has got, as the server estimates it on each page. */
  private readonly progress = el("progress", { class: "sync-progress", "data-testid": "sync-progress", "aria-label": "Loading your notes" });
  private readonly empty = el("section", { class: "empty" }, el("p", {}, "Choose a list, or add one."));
  // Live regions present from the start, so what is put into them is announced.
  private readonly refusal = el("div", { class: "refusal", role: "alert", "data-testid": "refusal" });
  private readonly announce = el("div", { class: "visually-hidden", role: "status", "data-testid": "announce" });
  private readonly signedOut = el("div", { class: "signed-out", "data-testid": "signed-out" });
  private readonly viewOnlyBadge = el("span", { class: "tag", "data-testid": "view-only-badge" }, "View only");
  private readonly viewOnly = el(
    "p",
    { class: "hint", id: "view-only", "data-testid": "view-only" },
    "You can view this list. Only its owner and editors can change its notes.",
  );
  private readonly ownerOnly = el(
    "p",
    { class: "hint", id: "owner-only", "data-testid": "owner-only" },
    "Only the list's owner can share it.",
  );
  private readonly listTitle = el("span", { class: "list-title" });
  private readonly renameListButton = button("Rename", () => this.renameList(), {
    class: "secondary",
    "data-testid": "rename-list",
    "aria-label": "Rename the list",
  });
  private readonly avatars = el("div", { class: "avatars", role: "group", "data-testid": "present", "aria-label": "Also here" });
  private readonly counts = el("p", { class: "counts", "data-testid": "counts", "aria-live": "polite" });
  private readonly filters: Record<Filter, HTMLButtonElement>;
  private readonly clearDone: HTMLButtonElement;
  private readonly listPane: HTMLElement;
  private readonly refusedPane: HTMLElement;
  /** The lists in the sidebar: the user's accepted memberships, keyed by list. */
  private readonly listItems: Keyed<Member>;
  /** The user's own pending memberships: lists shared with them, to accept or decline. */
  private readonly invitationItems: Keyed<Member>;
  private readonly invitations: HTMLElement;
  private readonly noteList: NoteList;
  private readonly body: NoteBody;
  private readonly images: BlobImages;
  /** The note the address named before its row arrived: opened when it does. */
  private awaitedNote: string | undefined;
  private readonly memberItems: Keyed<Member>;
  private readonly refusedItems: Keyed<QuarantinedEntry>;
  private notesReadOnly = false;
  private listOwned = false;
  private readonly reorder: HTMLButtonElement;
  private readonly leave: HTMLButtonElement;
  /** `status.pending` at the last render of the status. */
  private lastPending = -1;
  /** Whether this is the user's first sync on this device: nothing was ever pulled into the store. */
  private readonly firstSync: boolean;

  constructor(
    private readonly root: HTMLElement,
    private readonly client: NotesClient,
    private readonly token: SessionToken,
    private readonly shell: Shell,
    private readonly blobs: EngineBlobs,
  ) {
    this.call = mutators(client);
    this.images = new BlobImages(blobs);
    this.firstSync = client.cursor === null;
    const me = client.actor;
    this.knownKey = `engine-notes-lists-${me.userId}`;
    this.known = new Map(Object.entries(JSON.parse(localStorage.getItem(this.knownKey) ?? "{}") as Record<string, KnownList>));
    this.names = {
      me: me.ownerId,
      list: (id) => this.known.get(id),
      noteTitle: (id) => this.notes.get(id)?.title,
    };
    this.newList = form("new-list", "New list", [input("title", "New list")], "Add", ([title]) =>
      this.attempt(this.call.createList({ title: title! }).then((queued) => this.select(queued.result as string))),
    );
    this.newNote = form("new-note", "New note", [input("title", "New note", { id: "new-note-title" })], "Add", ([title]) => {
      if (this.selected === undefined) return;
      return this.persisted(
        this.notes.insert({
          id: newUuid(),
          owner_id: me.ownerId,
          list_id: this.selected,
          title: title!,
          done: false,
          position: Date.now(),
          body: "AAA=",
          image: null,
          deleted_at: null,
        }),
      );
    });
    this.share = form(
      "share",
      "Share the list",
      [input("user", "Share with (user id)"), roleSelect("Their role")],
      "Share",
      ([user, role]) => {
        const listId = this.selected;
        if (listId === undefined) return;
        if (user === me.userId) {
          this.refuse("You own this list already: share it with someone else.");
          return Promise.reject(new Error("the owner's membership cannot change"));
        }
        return this.attempt(this.call.shareList({ list_id: listId, user_id: user!, role: role as ShareRole }));
      },
    );
    this.share.classList.add("share");
    this.members = createCollection(engineCollectionOptions({ name: "list_members", client }));
    this.index = createCollection(engineCollectionOptions({ name: "list_members", client, syncRule: "memberships" }));
    this.notes = createCollection(
      engineCollectionOptions({
        name: "notes",
        client,
        onInsert: (note) => this.call.addNote({ id: note.id, list_id: note.list_id, title: note.title }),
        onUpdate: (note, changes) =>
          this.call.updateNote({
            id: note.id,
            title: changes.title ?? null,
            done: changes.done ?? null,
            position: changes.position ?? null,
          }),
        onDelete: (note) => this.call.deleteNote({ id: note.id }),
      }),
    );

    const lists = el("ul", { class: "lists" });
    const invited = el("ul", { class: "invitation-list" });
    this.invitationItems = new Keyed(invited, (member) => this.invitationItem(member));
    this.invitations = el(
      "section",
      { class: "invitations", "aria-labelledby": "invitations-heading", "data-testid": "invitations" },
      el("h2", { id: "invitations-heading" }, "Invitations"),
      invited,
    );
    this.listItems = new Keyed(
      lists,
      (entry) => {
        const listId = entry.list_id;
        const link = el("a", { "data-testid": "list", "data-list": listId, href: `?list=${encodeURIComponent(listId)}` });
        link.addEventListener("click", (event) => {
          if (event.ctrlKey || event.metaKey || event.shiftKey) return;
          event.preventDefault();
          this.select(listId);
        });
        return el("li", {}, link);
      },
      (item, entry) => {
        const link = item.firstElementChild as HTMLAnchorElement;
        setText(link, entry.title);
        link.classList.toggle("selected", entry.list_id === this.selected);
        setAttribute(link, "aria-current", entry.list_id === this.selected ? "page" : null);
      },
    );
    this.noteList = new NoteList(
      (note) => this.noteRow(note),
      () => this.renderCounts(),
      (id) => this.client.isPending("notes", id),
      this.images,
    );
    this.body = new NoteBody(
      (id, update) => this.attempt(this.call.editNoteBody({ id, update })),
      () => this.openNote(undefined),
      this.images,
      (id, file) => void this.attachImage(id, file),
    );
    const filterBar = el("div", { class: "filters", role: "group", "aria-label": "Show" });
    this.filters = {} as Record<Filter, HTMLButtonElement>;
    for (const filter of ["all", "active", "done"] as const) {
      const choice = button(filter[0]!.toUpperCase() + filter.slice(1), () => this.setFilter(filter), {
        "data-testid": `filter-${filter}`,
        "aria-pressed": String(filter === "all"),
      });
      this.filters[filter] = choice;
      filterBar.append(choice);
    }
    this.clearDone = button("Clear done", () => void this.clearDoneNotes(), { "data-testid": "clear-done" });
    // Moving notes without a keyboard (Alt+Up and Alt+Down do it with one): each row's move
    // buttons stand in for its rename and delete while this is pressed.
    this.reorder = button("Reorder", () => this.setReordering(this.reorder.getAttribute("aria-pressed") !== "true"), {
      class: "secondary",
      "data-testid": "reorder",
      "aria-pressed": "false",
    });
    this.leave = button("Leave list", () => void this.leaveList(), { class: "danger", "data-testid": "leave-list" });
    const members = el("ul", { class: "members" });
    this.memberItems = new Keyed(members, (member) => this.memberRow(member), (item, member) => this.showMember(item, member));
    const refused = el("ul");
    this.refusedItems = new Keyed(refused, (entry) => this.refusedItem(entry));
    this.listPane = el(
      "section",
      { class: "list", "aria-labelledby": "list-heading" },
      el("div", { class: "list-head" }, el("h2", { id: "list-heading" }, this.listTitle, this.viewOnlyBadge, this.avatars), this.renameListButton),
      this.viewOnly,
      this.newNote,
      el("div", { class: "toolbar" }, filterBar, this.counts, this.reorder, this.clearDone),
      this.body.element,
      this.noteList.element,
      el("h3", {}, "Shared with"),
      members,
      this.share,
      this.ownerOnly,
      this.leave,
    );
    this.refusedPane = el(
      "section",
      { class: "quarantine", "aria-labelledby": "refused-heading" },
      el("h2", { id: "refused-heading" }, "Not saved"),
      refused,
    );
    const header = el(
      "header",
      {},
      el("h1", {}, "Notes"),
      el("p", { class: "status", role: "status" }, this.connection, this.statusText, this.progress, this.pending, this.storeError),
      el(
        "div",
        { class: "account" },
        el("span", { class: "user", "data-testid": "user" }, me.userId),
        button("Sign out", () => void this.signOut(), { "data-testid": "sign-out" }),
      ),
    );
    this.signedOut.hidden = true;
    root.replaceChildren(
      header,
      this.signedOut,
      el(
        "main",
        {},
        this.refusal,
        el("nav", { "aria-label": "Lists" }, this.invitations, el("h2", { class: "visually-hidden" }, "Lists"), lists, this.newList),
        el("div", { class: "panes" }, this.empty, this.listPane, this.refusedPane),
      ),
      this.announce,
    );

    this.members.subscribeChanges(() => {
      this.renderInvitations();
      this.renderList();
    });
    this.index.subscribeChanges(() => this.renderLists());
    // The selected list's bucket arrives, or goes.
    client.onBuckets(() => {
      this.renderList();
      this.renderStatus();
    });
    this.notes.subscribeChanges((changes) => this.notesChanged(changes));
    client.onStatus(() => this.renderStatus());
    blobs.onStatus((status) => {
      if (status.state === "failed") this.refuse(`An image was not uploaded: ${status.error ?? "the server refused it"}.`);
    });
    client.onPresence(() => this.renderPresence());
    token.onRefused = () => this.renderStatus();
    addEventListener("online", () => this.connectivityChanged());
    addEventListener("offline", () => this.connectivityChanged());
    addEventListener("popstate", () => {
      this.select(listInAddress(), false);
      this.openNote(noteInAddress(), false);
    });
    addEventListener("keydown", (event) => this.shortcut(event));
  }

  /** The first render, and the list the address names. */
  start(): void {
    this.renderLists();
    this.renderStatus();
    const listId = listInAddress();
    if (listId !== undefined) this.select(listId, false);
    else this.renderList();
    this.openNote(noteInAddress(), false);
  }

  /** Open note `id`'s body beside its list (`undefined` closes it); the address names it. */
  private openNote(id: string | undefined, remember = true): void {
    const note = id === undefined ? undefined : this.notes.get(id);
    const shown = note && note.list_id === this.selected ? note : undefined;
    this.awaitedNote = !remember && id !== undefined && !note ? id : undefined;
    if (remember && shown?.id !== this.body.open) {
      const query = new URLSearchParams(location.search);
      if (shown) query.set("note", shown.id);
      else query.delete("note");
      history.pushState(null, "", `?${query.toString()}`);
    }
    this.body.show(shown?.id, shown?.title, shown?.body, this.notesReadOnly, shown?.image ?? null);
    if (shown && remember) this.body.element.querySelector("textarea")!.focus();
  }

  // --- Writes ------------------------------------------------------------------------------

  /**
   * `write`, its failure said in the alert in words. A failure of the device's store is not the
   * write's: the write is queued all the same, and the status line says it (`storeError`).
   */
  private attempt<R>(write: Promise<R>): Promise<R> {
    return write.catch((error: unknown) => {
      if (!this.storeFailed(error)) this.refuse(describeFailure(error, this.names, this.selected));
      throw error;
    });
  }

  /** Whether `error` is the device's store failing to write, as the status has it now. */
  private storeFailed(error: unknown): boolean {
    const storeError = this.client.status.storeError;
    return storeError !== null && error instanceof Error && error.message === storeError;
  }

  /**
   * A collection write: its transaction's outcome, a failure said in the alert. One the device's
   * store failed to keep is queued all the same: it counts as done, so a form keeps it typed once.
   */
  private persisted(transaction: { isPersisted: { promise: Promise<unknown> } }): Promise<unknown> {
    const outcome = this.attempt(transaction.isPersisted.promise).catch((error: unknown) => {
      if (!this.storeFailed(error)) throw error;
    });
    outcome.catch(() => undefined);
    return outcome;
  }

  private refuse(message: string): void {
    const dismiss = button("Dismiss", () => this.refusal.replaceChildren());
    this.refusal.replaceChildren(el("p", {}, message), dismiss);
  }

  /**
   * Attach `file` to note `id` as its image, or take the image away (`null`). The bytes are kept
   * on this device and queued for upload first, then the note names them: offline, both wait.
   */
  private async attachImage(id: string, file: File | null): Promise<void> {
    let image: string | null = null;
    if (file) {
      try {
        image = await this.blobs.put(file);
      } catch (error) {
        this.refuse(
          error instanceof BlobError && error.code === "payload_too_large"
            ? `Not attached: “${file.name}” is ${megabytes(file.size)}; an image can be at most ${megabytes(IMAGE_MAX_BYTES)}.`
            : describeFailure(error, this.names, this.selected),
        );
        return;
      }
    }
    await this.attempt(this.call.setNoteImage({ id, image })).catch(() => undefined);
    this.announce.textContent = file ? `Attached “${file.name}”.` : "Removed the image.";
  }

  private async clearDoneNotes(): Promise<void> {
    const ids = this.noteList.doneIds();
    if (ids.length === 0) return;
    await this.persisted(this.notes.delete(ids));
    this.announce.textContent = `Cleared ${ids.length} done ${ids.length === 1 ? "note" : "notes"}.`;
  }

  private async signOut(): Promise<void> {
    const waiting = this.client.status.pending;
    if (waiting > 0) {
      const lose = await ask(
        `${waiting} ${waiting === 1 ? "change has" : "changes have"} not reached the server yet. Signing out deletes ${waiting === 1 ? "it" : "them"} from this device.`,
        "Sign out and lose them",
        "Stay signed in",
      );
      if (!lose) return;
    }
    localStorage.removeItem(this.knownKey);
    await this.shell.signOut();
  }

  // --- Selection and the address -------------------------------------------------------------

  private select(listId: string | undefined, remember = true): void {
    if (this.selected === listId) return;
    if (this.selected !== undefined) this.client.untrack(`shared/${this.selected}`);
    this.selected = listId;
    // The list's notes and members sync while it is selected; the one before is let go.
    const before = this.selectedBucket;
    this.selectedBucket = listId === undefined ? undefined : this.client.syncBucket(buckets.shared({ list_id: listId }));
    before?.release();
    if (remember) history.pushState(null, "", listId === undefined ? location.pathname : `?list=${encodeURIComponent(listId)}`);
    if (listId !== undefined && navigator.onLine) this.client.track(`shared/${listId}`, { name: this.client.actor.userId });
    const notes: Note[] = [];
    if (listId !== undefined) for (const note of this.notes.values()) if (note.list_id === listId) notes.push(note);
    this.noteList.reset(notes);
    this.setReordering(false);
    this.body.show(undefined);
    this.refusal.replaceChildren();
    this.renderLists();
  }

  private setReordering(reordering: boolean): void {
    this.reorder.setAttribute("aria-pressed", String(reordering));
    setText(this.reorder, reordering ? "Done reordering" : "Reorder");
    this.noteList.setReordering(reordering);
  }

  /** Move note `row` one place up (`-1`) or down (`1`), and say so. */
  private move(row: NoteRow, step: -1 | 1): void {
    if (this.notesReadOnly) return;
    const position = this.noteList.positionPast(row.note.id, step);
    if (position === undefined) return;
    void this.persisted(
      this.notes.update(row.note.id, (draft) => {
        draft.position = position;
      }),
    );
    this.announce.textContent = `Moved “${row.note.title}” ${step === -1 ? "up" : "down"}.`;
    // A move button pressed to an end is disabled there, which would drop the focus to the page:
    // the row's other move button takes it.
    const [pressed, other] = step === -1 ? [row.up, row.down] : [row.down, row.up];
    requestAnimationFrame(() => {
      if (pressed.disabled && !other.hidden) other.focus();
    });
  }

  /** Leave the selected list, after asking: only its owner can share it again. */
  private async leaveList(): Promise<void> {
    const list = this.selectedEntry();
    if (!list) return;
    const title = list.title.length > 60 ? `${list.title.slice(0, 59)}…` : list.title;
    const sure = await ask(
      `Leave “${title}”? Its notes leave this device, and only ${list.owner_id} can share it with you again.`,
      "Leave list",
      "Stay",
    );
    if (!sure) return;
    await this.attempt(this.call.leaveList({ list_id: list.list_id })).then(
      () => {
        this.select(undefined);
        this.announce.textContent = `You left “${title}”.`;
      },
      () => undefined,
    );
  }

  private setFilter(filter: Filter): void {
    this.filter = filter;
    this.noteList.setFilter(filter);
    for (const [name, choice] of Object.entries(this.filters)) choice.setAttribute("aria-pressed", String(name === filter));
  }

  private shortcut(event: KeyboardEvent): void {
    const target = event.target as HTMLElement;
    if (event.ctrlKey || event.metaKey || event.altKey || target.closest("input, textarea, select, dialog")) return;
    if (event.key === "n" && !this.listPane.hidden && !this.notesReadOnly) {
      event.preventDefault();
      this.newNote.querySelector("input")!.focus();
    } else if (event.key === "l") {
      event.preventDefault();
      this.newList.querySelector("input")!.focus();
    }
  }

  private connectivityChanged(): void {
    // Offline, others' presence is unknown: leave, so that they stop seeing this user, and show
    // nobody until the stream is back.
    if (this.selected !== undefined) {
      if (navigator.onLine) this.client.track(`shared/${this.selected}`, { name: this.client.actor.userId });
      else this.client.untrack(`shared/${this.selected}`);
    }
    this.renderStatus();
  }

  // --- Rendering -----------------------------------------------------------------------------

  private notesChanged(changes: ChangeMessage<Note, string | number>[]): void {
    // The first sync's progress, or the selected list's: how many notes have arrived.
    if (this.loading(this.client.status)) this.renderStatus();
    const open = this.body.open;
    if (this.awaitedNote !== undefined && changes.some((change) => String(change.key) === this.awaitedNote)) {
      this.openNote(this.awaitedNote, false);
    }
    for (const change of changes) {
      if (String(change.key) !== open) continue;
      const note = change.type === "delete" ? undefined : change.value;
      if (!note || note.list_id !== this.selected) this.openNote(undefined, false);
      else {
        this.body.show(note.id, note.title, note.body, this.notesReadOnly, note.image);
        this.body.merge(note.body);
      }
    }
    this.noteList.putAll(
      changes.map((change) => {
        const note = change.type === "delete" ? undefined : change.value;
        return [String(change.key), note && note.list_id === this.selected ? note : undefined];
      }),
    );
  }

  /** The user's pending invitations: a shared list reaches them once they accept it. */
  private renderInvitations(): void {
    const me = this.client.actor.userId;
    const pending = [...this.members.values()]
      .filter((member) => member.user_id === me && !member.accepted)
      .sort((a, b) => a.title.localeCompare(b.title) || a.list_id.localeCompare(b.list_id));
    this.invitations.hidden = pending.length === 0;
    this.invitationItems.show(pending.map((member) => [member.list_id, member]));
  }

  private invitationItem(member: Member): HTMLElement {
    const title = member.title || member.list_id;
    const accept = button("Accept", () => {
      void this.attempt(this.call.acceptList({ list_id: member.list_id }))
        .then(() => {
          this.announce.textContent = `You joined “${title}”.`;
        })
        .catch(() => undefined);
    }, { "aria-label": `Accept “${title}”`, "data-testid": "accept-invitation" });
    const decline = button("Decline", () => {
      void this.attempt(this.call.leaveList({ list_id: member.list_id })).catch(() => undefined);
    }, { class: "secondary", "aria-label": `Decline “${title}”`, "data-testid": "decline-invitation" });
    return el(
      "li",
      { "data-testid": "invitation" },
      el("p", {}, el("strong", {}, title), ` from ${member.invited_by}`),
      el("div", { class: "actions" }, accept, decline),
    );
  }

  /** The lists the user holds, by title: its accepted memberships (the `memberships` bucket). */
  private indexedLists(): Member[] {
    const me = this.client.actor.userId;
    return [...this.index.values()]
      .filter((member) => member.user_id === me && member.accepted)
      .sort((a, b) => a.title.localeCompare(b.title) || a.list_id.localeCompare(b.list_id));
  }

  /** The selected list as the index has it, if the user holds it. */
  private selectedEntry(): Member | undefined {
    if (this.selected === undefined) return undefined;
    const mine = this.index.get(memberKey(this.selected, this.client.actor.userId));
    return mine?.accepted ? mine : undefined;
  }

  private renderLists(): void {
    const lists = this.indexedLists();
    let learned = false;
    for (const list of lists) {
      const known = this.known.get(list.list_id);
      if (known?.title === list.title && known.ownerId === list.owner_id) continue;
      this.known.set(list.list_id, { title: list.title, ownerId: list.owner_id });
      learned = true;
    }
    if (learned) localStorage.setItem(this.knownKey, JSON.stringify(Object.fromEntries(this.known)));
    this.listItems.show(lists.map((list) => [list.list_id, list]));
    this.renderList();
  }

  private renderList(): void {
    const entry = this.selectedEntry();
    this.empty.hidden = entry !== undefined;
    this.listPane.hidden = entry === undefined;
    if (!entry) {
      document.title = "Notes";
      return;
    }
    // The list as the index knows it: its row comes with its bucket, once that is synced.
    const list: List = { id: entry.list_id, owner_id: entry.owner_id, title: entry.title, archived: false };
    this.listPane.dataset.synced = String(this.client.buckets().includes(buckets.shared({ list_id: list.id })));
    setText(this.listTitle, list.title);
    document.title = `${list.title} · Notes`;
    // Asked of a note of the list as it would be added: the rules decide by list, not by note.
    const probe: Note = {
      id: "",
      owner_id: this.client.actor.ownerId,
      list_id: list.id,
      title: "",
      done: false,
      position: 0,
      body: "AAA=",
      image: null,
      deleted_at: null,
    };
    this.notesReadOnly = this.client.canWrite("notes", probe) === false;
    this.viewOnly.hidden = this.viewOnlyBadge.hidden = !this.notesReadOnly;
    this.newNote.hidden = this.clearDone.hidden = this.reorder.hidden = this.notesReadOnly;
    for (const control of this.newNote.querySelectorAll<HTMLInputElement | HTMLButtonElement>("input, button")) {
      control.disabled = this.notesReadOnly;
    }
    this.noteList.setReadOnly(this.notesReadOnly);
    if (this.body.open !== undefined) {
      const note = this.notes.get(this.body.open);
      this.body.show(note?.id, note?.title, note?.body, this.notesReadOnly, note?.image ?? null);
    }
    this.listOwned = this.client.canWrite("lists", list) !== false;
    this.renameListButton.hidden = !this.listOwned;
    this.ownerOnly.hidden = this.listOwned;
    this.share.hidden = !this.listOwned;
    this.leave.hidden = entry.role === "owner";
    for (const control of this.share.querySelectorAll<HTMLInputElement | HTMLButtonElement>("input, select, button")) {
      control.disabled = !this.listOwned;
    }
    const members = [...this.members.values()]
      .filter((m) => m.list_id === list.id)
      .sort((a, b) => rank(a.role) - rank(b.role) || a.user_id.localeCompare(b.user_id));
    this.memberItems.show(members.map((m) => [`${m.list_id}/${m.user_id}`, m]));
    this.renderPresence();
    this.renderCounts();
  }

  private renderCounts(): void {
    const all = this.noteList.size;
    const done = this.noteList.done;
    setText(this.counts, `${all - done} to do, ${done} done`);
    this.clearDone.disabled = done === 0;
  }

  private renderPresence(): void {
    const listId = this.selected;
    const status = this.client.status;
    // Offline, nobody's presence is known: show none rather than whoever was there.
    const present =
      listId === undefined || !navigator.onLine || !status.connected
        ? []
        : Object.keys(this.client.presenceState(`shared/${listId}`))
            .filter((user) => user !== this.client.actor.userId)
            .sort();
    const now = [...this.avatars.children].map((a) => a.getAttribute("title"));
    if (now.length === present.length && now.every((user, i) => user === present[i])) return;
    this.avatars.replaceChildren(
      ...present.map((user) =>
        el("span", { class: "avatar", title: user, role: "img", "aria-label": `${user} is here` }, user.slice(0, 2).toUpperCase()),
      ),
    );
  }

  private renderStatus(): void {
    const status = this.client.status;
    const online = navigator.onLine;
    const refused = this.token.refusedNow(status);
    let state: string;
    let text: string;
    if (refused) {
      state = "signed-out";
      text = "Signed out";
    } else if (!online) {
      state = "offline";
      text = "Offline: changes are kept on this device";
    } else if (!status.connected && (status.retry || status.lastError)) {
      state = "reconnecting";
      text = "Reconnecting…";
    } else if (this.loading(status)) {
      state = "loading";
      const notes = status.lastPullAt === null ? this.notes.size : this.noteList.size;
      text = notes === 0 ? "Loading your notes…" : `Loading your notes… ${notes.toLocaleString("en")} so far`;
    } else if (status.lastPullAt === null) {
      state = "connecting";
      text = "Connecting…";
    } else if (status.pending > 0) {
      // Not `status.syncing`: every background pull would make the line flicker.
      state = "syncing";
      text = `Saving ${status.pending} ${status.pending === 1 ? "change" : "changes"}…`;
    } else {
      state = "synced";
      text = `Synced at ${clock(status.lastPullAt)}`;
    }
    // The badge says the same as the line, in a word.
    const badge = refused
      ? "signed out"
      : !online
        ? "offline"
        : status.connected
          ? "online"
          : state === "reconnecting"
            ? "reconnecting"
            : "connecting";
    this.connection.className = `badge ${badge.replace(" ", "-")}`;
    setText(this.connection, badge);
    this.statusText.dataset.state = state;
    setText(this.statusText, text);
    const progress = state === "loading" ? status.progress : null;
    this.progress.hidden = !progress;
    if (progress) {
      this.progress.max = progress.total;
      this.progress.value = progress.done;
    }
    setText(this.pending, `${status.pending} waiting`);
    // Whether the page's changes are all on this device yet: what a reload starts from.
    this.pending.dataset.storing = String(status.storing);
    if (status.pending !== this.lastPending) {
      this.lastPending = status.pending;
      this.noteList.refreshUnsent();
    }
    this.pending.classList.toggle("some", status.pending > 0);
    // What the page shows is in its memory only until a write to the store succeeds again.
    this.storeError.hidden = status.storeError === null;
    setText(this.storeError, status.storeError === null ? "" : `Not saved on this device: ${status.storeError}`);
    this.renderSignedOut(status, refused);
    this.refusedItems.show(status.quarantined.map((entry) => [entry.clientMutationId, entry]));
    this.refusedPane.hidden = status.quarantined.length === 0;
    this.renderPresence();
  }

  /**
   * Whether notes are arriving for the first time: the user's first sync on this device, or the
   * selected list's first pull since it was selected (its bucket is not held yet).
   */
  private loading(status: Status): boolean {
    if (status.lastPullAt === null) return this.firstSync;
    return status.syncing && this.selectedEntry() !== undefined && this.listPane.dataset.synced === "false";
  }

  private renderSignedOut(status: Status, refused: boolean): void {
    if (!refused) {
      if (!this.signedOut.hidden) this.signedOut.replaceChildren();
      this.signedOut.hidden = true;
      return;
    }
    const waiting = status.pending;
    const kept = waiting === 0 ? "" : ` Your ${waiting} waiting ${waiting === 1 ? "change is" : "changes are"} kept on this device and will be sent once you do.`;
    const message = `The server did not accept your sign-in (it expired, or is not valid here): sign in again as ${this.client.actor.userId}.${kept}`;
    if (!this.signedOut.hidden && this.signedOut.dataset.message === message) return;
    this.signedOut.dataset.message = message;
    this.signedOut.replaceChildren(
      signInForm("Sign in again", [el("p", { role: "alert" }, message)], (token) => this.shell.signInAgain(token)),
    );
    this.signedOut.hidden = false;
  }

  // --- Rows ----------------------------------------------------------------------------------

  private noteRow(note: Note): NoteRow {
    const id = note.id;
    const done = el("input", { type: "checkbox" });
    done.addEventListener("change", () => {
      void this.persisted(
        this.notes.update(id, (draft) => {
          draft.done = done.checked;
        }),
      );
    });
    const title = el("a", { class: "title", href: `?list=${encodeURIComponent(note.list_id)}&note=${encodeURIComponent(id)}` });
    title.addEventListener("click", (event) => {
      if (event.ctrlKey || event.metaKey || event.shiftKey) return;
      event.preventDefault();
      this.openNote(id);
    });
    const rename = button("Rename", () => this.rename(row), { class: "rename" });
    const remove = button("×", () => this.remove(row), { class: "remove" });
    const check = el("label", { class: "check" }, done);
    const image = el("span", { class: "thumbnail", "data-testid": "thumbnail" });
    image.hidden = true;
    const up = button("↑", () => this.move(row, -1), { class: "move", "data-testid": "move-up" });
    const down = button("↓", () => this.move(row, 1), { class: "move", "data-testid": "move-down" });
    const item = el("li", { "data-testid": "note", "data-note": id }, check, title, image, rename, remove, up, down);
    // Alt+Up and Alt+Down move the note with the focus in it.
    item.addEventListener("keydown", (event) => {
      if (!event.altKey || (event.key !== "ArrowUp" && event.key !== "ArrowDown")) return;
      event.preventDefault();
      this.move(row, event.key === "ArrowUp" ? -1 : 1);
    });
    const row: NoteRow = { item, done, title, image, rename, remove, up, down, note };
    return row;
  }

  /** Edit a note's title in place: Enter (or leaving the field) saves, Escape cancels. */
  private rename(row: NoteRow): void {
    if (row.item.querySelector("input.edit")) return;
    const before = row.note.title;
    const field = el("input", { class: "edit", value: before, "aria-label": `New title for ${before}`, "data-testid": "rename" });
    let finished = false;
    const finish = (save: boolean) => {
      if (finished) return;
      finished = true;
      const title = field.value.trim();
      field.replaceWith(row.title);
      row.rename.hidden = row.remove.hidden = this.notesReadOnly;
      row.rename.focus();
      if (!save || title === "" || title === before) return;
      void this.persisted(
        this.notes.update(row.note.id, (draft) => {
          draft.title = title;
        }),
      );
    };
    field.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" && event.key !== "Escape") return;
      // Not passed on: the focus moves to the rename button, which the key would press again.
      event.preventDefault();
      finish(event.key === "Enter");
    });
    field.addEventListener("blur", () => finish(true));
    row.rename.hidden = row.remove.hidden = true;
    row.title.replaceWith(field);
    field.focus();
    field.select();
  }

  /** Edit the selected list's title in place: Enter (or leaving the field) saves, Escape cancels. */
  private renameList(): void {
    const entry = this.selectedEntry();
    if (!entry || this.listTitle.isConnected === false) return;
    const list = { id: entry.list_id, title: entry.title };
    const field = el("input", { class: "edit", value: list.title, "aria-label": "New title of the list", "data-testid": "list-title-field" });
    let finished = false;
    const finish = (save: boolean) => {
      if (finished) return;
      finished = true;
      const title = field.value.trim();
      field.replaceWith(this.listTitle);
      this.renameListButton.hidden = !this.listOwned;
      this.renameListButton.focus();
      if (!save || title === "" || title === list.title) return;
      void this.attempt(this.call.renameList({ id: list.id, title })).catch(() => undefined);
    };
    field.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" && event.key !== "Escape") return;
      // Not passed on: the focus moves to the rename button, which the key would press again.
      event.preventDefault();
      finish(event.key === "Enter");
    });
    field.addEventListener("blur", () => finish(true));
    this.renameListButton.hidden = true;
    this.listTitle.replaceWith(field);
    field.focus();
    field.select();
  }

  private remove(row: NoteRow): void {
    // The focus goes to the next note (or the previous, or the new-note field), not to the page.
    const next = (row.item.nextElementSibling ?? row.item.previousElementSibling) as HTMLElement | null;
    void this.persisted(this.notes.delete(row.note.id));
    (next?.querySelector<HTMLElement>(".remove") ?? this.newNote.querySelector("input"))?.focus();
    this.announce.textContent = `Deleted “${row.note.title}”.`;
  }

  private memberRow(member: Member): HTMLElement {
    const name = el("span", { class: "member", "data-testid": "member" });
    const role = roleSelect(`Role of ${member.user_id}`);
    role.addEventListener("change", () => {
      void this.attempt(
        this.call.shareList({ list_id: member.list_id, user_id: member.user_id, role: role.value as ShareRole }),
      ).catch(() => undefined);
    });
    const remove = button("Remove", () => {
      void this.attempt(this.call.unshareList({ list_id: member.list_id, user_id: member.user_id })).catch(() => undefined);
    }, { "aria-label": `Remove ${member.user_id}` });
    return el("li", {}, name, el("span", { class: "member-controls" }, role, remove));
  }

  private showMember(item: HTMLElement, member: Member): void {
    const controls = item.querySelector<HTMLElement>(".member-controls")!;
    controls.hidden = !this.listOwned || member.role === "owner";
    // The role once: in the menu where there is one, in words where there is not.
    // A pending share says so: the member has not accepted it yet.
    const invited = !member.accepted;
    const shown = controls.hidden
      ? `${member.user_id} (${member.role}${invited ? ", invited" : ""})`
      : `${member.user_id}${invited ? " (invited)" : ""}`;
    setText(item.querySelector(".member")!, shown);
    const role = controls.querySelector("select")!;
    if (document.activeElement !== role && role.value !== member.role) role.value = member.role;
  }

  private refusedItem(entry: QuarantinedEntry): HTMLElement {
    const refusal = describeRefused(entry, this.names);
    const discard = button("Discard", () => void this.client.discardQuarantined(entry.clientMutationId), {
      "aria-label": `Discard: ${refusal.text}`,
    });
    const item = el("li", { "data-testid": "refused" }, el("p", {}, refusal.text));
    const actions = el("div", { class: "actions" });
    if (refusal.keptTitle !== undefined) {
      const text = el("input", { readonly: "", value: refusal.keptTitle, "aria-label": "The note's text", "data-testid": "kept" });
      const copy = button("Copy", () => {
        text.select();
        void navigator.clipboard?.writeText(refusal.keptTitle!).catch(() => undefined);
      });
      const target = el("select", { "aria-label": "Add it to", "data-testid": "add-to" });
      for (const list of this.indexedLists()) {
        if (list.list_id === (entry.args as { list_id?: string }).list_id) continue;
        target.append(el("option", { value: list.list_id }, list.title));
      }
      const add = button("Add to this list", () => {
        if (!target.value) return;
        void this.attempt(this.call.addNote({ id: newUuid(), list_id: target.value, title: refusal.keptTitle! }))
          .then(() => this.client.discardQuarantined(entry.clientMutationId))
          .catch(() => undefined);
      });
      actions.append(text, copy, target, add, discard);
    } else {
      const retry = button("Try again", () => {
        void this.client.retryQuarantined(entry.clientMutationId).catch((error: unknown) => {
          this.refuse(describeFailure(error, this.names, this.selected));
        });
      });
      actions.append(retry, discard);
    }
    item.append(actions);
    return item;
  }
}

/** The key of a membership in the `list_members` collection, as the engine's collection gives it. */
const memberKey = (listId: string, userId: string) => JSON.stringify([listId, userId]);

/** Members in the order owner, editors, viewers. */
const rank = (role: string) => (role === "owner" ? 0 : role === "editor" ? 1 : 2);

/** The list the address names (`?list=…`). */
function listInAddress(): string | undefined {
  return new URLSearchParams(location.search).get("list") ?? undefined;
}

/** The note the address opens (`&note=…`). */
function noteInAddress(): string | undefined {
  return new URLSearchParams(location.search).get("note") ?? undefined;
}
