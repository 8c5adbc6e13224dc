/**
 * Pull, push and the optimistic view against a real notes server: writes show at once, reach
 * the server, come back from it, and what the server decides replaces what the client guessed.
 */

import { describe, expect, test } from "vitest";

import { mutators } from "../src/contract.gen.js";
import { notesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

describe("pull and push", () => {
  test("a mutation shows at once, is pushed, and comes back from the server on a pull", async () => {
    const alice = await notesClient(notes(), "alice");
    const call = mutators(alice);
    await call.createList({ id: "groceries", title: "Groceries" });
    const queued = await call.addNote({ list_id: "groceries", title: "Oat milk" });
    const noteId = queued.result as string;

    // Before any push: the view shows both writes, and both wait in the outbox.
    expect(alice.get("lists", "groceries")?.title).toBe("Groceries");
    expect(alice.get("notes", noteId)?.title).toBe("Oat milk");
    expect(alice.status.pending).toBe(2);

    await alice.sync();
    expect(alice.status.pending).toBe(0);
    // Her lists, her index of them (her owner's membership) and the list's own bucket.
    expect(alice.buckets()).toEqual(["memberships/alice", "own/alice", "shared/groceries"]);
    // The id the optimistic run took is the one the server's run took.
    const note = alice.get("notes", noteId);
    expect(note).toMatchObject({ id: noteId, list_id: "groceries", title: "Oat milk", owner_id: "alice", done: false });

    // Another client of alice's, starting from nothing, pulls the same rows.
    const again = await notesClient(notes(), "alice");
    expect(again.clientId).not.toBe(alice.clientId);
    await again.pull();
    expect(again.rows("notes")).toEqual(alice.rows("notes"));
    expect(again.rows("list_members")).toEqual([
      { list_id: "groceries", user_id: "alice", owner_id: "alice", role: "owner", accepted: true, invited_by: "alice", title: "Groceries" },
    ]);
    await Promise.all([alice.close(), again.close()]);
  });

  test("pulls come in pages, each applied, until the last", async () => {
    const writer = await notesClient(notes(), "paula");
    const call = mutators(writer);
    await call.createList({ id: "paged", title: "Paged" });
    for (let i = 0; i < 7; i++) await call.addNote({ list_id: "paged", title: `note ${i}` });
    await writer.sync();

    const reader = await notesClient(notes(), "paula", { pullPage: 2 });
    const seen: number[] = [];
    reader.onChange((changes) => seen.push(changes.length));
    await reader.pull();
    expect(reader.rows("notes").map((n) => n.title).sort()).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => `note ${i}`));
    // 7 notes, a list and a membership, two entries a page.
    expect(seen.length).toBeGreaterThanOrEqual(5);
    expect(seen.reduce((a, b) => a + b, 0)).toBe(9);
    await Promise.all([writer.close(), reader.close()]);
  });

  test("a mutator without an optimistic function still queues and syncs", async () => {
    const client = await notesClient(notes(), "olga", { optimistic: {} });
    const call = mutators(client);
    await call.createList({ id: "plain", title: "Plain" });
    expect(client.rows("lists")).toEqual([]);
    expect(client.status.pending).toBe(1);
    await client.sync();
    expect(client.rows("lists")).toEqual([{ id: "plain", owner_id: "olga", title: "Plain", archived: false }]);
    await client.close();
  });

  test("what the server decides replaces the optimistic guess", async () => {
    const client = await notesClient(notes(), "gina");
    const call = mutators(client);
    await call.createList({ id: "g", title: "G" });
    const { result } = await call.addNote({ list_id: "g", title: "first" });
    await client.sync();
    const id = result as string;
    const fromServer = client.get("notes", id)!;

    // A deleted note leaves the view at once and for good: the server's tombstone agrees.
    await call.deleteNote({ id });
    expect(client.get("notes", id)).toBeUndefined();
    await client.sync();
    expect(client.get("notes", id)).toBeUndefined();
    expect(fromServer.title).toBe("first");

    // A write the optimistic function gets wrong: the server's values win once pulled.
    client.registerOptimistic({
      create_list: (tx, args) => {
        tx.insert("lists", { id: args.id!, owner_id: tx.actor.ownerId, title: `${args.title} (guessed)`, archived: true });
      },
    });
    await call.createList({ id: "h", title: "H" });
    expect(client.get("lists", "h")).toMatchObject({ title: "H (guessed)", archived: true });
    await client.sync();
    expect(client.get("lists", "h")).toEqual({ id: "h", owner_id: "gina", title: "H", archived: false });
    await client.close();
  });
});
