/**
 * `@engine/db-collection` against a real notes server: TanStack DB collections and live queries
 * over the client's view show a write at once, keep it while it waits, follow what the server
 * decides (a refusal takes the optimistic row away), and hold only a sync rule's rows when asked,
 * following the buckets held as memberships come and go.
 */

import { createCollection, createLiveQueryCollection, eq } from "@tanstack/db";
import { engineCollectionOptions } from "@engine/db-collection";
import { describe, expect, test } from "vitest";

import { buckets, mutators, type Tables } from "../src/contract.gen.js";
import { accept, notesClient, waitFor, type NotesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

/** The notes collection of `client`, whose inserts are `add_note` and deletes `delete_note`. */
function notesCollection(client: NotesClient) {
  const call = mutators(client);
  return createCollection(
    engineCollectionOptions({
      name: "notes",
      client,
      onInsert: (row: Tables["notes"]) => call.addNote({ id: row.id, list_id: row.list_id, title: row.title }),
      onUpdate: (row: Tables["notes"], changes: Partial<Tables["notes"]>) =>
        call.updateNote({ id: row.id, title: changes.title ?? null, done: changes.done ?? null, position: null }),
      onDelete: (row: Tables["notes"]) => call.deleteNote({ id: row.id }),
    }),
  );
}

/** The titles of `rows`, sorted. */
const titles = (rows: Iterable<{ title: string }>) => [...rows].map((r) => r.title).sort();

describe("TanStack DB collections", () => {
  test("a live query shows inserts at once and the server's rows after a sync, on every client", async () => {
    const alice = await notesClient(notes(), "alice");
    const bob = await notesClient(notes(), "bob");
    await mutators(alice).createList({ id: "trip", title: "Trip" });
    await mutators(alice).shareList({ list_id: "trip", user_id: "bob", role: "editor" });

    const mine = notesCollection(alice);
    await mine.preload();
    const trip = createLiveQueryCollection((q) =>
      q.from({ note: mine }).where(({ note }) => eq(note.list_id, "trip")).select(({ note }) => ({ id: note.id, title: note.title })),
    );
    await trip.preload();
    expect(trip.size).toBe(0);

    const insert = mine.insert({
      id: "n1",
      owner_id: "alice",
      list_id: "trip",
      title: "Tickets",
      done: false,
      position: 0,
      body: "AAA=",
      image: null,
      deleted_at: null,
    });
    await insert.isPersisted.promise;
    expect(titles(trip.toArray)).toEqual(["Tickets"]);
    expect(alice.status.pending).toBe(3);

    // Edited through the collection, and through a mutator directly: both show.
    await mine.update("n1", (draft) => {
      draft.title = "Train tickets";
    }).isPersisted.promise;
    await mutators(alice).addNote({ id: "n2", list_id: "trip", title: "Passport" });
    await waitFor("the direct write shows", () => trip.size === 2);
    expect(titles(trip.toArray)).toEqual(["Passport", "Train tickets"]);

    await alice.sync();
    await accept(notes(), "bob", "trip");
    expect(alice.status.pending).toBe(0);
    expect(titles(trip.toArray)).toEqual(["Passport", "Train tickets"]);

    // Bob's collection fills from his pull, and follows alice's delete.
    const his = notesCollection(bob);
    await his.preload();
    await bob.pull();
    expect(titles(his.toArray)).toEqual(["Passport", "Train tickets"]);
    await mine.delete("n2").isPersisted.promise;
    expect(titles(trip.toArray)).toEqual(["Train tickets"]);
    await alice.sync();
    await bob.pull();
    expect(titles(his.toArray)).toEqual(["Train tickets"]);
    await Promise.all([alice.close(), bob.close()]);
  });

  test("a write the server refuses leaves the collection once the refusal is in", async () => {
    const owner = await notesClient(notes(), "olga");
    const viewer = await notesClient(notes(), "vera");
    await mutators(owner).createList({ id: "ro", title: "Read only" });
    await mutators(owner).shareList({ list_id: "ro", user_id: "vera", role: "editor" });
    await owner.sync();
    await accept(notes(), "vera", "ro");
    await viewer.pull();
    // Made a viewer after her last pull: her client still lets her write, the server will not.
    await mutators(owner).shareList({ list_id: "ro", user_id: "vera", role: "viewer" });
    await owner.sync();

    const hers = notesCollection(viewer);
    await hers.preload();
    await hers.insert({
      id: "v1",
      owner_id: "vera",
      list_id: "ro",
      title: "Not allowed",
      done: false,
      position: 0,
      body: "AAA=",
      image: null,
      deleted_at: null,
    }).isPersisted.promise;
    expect(hers.has("v1")).toBe(true);
    await viewer.sync();
    expect(viewer.status.quarantined.map((q) => q.name)).toEqual(["add_note"]);
    expect(hers.has("v1")).toBe(false);
    await Promise.all([owner.close(), viewer.close()]);
  });

  test("a sync rule narrows a collection to the rows held through its buckets", async () => {
    const carl = await notesClient(notes(), "carl");
    const dana = await notesClient(notes(), "dana");
    await mutators(carl).createList({ id: "carls", title: "Carl's" });
    await mutators(carl).shareList({ list_id: "carls", user_id: "dana", role: "editor" });
    await mutators(dana).createList({ id: "danas", title: "Dana's" });
    await Promise.all([carl.sync(), dana.sync()]);
    await accept(notes(), "dana", "carls");
    await dana.pull();

    const own = createCollection(engineCollectionOptions({ name: "lists", client: dana, syncRule: "own" }));
    const shared = createCollection(engineCollectionOptions({ name: "lists", client: dana, syncRule: "shared" }));
    await Promise.all([own.preload(), shared.preload()]);
    expect(titles(own.toArray)).toEqual(["Dana's"]);
    expect(titles(shared.toArray)).toEqual(["Carl's", "Dana's"]);
    expect(() => engineCollectionOptions({ name: "notes", client: dana, syncRule: "own" })).toThrow(/selects no rows/);
    await Promise.all([carl.close(), dana.close()]);
  });

  // Kept for a minute, the list's notes stay in the member's client after the share is gone:
  // the rows do not change, only their bucket is no longer the member's.
  test.each([
    ["dropped at once", 0, "hana", "ivan"],
    ["kept for the bucket TTL", 60_000, "jude", "kurt"],
  ])("a collection of a sync rule follows a share revoked and granted again (rows %s)", async (_, bucketTtlMs, ownerId, memberId) => {
    const owner = await notesClient(notes(), ownerId);
    const member = await notesClient(notes(), memberId, { bucketTtlMs });
    const list = `chores-of-${ownerId}`;
    await mutators(owner).createList({ id: list, title: "Chores" });
    await mutators(owner).addNote({ id: `${list}-1`, list_id: list, title: "Dishes" });
    await mutators(owner).addNote({ id: `${list}-2`, list_id: list, title: "Laundry" });
    await mutators(owner).shareList({ list_id: list, user_id: memberId, role: "editor" });
    await owner.sync();
    await accept(notes(), memberId, list);
    await member.pull();

    const shared = createCollection(engineCollectionOptions({ name: "notes", client: member, syncRule: "shared" }));
    await shared.preload();
    expect(titles(shared.toArray)).toEqual(["Dishes", "Laundry"]);

    await mutators(owner).unshareList({ list_id: list, user_id: memberId });
    await owner.sync();
    await member.pull();
    expect(member.buckets()).not.toContain(buckets.shared({ list_id: list }));
    expect(member.rows("notes")).toHaveLength(bucketTtlMs > 0 ? 2 : 0);
    expect(titles(shared.toArray)).toEqual([]);

    await mutators(owner).shareList({ list_id: list, user_id: memberId, role: "viewer" });
    await owner.sync();
    await accept(notes(), memberId, list);
    await member.pull();
    expect(titles(shared.toArray)).toEqual(["Dishes", "Laundry"]);
    await Promise.all([owner.close(), member.close()]);
  });

  test("a collection given buckets syncs them only while it is in use", async () => {
    const owner = await notesClient(notes(), "wes");
    await mutators(owner).createList({ id: "wes-list", title: "Wes" });
    await mutators(owner).addNote({ id: "wes-note", list_id: "wes-list", title: "open me" });
    await mutators(owner).shareList({ list_id: "wes-list", user_id: "xia", role: "viewer" });
    await owner.sync();
    await accept(notes(), "xia", "wes-list");
    const xia = await notesClient(notes(), "xia", { syncOpen: ["own"] });
    const list = buckets.shared({ list_id: "wes-list" });
    const listNotes = createCollection(engineCollectionOptions({ name: "notes", client: xia, syncRule: "shared", syncBuckets: [list] }));
    await xia.pull();
    expect(xia.openBuckets()).toEqual([]);
    expect(xia.get("notes", "wes-note")).toBeUndefined();

    // In use: the bucket is open and pulled.
    const subscription = listNotes.subscribeChanges(() => undefined);
    expect(xia.openBuckets()).toEqual([list]);
    await xia.pull();
    await waitFor("the list's note in the collection", () => listNotes.has("wes-note"));

    // Cleaned up: released, and with the TTL of zero its rows go at the next pull.
    subscription.unsubscribe();
    await listNotes.cleanup();
    expect(xia.openBuckets()).toEqual([]);
    await xia.pull();
    expect(xia.get("notes", "wes-note")).toBeUndefined();
    await Promise.all([owner.close(), xia.close()]);
  });
});
