/**
 * What the client keeps, against a real notes server: the outbox and the confirmed rows survive
 * a reload in IndexedDB and in SQLite (`mobileSqlitePersistence` over `better-sqlite3`, a file a
 * later client opens again), the waiting count falls only once the store holds what made it
 * fall, a store write that fails goes again with the next, rows of a bucket the actor lost leave
 * after the bucket TTL, and a pull the server starts over sweeps away rows it does not deliver
 * again.
 */

import "fake-indexeddb/auto";

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { afterAll, describe, expect, test } from "vitest";

import { indexedDbStore, memoryStore, type ClientStore, type StoredState, type StoreWrite } from "@engine/client";
import { mobileSqlitePersistence } from "@engine/mobile";

import { mutators } from "../src/contract.gen.js";
import { accept, notesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";
import { betterSqlite } from "./support/sqlite.js";

const notes = useNotesServer();

const directory = mkdtempSync(join(tmpdir(), "engine-store-"));
afterAll(() => rmSync(directory, { recursive: true, force: true }));

/**
 * A store in memory whose writes the test holds while `holding`, as a slow disk would, and then
 * lets through or fails, as a full disk would.
 */
class Disk implements ClientStore {
  private readonly inner = memoryStore();
  holding = false;
  /** The writes held, each with what lets it go on: with an error, the write fails with it. */
  readonly held: { change: StoreWrite; release: (failure?: Error) => void }[] = [];

  load(): Promise<StoredState | undefined> {
    return this.inner.load();
  }

  async write(change: StoreWrite): Promise<void> {
    if (this.holding) {
      const failure = await new Promise<Error | undefined>((release) => this.held.push({ change, release }));
      if (failure) throw failure;
    }
    await this.inner.write(change);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Each persistent store, opened again by `name` as a reload does, and a user of its own. */
const stores: [string, (name: string) => ClientStore, string][] = [
  ["IndexedDB", (name) => indexedDbStore(name), "fay"],
  ["SQLite", (name) => mobileSqlitePersistence(betterSqlite(join(directory, `${name}.db`))), "fia"],
];

describe("persistence", () => {
  test.each(stores)("the outbox and the rows survive a reload in %s, then sync", async (kind, store, user) => {
    const name = `notes-${notes().database}-${kind}`;
    // Offline: the server's address answers nothing.
    const offline = { url: "http://127.0.0.1:9", token: (who: string) => notes().token(who) };
    const before = await notesClient(offline, user, { store: store(name) });
    await mutators(before).createList({ id: user, title: `${user}'s` });
    const { result } = await mutators(before).addNote({ list_id: user, title: "written offline" });
    await expect(before.push()).rejects.toThrow();
    await before.close();

    const after = await notesClient(notes(), user, { store: store(name) });
    expect(after.clientId).toBe(before.clientId);
    expect(after.status.pending).toBe(2);
    expect(after.get("notes", result as string)?.title).toBe("written offline");
    await after.sync();
    expect(after.status.pending).toBe(0);
    await after.close();

    // Reloaded once more: the confirmed rows come from the store, before any pull.
    const again = await notesClient(notes(), user, { store: store(name) });
    expect(again.rows("notes").map((n) => n.title)).toEqual(["written offline"]);
    expect(again.cursor).not.toBeNull();
    await again.close();
  });

  test("a mutation a pull confirmed counts as waiting until the store holds that", async () => {
    const disk = new Disk();
    const client = await notesClient(notes(), "gil", { store: disk });
    await mutators(client).createList({ id: "gil", title: "gil's" });
    await client.push();
    expect(client.status.pending).toBe(1);

    disk.holding = true;
    const synced = client.sync();
    await expect.poll(() => disk.held.length).toBe(1);
    const confirmed = disk.held[0]!;
    expect(confirmed.change.deleteOutbox).toHaveLength(1);
    // The pull confirmed it in memory, but a reload now would find it waiting in the store.
    expect((await disk.load())!.outbox).toHaveLength(1);
    expect(client.status.pending).toBe(1);
    expect(client.status.storing).toBe(true);
    // A mutation made meanwhile counts at once.
    const added = mutators(client).addNote({ list_id: "gil", title: "while held" });
    expect(client.status.pending).toBe(2);

    disk.holding = false;
    confirmed.release();
    await Promise.all([synced, added]);
    await client.sync();
    expect(client.status.pending).toBe(0);
    expect(client.status.storing).toBe(false);
    expect((await disk.load())!.outbox).toEqual([]);
    await client.close();
  });

  test("a store write that fails stops no later one, and what it held goes with the next", async () => {
    const disk = new Disk();
    const offline = { url: "http://127.0.0.1:9", token: (who: string) => notes().token(who) };
    const client = await notesClient(offline, "gwen", { store: disk });
    const storeErrors: (string | null)[] = [];
    client.onStatus((status) => storeErrors.push(status.storeError));

    disk.holding = true;
    const first = mutators(client).createList({ id: "gwen", title: "gwen's" });
    await expect.poll(() => disk.held.length).toBe(1);
    // Made while the first write is under way, the second waits for it, and then goes on.
    const second = mutators(client).addNote({ list_id: "gwen", title: "kept" });
    expect(client.status.pending).toBe(2);
    disk.holding = false;
    disk.held[0]!.release(new Error("the disk is full"));
    await expect(first).rejects.toThrow("the disk is full");
    await second;
    expect(storeErrors).toContain("the disk is full");
    expect(client.status.storeError).toBeNull();
    expect(client.status.pending).toBe(2);
    await client.close();

    // Reloaded: both mutations are in the store, the one whose write failed included.
    const reloaded = await notesClient(offline, "gwen", { store: disk });
    expect(reloaded.status.pending).toBe(2);
    expect(reloaded.rows("lists").map((l) => l.title)).toEqual(["gwen's"]);
    expect(reloaded.rows("notes").map((n) => n.title)).toEqual(["kept"]);
    await reloaded.close();
  });

  test("a store of another user is refused", async () => {
    const store = memoryStore();
    await (await notesClient(notes(), "gus", { store })).close();
    await expect(notesClient(notes(), "hal", { store })).rejects.toThrow("holds the data of user `gus`");
  });
});

describe("buckets lost and pulls started over", () => {
  test("rows of a bucket the actor lost go after the bucket TTL", async () => {
    const owner = await notesClient(notes(), "ida");
    await mutators(owner).createList({ id: "ttl", title: "TTL" });
    await mutators(owner).addNote({ id: "ttl-note", list_id: "ttl", title: "shared for a while" });
    await mutators(owner).shareList({ list_id: "ttl", user_id: "jon", role: "viewer" });
    await mutators(owner).shareList({ list_id: "ttl", user_id: "kim", role: "viewer" });
    await owner.sync();
    await Promise.all([accept(notes(), "jon", "ttl"), accept(notes(), "kim", "ttl")]);

    const jon = await notesClient(notes(), "jon");
    const kim = await notesClient(notes(), "kim", { bucketTtlMs: 3_600_000 });
    await Promise.all([jon.pull(), kim.pull()]);
    expect(jon.get("notes", "ttl-note")?.title).toBe("shared for a while");
    expect(kim.get("notes", "ttl-note")?.title).toBe("shared for a while");

    await mutators(owner).unshareList({ list_id: "ttl", user_id: "jon" });
    await mutators(owner).unshareList({ list_id: "ttl", user_id: "kim" });
    await owner.sync();
    await Promise.all([jon.pull(), kim.pull()]);
    // At once for jon (TTL 0); kim keeps them for the hour, without holding the bucket. Each
    // still holds his index of lists (`memberships/…`), without the list.
    expect(jon.rows("notes")).toEqual([]);
    expect(jon.rows("lists")).toEqual([]);
    expect(jon.rows("list_members")).toEqual([]);
    expect(jon.buckets()).toEqual(["memberships/jon"]);
    expect(kim.get("notes", "ttl-note")?.title).toBe("shared for a while");
    expect(kim.buckets()).toEqual(["memberships/kim"]);
    await Promise.all([owner.close(), jon.close(), kim.close()]);
  });

  test("a cursor the server cannot read starts the pull over, and rows not delivered again go", async () => {
    const store = memoryStore();
    const client = await notesClient(notes(), "lea", { store });
    await mutators(client).createList({ id: "leas", title: "Lea's" });
    await client.sync();
    await client.close();

    // A row the server never had, and a cursor it never wrote.
    const stored = (await store.load())!;
    stored.meta.cursor = "not-a-cursor";
    stored.rows.push({
      table: "lists",
      key: JSON.stringify(["ghost"]),
      row: { id: "ghost", owner_id: "lea", title: "Ghost", archived: false },
      buckets: ["own/lea"],
    });
    const reopened = await notesClient(notes(), "lea", { store: memoryStore(stored) });
    expect(reopened.rows("lists").map((l) => l.id)).toEqual(["ghost", "leas"]);
    await reopened.pull();
    expect(reopened.rows("lists").map((l) => l.id)).toEqual(["leas"]);
    expect(reopened.cursor).not.toBe("not-a-cursor");
    await reopened.close();
  });
});
