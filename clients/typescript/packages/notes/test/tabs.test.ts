/**
 * One client across tabs (`docs/design.md` §9, "One client across tabs"), with three clients of
 * one user in one process standing for three tabs: one IndexedDB (fake-indexeddb), Node's
 * `BroadcastChannel`, and the Web Locks of `support/locks.ts`, against a real notes server. One
 * tab leads; the others' mutations show in their view at once, are numbered by the leader only,
 * and reach the server once each; when the leader closes with writes queued, another tab takes
 * the lead and pushes them, once; a follower is present through the leader's one socket. Over a
 * store one tab at a time can open (SQLite on OPFS), only the leader opens it: the others get
 * the state from the leader.
 */

import "fake-indexeddb/auto";

import { describe, expect, test } from "vitest";

import { bucketKey, createWebSocketSource, indexedDbStore, memoryStore, type ClientStore, type Queued, type TabLocks } from "@engine/client";

import { mutators } from "../src/contract.gen.js";
import { accept, notesClient, waitFor, type NotesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";
import { webLocks } from "./support/locks.js";

const notes = useNotesServer();

/** A tab's client of `user` over the IndexedDB database `name`. */
const tab = (user: string, name: string, locks: TabLocks) =>
  notesClient(notes(), user, { store: indexedDbStore(name), tabs: { locks } });

/**
 * A database one tab at a time may open, as SQLite on OPFS is: a tab's store opens it on first
 * use and holds it until closed; another tab's use meanwhile fails. `opened` names the tabs that
 * opened it, in order.
 */
function exclusiveDatabase(name: string) {
  const data = memoryStore();
  const opened: string[] = [];
  let holder: string | undefined;
  const store = (tab: string): ClientStore => {
    const use = () => {
      if (holder !== undefined && holder !== tab) throw new Error(`the database is open in tab ${holder}`);
      if (holder === undefined) opened.push(tab);
      holder = tab;
    };
    return {
      sharedName: `exclusive ${name}`,
      load: async () => (use(), data.load()),
      write: async (change) => (use(), data.write(change)),
      close: async () => {
        if (holder === tab) holder = undefined;
      },
    };
  };
  return { opened, store };
}

const applied = async () => (await notes().stats()).appliedMutations;
const titles = (client: NotesClient) => client.rows("notes").map((n) => n.title).sort();

describe("tabs", () => {
  test("three tabs share one client: each write is numbered once, reaches the server once, shows in every tab", async () => {
    const locks = webLocks();
    const name = `tabs-${notes().database}-share`;
    const tabs = [await tab("tia", name, locks), await tab("tia", name, locks), await tab("tia", name, locks)];
    const [first, second, third] = tabs as [NotesClient, NotesClient, NotesClient];
    expect(new Set(tabs.map((t) => t.clientId)).size, "one client id").toBe(1);
    const before = await applied();

    await mutators(first).createList({ id: "tia", title: "Tia's" });
    for (const client of tabs) await waitFor("the list in every tab", () => client.get("lists", "tia") !== undefined);
    const writes: Promise<Queued>[] = [];
    for (const [i, client] of [second, third, first, second, third].entries()) {
      const id = `tia-${i}`;
      writes.push(mutators(client).addNote({ id, list_id: "tia", title: `note ${i}` }));
      // A follower's write shows in its own view before the leader has it.
      expect(client.get("notes", id)?.title).toBe(`note ${i}`);
    }
    const queued = await Promise.all(writes);
    expect(queued.map((q) => q.mutationId).sort((a, b) => a - b), "numbered by one tab, in one sequence").toEqual([2, 3, 4, 5, 6]);
    const all = ["note 0", "note 1", "note 2", "note 3", "note 4"];
    for (const client of tabs) await waitFor("every tab shows every write", () => titles(client).join() === all.join());
    for (const client of tabs) expect(client.status.pending).toBe(6);

    // A follower's sync is the leader's: the outbox goes once, and every tab hears it confirmed.
    await third.sync();
    expect(await applied()).toBe(before + 6);
    for (const client of tabs) await waitFor("every tab sees the outbox confirmed", () => client.status.pending === 0);
    for (const client of tabs) expect(titles(client)).toEqual(all);
    await Promise.all(tabs.map((t) => t.close()));
  });

  test("when the leader closes with writes queued, another tab takes the lead and pushes them once", async () => {
    const locks = webLocks();
    const name = `tabs-${notes().database}-lead`;
    const leader = await tab("uma", name, locks);
    const next = await tab("uma", name, locks);
    const last = await tab("uma", name, locks);
    const before = await applied();

    // Queued: the leader may push some before it closes, and its successor pushes the rest.
    await mutators(leader).createList({ id: "uma", title: "Uma's" });
    await waitFor("the list in the second tab", () => next.get("lists", "uma") !== undefined);
    await mutators(next).addNote({ id: "uma-1", list_id: "uma", title: "from the second tab" });
    await mutators(leader).addNote({ id: "uma-2", list_id: "uma", title: "from the leader" });
    await leader.close();

    // Written while the lead changes hands: queued by the new leader, not lost.
    await mutators(last).addNote({ id: "uma-3", list_id: "uma", title: "from the third tab" });
    await last.sync();
    expect(await applied(), "each queued write applied once").toBe(before + 4);
    for (const client of [next, last]) {
      await waitFor("the outbox confirmed in both tabs", () => client.status.pending === 0);
      expect(titles(client)).toEqual(["from the leader", "from the second tab", "from the third tab"]);
    }
    await Promise.all([next.close(), last.close()]);
  });

  test("over a store one tab can open, the leader alone opens it, and the next leader once it is closed", async () => {
    const locks = webLocks();
    const database = exclusiveDatabase(`${notes().database}-exclusive`);
    const open = (tab: string) => notesClient(notes(), "zoe", { store: database.store(tab), tabs: { locks } });
    // Read before the list is queued: the leader's push of it may still be on its way later.
    const before = await applied();
    const leader = await open("first");
    await mutators(leader).createList({ id: "zoe", title: "Zoe's" });
    // Joining, the followers get the state from the leader: the list is there at once.
    const next = await open("second");
    const last = await open("third");
    for (const client of [next, last]) expect(client.get("lists", "zoe")?.title).toBe("Zoe's");

    await mutators(next).addNote({ id: "zoe-1", list_id: "zoe", title: "from the second tab" });
    await mutators(last).addNote({ id: "zoe-2", list_id: "zoe", title: "from the third tab" });
    expect(database.opened, "only the leader opened the store").toEqual(["first"]);
    await leader.close();

    // Written while the lead changes hands: queued by the new leader, not lost.
    await mutators(last).addNote({ id: "zoe-3", list_id: "zoe", title: "again from the third tab" });
    await last.sync();
    expect(database.opened, "the next leader opened it once the first closed it").toEqual(["first", "second"]);
    expect(await applied(), "the list and each queued write applied once").toBe(before + 4);
    const all = ["again from the third tab", "from the second tab", "from the third tab"];
    for (const client of [next, last]) {
      await waitFor("the outbox confirmed in both tabs", () => client.status.pending === 0);
      expect(titles(client)).toEqual(all);
    }
    await Promise.all([next.close(), last.close()]);
  });

  test("a mutation a follower sends again is answered with its number, not queued twice", async () => {
    const locks = webLocks();
    const name = `tabs-${notes().database}-again`;
    const options = { store: indexedDbStore(name), tabs: { locks, name } };
    const leader = await notesClient(notes(), "wes", options);
    const follower = await notesClient(notes(), "wes", { ...options, store: indexedDbStore(name) });
    const queued = await mutators(follower).createList({ id: "wes", title: "Wes's" });
    const entry = (await indexedDbStore(name).load())!.outbox[0]!;
    expect(entry.clientMutationId).toBe(queued.clientMutationId);

    // The follower's request again, as it sends it to a new leader when it missed the reply.
    const channel = new BroadcastChannel(name);
    const reply = new Promise<{ value: { mutationId: number } }>((resolve) =>
      channel.addEventListener("message", (event) => {
        const data = (event as MessageEvent).data as { type: string; to?: string };
        if (data.type === "reply" && data.to === "again") resolve(data as never);
      }),
    );
    const { mutationId, clientMutationId, name: mutator, args, hlc, createdAt } = entry;
    channel.postMessage({ type: "request", from: "again", id: 1, request: { op: "mutate", name: mutator, args, clientMutationId, hlc, createdAt } });
    expect((await reply).value.mutationId).toBe(mutationId);
    channel.close();
    expect(leader.status.pending, "queued once").toBe(1);
    await follower.sync();
    expect(leader.rows("lists").map((l) => l.id)).toEqual(["wes"]);
    await Promise.all([leader.close(), follower.close()]);
  });

  test("syncing only what is open, the leader syncs a bucket while any tab holds it open", async () => {
    const locks = webLocks();
    const name = `tabs-${notes().database}-open`;
    const owner = await notesClient(notes(), "uma");
    await mutators(owner).createList({ id: "uma", title: "Uma's" });
    await mutators(owner).addNote({ id: "uma-note", list_id: "uma", title: "hello" });
    await mutators(owner).shareList({ list_id: "uma", user_id: "vic", role: "viewer" });
    await owner.sync();
    await accept(notes(), "vic", "uma");
    const options = { syncOpen: ["own", "memberships"], store: indexedDbStore(name), tabs: { locks } };
    const leader = await notesClient(notes(), "vic", options);
    const follower = await notesClient(notes(), "vic", options);
    await follower.pull();
    expect(follower.get("list_members", { list_id: "uma", user_id: "vic" })?.title, "the index").toBe("Uma's");
    expect(follower.get("notes", "uma-note"), "nothing open").toBeUndefined();

    // Opened in the follower, the list comes to every tab, through the leader's pull.
    const open = follower.syncBucket(bucketKey("shared", ["uma"]));
    await waitFor("the leader knows the follower's open bucket", () => leader.openBuckets().includes(open.bucket));
    await follower.pull();
    for (const client of [leader, follower]) expect(client.get("notes", "uma-note")?.title).toBe("hello");

    // Released, it goes (the TTL is none).
    open.release();
    await waitFor("the leader lets it go", () => leader.openBuckets().length === 0);
    await follower.pull();
    for (const client of [leader, follower]) await waitFor("the list's notes go", () => client.get("notes", "uma-note") === undefined);
    await Promise.all([follower.close(), leader.close(), owner.close()]);
  });

  test("a follower is present through the leader's one socket, and sees who else is", async () => {
    const locks = webLocks();
    const name = `tabs-${notes().database}-presence`;
    const live = () => ({ background: true, realtime: createWebSocketSource({ backoffBaseMs: 50, backoffMaxMs: 500, connectTimeoutMs: 2_000 }) });
    const leader = await notesClient(notes(), "xia", { ...live(), store: indexedDbStore(name), tabs: { locks } });
    const follower = await notesClient(notes(), "xia", { ...live(), store: indexedDbStore(name), tabs: { locks } });
    const other = await notesClient(notes(), "yan", live());
    await mutators(leader).createList({ id: "xia", title: "Xia's" });
    await mutators(leader).shareList({ list_id: "xia", user_id: "yan", role: "viewer" });
    await accept(notes(), "yan", "xia");
    const room = bucketKey("shared", ["xia"]);
    await waitFor("both users hold the room", () => follower.buckets().includes(room) && other.buckets().includes(room));
    await waitFor("connected, the follower through the leader", () => [leader, follower, other].every((c) => c.status.connected));
    expect((await notes().stats()).sockets, "one socket per user").toBe(2);

    follower.track(room, { at: "follower" });
    other.track(room, { at: "other" });
    await waitFor("yan sees xia, through the leader", () => other.presenceState(room).xia?.[0]?.at === "follower");
    await waitFor("the follower sees yan", () => follower.presenceState(room).yan?.[0]?.at === "other");
    expect(other.presenceState(room).xia).toHaveLength(1);
    await follower.close();
    await waitFor("xia leaves with the follower's tab", () => other.presenceState(room).xia === undefined);
    await Promise.all([leader.close(), other.close()]);
  });
});
