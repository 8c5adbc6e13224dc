/**
 * The notes web app: lists, notes, sharing, who else is looking at a list, an offline badge and
 * the writes the server refused. The rows live in the browser (IndexedDB, per user), so the app
 * works offline and its queued writes survive a reload; TanStack DB live queries over
 * `@engine/db-collection` collections render them.
 *
 * Sign-in is a development token in the address (`/#token=…`, printed by the server when it runs
 * with the development secret) or pasted into the form; it is kept in `localStorage`.
 *
 * Controls follow `client.canWrite`: where a write is certainly refused (a viewer's notes, an
 * editor's sharing) they are disabled, with a hint saying why; `"unknown"` leaves them enabled,
 * for the server to decide. A write the client refuses locally (`ForbiddenError`) is announced in
 * an alert, in the server's words.
 */

import {
  actorOfToken,
  createEngineClient,
  ForbiddenError,
  indexedDbStore,
  newUuid,
  type EngineClient,
  type QuarantinedEntry,
  type Queued,
} from "@engine/client";
import { engineCollectionOptions } from "@engine/db-collection";
import { mutators, schema, type Mutators, type Tables } from "@engine/notes";
import { optimistic } from "@engine/notes/optimistic";
import { createCollection, createLiveQueryCollection, eq, type Collection } from "@tanstack/db";

type NotesClient = EngineClient<Tables, Mutators>;
type Note = Tables["notes"];
type List = Tables["lists"];
type Member = Tables["list_members"];

const TOKEN_KEY = "engine-notes-token";
const root = document.getElementById("app")!;

/** An element with attributes and children. */
function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
  ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
  element.append(...children);
  return element;
}

/**
 * A form whose submit calls `submit` with its fields' values, then clears them. When `submit`
 * fails the values are put back, unless something new was typed since.
 */
function form(
  testId: string,
  fields: HTMLInputElement[],
  label: string,
  submit: (values: string[]) => Promise<unknown> | undefined,
) {
  const element = el("form", { "data-testid": testId }, ...fields, el("button", { type: "submit" }, label));
  element.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = fields.map((f) => f.value.trim());
    if (values.some((v) => v === "")) return;
    void submit(values)?.catch(() => {
      if (fields.every((field) => field.value === "")) fields.forEach((field, i) => (field.value = values[i]!));
    });
    for (const field of fields) field.value = "";
  });
  return element;
}

/**
 * Disable `controls` when `disabled`, each pointing at `hint` (the element saying why) for
 * assistive technology. Disabled, not hidden: a viewer sees what the list offers and why not.
 */
function setReadOnly(hint: HTMLElement, controls: Iterable<HTMLInputElement | HTMLButtonElement>, disabled: boolean) {
  for (const control of controls) {
    if (control.disabled === disabled) continue;
    control.disabled = disabled;
    if (disabled) control.setAttribute("aria-describedby", hint.id);
    else control.removeAttribute("aria-describedby");
  }
}

const controlsOf = (element: HTMLElement) =>
  element.querySelectorAll<HTMLInputElement | HTMLButtonElement>("input, button");

function input(name: string, placeholder: string): HTMLInputElement {
  return el("input", { name, placeholder, "aria-label": placeholder, autocomplete: "off" });
}

function signIn(): void {
  const field = el("textarea", { name: "token", rows: "4", placeholder: "a token", "aria-label": "Token" });
  const submit = el("button", { type: "submit" }, "Sign in");
  const panel = el(
    "form",
    { class: "sign-in", "data-testid": "sign-in" },
    el("h1", {}, "Notes"),
    el("p", {}, "Paste a token: ", el("code", {}, "cargo run -p example-notes -- token --user alice")),
    field,
    submit,
  );
  panel.addEventListener("submit", (event) => {
    event.preventDefault();
    localStorage.setItem(TOKEN_KEY, field.value.trim());
    location.reload();
  });
  root.replaceChildren(panel);
}

async function start(): Promise<void> {
  const fromAddress = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromAddress) {
    localStorage.setItem(TOKEN_KEY, fromAddress);
    history.replaceState(null, "", location.pathname);
  }
  const token = localStorage.getItem(TOKEN_KEY);
  const actor = token ? actorOfToken(token) : undefined;
  if (!token || !actor) return signIn();
  const client: NotesClient = await createEngineClient({
    url: location.origin,
    schema,
    auth: token,
    optimistic,
    store: indexedDbStore(`engine-notes-${actor.userId}`),
    pullIntervalMs: 10_000,
  });
  new NotesApp(client).render();
}

/**
 * The children of `parent`, one node per key: a node is made once and updated in place, so a
 * render never takes away the element the user is pointing at or typing in.
 */
class Keyed<T> {
  private readonly nodes = new Map<string, HTMLElement>();

  constructor(
    private readonly parent: HTMLElement,
    private readonly make: (item: T, key: string) => HTMLElement,
    private readonly update: (node: HTMLElement, item: T) => void = () => undefined,
  ) {}

  show(items: [key: string, item: T][]): void {
    const next = items.map(([key, item]) => {
      let node = this.nodes.get(key);
      if (!node) {
        node = this.make(item, key);
        this.nodes.set(key, node);
      }
      this.update(node, item);
      return node;
    });
    const kept = new Set(next);
    for (const [key, node] of this.nodes) if (!kept.has(node)) this.nodes.delete(key);
    const now = [...this.parent.children];
    if (now.length !== next.length || now.some((node, i) => node !== next[i])) this.parent.replaceChildren(...next);
  }
}

class NotesApp {
  private readonly call: ReturnType<typeof mutators<Promise<Queued>>>;
  private readonly lists: Collection<List, string | number>;
  private readonly notes: Collection<Note, string | number>;
  private readonly members: Collection<Member, string | number>;
  private selected: string | undefined;
  private listNotes: Collection<Note> | undefined;
  // The page is built once; a render changes what its parts hold and never moves them, so focus
  // and what is typed survive the renders a sync brings.
  private readonly newList: HTMLFormElement;
  private readonly newNote: HTMLFormElement;
  private readonly share: HTMLFormElement;
  private readonly connection = el("span", { "data-testid": "connection" });
  private readonly pending = el("span", { class: "pending", "data-testid": "pending" });
  private readonly empty = el("section", { class: "empty" }, "Choose or add a list.");
  // A live region present from the start, so the refusal put into it is announced.
  private readonly refusal = el("div", { class: "refusal", role: "alert", "data-testid": "refusal" });
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
  /** Whether the actor's writes of the selected list's notes are certainly refused. */
  private notesReadOnly = false;
  private readonly listTitle = el("h2");
  private readonly listPane: HTMLElement;
  private readonly refusedPane: HTMLElement;
  private readonly listItems: Keyed<List>;
  private readonly noteItems: Keyed<Note>;
  private readonly memberItems: Keyed<Member>;
  private readonly refusedItems: Keyed<QuarantinedEntry>;

  constructor(private readonly client: NotesClient) {
    this.call = mutators(client);
    this.newList = form("new-list", [input("title", "New list")], "Add", ([title]) =>
      this.attempt(this.call.createList({ title: title! }).then((queued) => this.select(queued.result as string))),
    );
    this.newNote = form("new-note", [input("title", "New note")], "Add", ([title]) => {
      if (this.selected === undefined) return;
      return this.persisted(this.notes.insert({
        id: newUuid(),
        owner_id: this.client.actor.ownerId,
        list_id: this.selected,
        title: title!,
        done: false,
        position: Date.now(),
        body: "AAA=",
        deleted_at: null,
      }));
    });
    this.share = form("share", [input("user", "user id"), input("role", "editor or viewer")], "Share", ([user, role]) => {
      if (this.selected === undefined) return;
      return this.attempt(
        this.call.shareList({ list_id: this.selected, user_id: user!, role: role === "viewer" ? "viewer" : "editor" }),
      );
    });
    this.newList.setAttribute("aria-label", "New list");
    this.newNote.setAttribute("aria-label", "New note");
    this.share.setAttribute("aria-label", "Share the list");
    this.share.classList.add("share");
    this.lists = createCollection(engineCollectionOptions({ name: "lists", client }));
    this.members = createCollection(engineCollectionOptions({ name: "list_members", client }));
    this.notes = createCollection(
      engineCollectionOptions({
        name: "notes",
        client,
        onInsert: (note) => this.call.addNote({ id: note.id, list_id: note.list_id, title: note.title }),
        onUpdate: (note, changes) =>
          this.call.updateNote({ id: note.id, title: changes.title ?? null, done: changes.done ?? null, position: null }),
        onDelete: (note) => this.call.deleteNote({ id: note.id }),
      }),
    );

    const lists = el("ul", { class: "lists" });
    this.listItems = new Keyed(
      lists,
      (list) => {
        const button = el("button", { "data-testid": "list", "data-list": list.id });
        button.addEventListener("click", () => this.select(list.id));
        return el("li", {}, button);
      },
      (item, list) => {
        const button = item.firstElementChild as HTMLButtonElement;
        button.textContent = list.title;
        button.classList.toggle("selected", list.id === this.selected);
      },
    );
    const notes = el("ul", { class: "notes", "data-testid": "notes" });
    this.noteItems = new Keyed(notes, (note) => this.noteItem(note.id), (item, note) => {
      (item.querySelector("input") as HTMLInputElement).checked = note.done;
      (item.querySelector(".title") as HTMLElement).textContent = note.title;
      const readOnly = this.notesReadOnly || this.client.canWrite("notes", note) === false;
      setReadOnly(this.viewOnly, controlsOf(item), readOnly);
      if (readOnly) this.viewOnly.hidden = false;
      item.classList.toggle("read-only", readOnly);
    });
    const members = el("ul", { class: "members" });
    this.memberItems = new Keyed(
      members,
      () => el("li", { "data-testid": "member" }),
      (item, member) => {
        item.textContent = `${member.user_id} (${member.role})`;
      },
    );
    const refused = el("ul");
    this.refusedItems = new Keyed(refused, (entry) => this.refusedItem(entry));
    this.listPane = el(
      "section",
      { class: "list" },
      this.listTitle,
      this.viewOnly,
      notes,
      this.newNote,
      el("h3", {}, "Shared with"),
      members,
      this.share,
      this.ownerOnly,
    );
    this.refusedPane = el("aside", { class: "quarantine" }, el("h3", {}, "Refused by the server"), refused);
    const header = el(
      "header",
      {},
      el("h1", {}, "Notes"),
      el("span", { class: "user", "data-testid": "user" }, client.actor.userId),
      this.connection,
      this.pending,
    );
    root.replaceChildren(
      header,
      el(
        "main",
        {},
        this.refusal,
        el("nav", { "aria-label": "Lists" }, lists, this.newList),
        this.empty,
        this.listPane,
      ),
      this.refusedPane,
    );

    for (const collection of [this.lists, this.members, this.notes] as Collection<object, string | number>[]) {
      collection.subscribeChanges(() => this.render());
    }
    client.onStatus(() => this.render());
    client.onPresence(() => this.render());
    addEventListener("online", () => this.render());
    addEventListener("offline", () => this.render());
  }

  /** `write`, with a local refusal (`ForbiddenError`) shown in the alert. */
  private attempt<R>(write: Promise<R>): Promise<R> {
    return write.catch((error: unknown) => {
      if (error instanceof ForbiddenError) this.refuse(error);
      throw error;
    });
  }

  /** A collection write: its transaction's outcome, a local refusal shown in the alert. */
  private persisted(transaction: { isPersisted: { promise: Promise<unknown> } }): Promise<unknown> {
    const outcome = this.attempt(transaction.isPersisted.promise);
    outcome.catch(() => undefined);
    return outcome;
  }

  private refuse(error: ForbiddenError): void {
    const dismiss = el("button", { type: "button" }, "Dismiss");
    dismiss.addEventListener("click", () => this.refusal.replaceChildren());
    const message = el("p", {}, el("strong", {}, "Not saved. "), `The server would refuse this change (${error.detail}).`);
    this.refusal.replaceChildren(message, dismiss);
  }

  private select(listId: string): void {
    if (this.selected === listId) return;
    if (this.selected !== undefined) this.client.untrack(`shared/${this.selected}`);
    void this.listNotes?.cleanup();
    this.selected = listId;
    this.client.track(`shared/${listId}`, { name: this.client.actor.userId });
    this.listNotes = createLiveQueryCollection((q) =>
      q
        .from({ note: this.notes })
        .where(({ note }) => eq(note.list_id, listId))
        .orderBy(({ note }) => note.position),
    ) as unknown as Collection<Note>;
    this.listNotes.subscribeChanges(() => this.render());
    this.render();
  }

  render(): void {
    const status = this.client.status;
    const online = navigator.onLine && status.connected;
    this.connection.className = online ? "badge online" : "badge offline";
    this.connection.textContent = online ? "online" : "offline";
    this.pending.textContent = `${status.pending} waiting`;
    const lists = [...this.lists.values()].sort((a, b) => a.title.localeCompare(b.title) || a.id.localeCompare(b.id));
    this.listItems.show(lists.map((list) => [list.id, list]));
    this.renderList();
    this.refusedItems.show(status.quarantined.map((entry) => [entry.clientMutationId, entry]));
    this.refusedPane.hidden = status.quarantined.length === 0;
  }

  private renderList(): void {
    const listId = this.selected;
    const list = listId === undefined ? undefined : this.lists.get(listId);
    this.empty.hidden = list !== undefined && this.listNotes !== undefined;
    this.listPane.hidden = !this.empty.hidden;
    if (!list || !this.listNotes) return;
    const present = Object.keys(this.client.presenceState(`shared/${list.id}`)).sort();
    const avatars = el(
      "div",
      { class: "avatars", "data-testid": "present" },
      ...present.map((user) => el("span", { class: "avatar", title: user }, user.slice(0, 2).toUpperCase())),
    );
    this.listTitle.replaceChildren(list.title, avatars);
    // Asked of a note of the list as it would be added: the rules decide by list, not by note.
    const probe: Note = {
      id: "",
      owner_id: this.client.actor.ownerId,
      list_id: list.id,
      title: "",
      done: false,
      position: 0,
      body: "AAA=",
      deleted_at: null,
    };
    this.notesReadOnly = this.client.canWrite("notes", probe) === false;
    this.viewOnly.hidden = !this.notesReadOnly;
    setReadOnly(this.viewOnly, controlsOf(this.newNote), this.notesReadOnly);
    this.noteItems.show([...this.listNotes.values()].map((note) => [note.id, note]));
    this.memberItems.show(
      [...this.members.values()].filter((m) => m.list_id === list.id).map((m) => [`${m.list_id}/${m.user_id}`, m]),
    );
    const listReadOnly = this.client.canWrite("lists", list) === false;
    this.ownerOnly.hidden = !listReadOnly;
    setReadOnly(this.ownerOnly, controlsOf(this.share), listReadOnly);
  }

  private noteItem(id: string): HTMLElement {
    const done = el("input", { type: "checkbox", "aria-label": "done" });
    done.addEventListener("change", () => {
      void this.persisted(
        this.notes.update(id, (draft) => {
          draft.done = done.checked;
        }),
      );
    });
    const remove = el("button", { class: "remove", "aria-label": "delete" }, "×");
    remove.addEventListener("click", () => void this.persisted(this.notes.delete(id)));
    return el("li", { "data-testid": "note" }, done, el("span", { class: "title" }), remove);
  }

  private refusedItem(entry: QuarantinedEntry): HTMLElement {
    const discard = el("button", {}, "Dismiss");
    discard.addEventListener("click", () => void this.client.discardQuarantined(entry.clientMutationId));
    return el(
      "li",
      { "data-testid": "refused" },
      el("strong", {}, entry.name),
      ` refused: ${entry.error.detail || entry.error.title}`,
      discard,
    );
  }
}

// The page opens offline from the service worker's cache.
if ("serviceWorker" in navigator) void navigator.serviceWorker.register("./sw.js").catch(() => undefined);
void start();
