/**
 * Syncing only what is open, against a real notes server: a client given `syncOpen` pulls the
 * buckets of its always-synced rules and the buckets opened with `syncBucket`, nothing else; a
 * released bucket's rows go after the bucket TTL; the `memberships` index keeps its titles as
 * renamed; and the stream pings it only for what it syncs.
 */

import { describe, expect, test } from "vitest";

import { createWebSocketSource, type ServerFrame, type WebSocketLike } from "@engine/client";

import { buckets, mutators } from "../src/contract.gen.js";
import { accept, notesClient, waitFor } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

/** `owner`'s lists `lists` (a note `<list>-note` in each), shared with `member`; `member`'s own list `<member>-own`. */
async function sharedLists(owner: string, member: string, lists: string[]) {
  const client = await notesClient(notes(), owner);
  for (const list of lists) {
    await mutators(client).createList({ id: list, title: list });
    await mutators(client).addNote({ id: `${list}-note`, list_id: list, title: list });
    await mutators(client).shareList({ list_id: list, user_id: member, role: "editor" });
  }
  await client.sync();
  for (const list of lists) await accept(notes(), member, list);
  const own = await notesClient(notes(), member);
  await mutators(own).createList({ id: `${member}-own`, title: "mine" });
  await own.sync();
  await own.close();
  return client;
}

describe("sync what is open", () => {
  test("only the always-synced rules and the open buckets are pulled; a released bucket goes after the TTL", async () => {
    const owner = await sharedLists("oda", "pia", ["oda-1", "oda-2"]);
    const pia = await notesClient(notes(), "pia", { syncOpen: ["own"], bucketTtlMs: 0 });
    await pia.pull();
    expect(pia.get("lists", "pia-own")).toBeDefined();
    expect(pia.rows("lists").map((l) => l.id)).toEqual(["pia-own"]);
    expect(pia.buckets().every((b) => b.startsWith("own/"))).toBe(true);

    const open = pia.syncBucket(buckets.shared({ list_id: "oda-1" }));
    await pia.pull();
    expect(pia.get("notes", "oda-1-note")).toBeDefined();
    expect(pia.get("notes", "oda-2-note")).toBeUndefined();
    expect(pia.openBuckets()).toEqual([buckets.shared({ list_id: "oda-1" })]);

    open.release();
    await pia.pull();
    expect(pia.get("notes", "oda-1-note")).toBeUndefined();
    expect(pia.get("lists", "oda-1")).toBeUndefined();
    expect(pia.get("lists", "pia-own")).toBeDefined();

    // Opened again, the list comes whole, from its beginning, with what changed meanwhile.
    await mutators(owner).addNote({ id: "oda-1-later", list_id: "oda-1", title: "later" });
    await owner.sync();
    pia.syncBucket(buckets.shared({ list_id: "oda-1" }));
    await pia.pull();
    expect(pia.get("notes", "oda-1-note")).toBeDefined();
    expect(pia.get("notes", "oda-1-later")).toBeDefined();
    // A bucket the actor does not hold is left out, not refused.
    pia.syncBucket(buckets.shared({ list_id: "nobody" }));
    await pia.pull();
    await Promise.all([owner.close(), pia.close()]);
  });

  test("within the TTL a released bucket's rows stay, unsynced", async () => {
    const owner = await sharedLists("ola", "quin", ["ola-1"]);
    const quin = await notesClient(notes(), "quin", { syncOpen: ["own"], bucketTtlMs: 3_600_000 });
    const open = quin.syncBucket(buckets.shared({ list_id: "ola-1" }));
    await quin.pull();
    open.release();
    await quin.pull();
    expect(quin.get("notes", "ola-1-note")).toBeDefined();
    expect(quin.buckets()).not.toContain(buckets.shared({ list_id: "ola-1" }));
    await Promise.all([owner.close(), quin.close()]);
  });

  test("the memberships index lists a member's lists with their titles, renamed at once on the owner's device", async () => {
    const owner = await sharedLists("ria", "sam", ["ria-1", "ria-2"]);
    const sam = await notesClient(notes(), "sam", { syncOpen: ["own", "memberships"] });
    await sam.pull();
    const index = (client: typeof sam, list: string, user = "sam") =>
      client.get("list_members", { list_id: list, user_id: user })?.title;
    expect([index(sam, "ria-1"), index(sam, "ria-2")]).toEqual(["ria-1", "ria-2"]);
    expect(sam.get("lists", "ria-1"), "no list's bucket").toBeUndefined();

    // The owner's optimistic run renames every membership it holds, as the server's run does.
    await mutators(owner).renameList({ id: "ria-1", title: "trip" });
    expect([index(owner, "ria-1"), index(owner, "ria-1", "ria")]).toEqual(["trip", "trip"]);
    await owner.sync();
    await sam.pull();
    expect([index(sam, "ria-1"), index(sam, "ria-2")]).toEqual(["trip", "ria-2"]);
    await Promise.all([owner.close(), sam.close()]);
  });

  test("the stream pings only the buckets synced", async () => {
    const owner = await sharedLists("una", "vic", ["una-1", "una-2"]);
    const frames: ServerFrame[] = [];
    const webSocket = (url: string, protocols: string[]): WebSocketLike => {
      const socket = new WebSocket(url, protocols);
      socket.addEventListener("message", (event) => frames.push(JSON.parse(String(event.data)) as ServerFrame));
      return socket as unknown as WebSocketLike;
    };
    const vic = await notesClient(notes(), "vic", {
      syncOpen: ["own"],
      background: true,
      pullIntervalMs: 3_600_000,
      realtime: createWebSocketSource({ webSocket, backoffBaseMs: 50, backoffMaxMs: 500 }),
    });
    const one = buckets.shared({ list_id: "una-1" });
    vic.syncBucket(one);
    await waitFor("una-1 to arrive", () => vic.get("notes", "una-1-note") !== undefined);
    await waitFor("the stream to follow the buckets held", () => vic.status.connected && vic.buckets().includes(one));
    // The client connects with `follow=subscription`: the server sends a bucket's presence once
    // the subscription naming it is in place, and never the presence of a bucket not synced.
    const presences = () => frames.filter((f) => f.type === "presence_state" && f.bucket === one).length;
    await waitFor("the subscription to be answered", () => presences() >= 1);
    const two = buckets.shared({ list_id: "una-2" });
    expect(frames.some((f) => f.type === "presence_state" && f.bucket === two)).toBe(false);
    const before = frames.length;
    await mutators(owner).addNote({ id: "una-2-quiet", list_id: "una-2", title: "not open" });
    await owner.push();
    await mutators(owner).addNote({ id: "una-1-loud", list_id: "una-1", title: "open" });
    await owner.push();
    await waitFor("the open list's note to arrive", () => vic.get("notes", "una-1-loud") !== undefined);
    const pinged = frames.slice(before).flatMap((f) => (f.type === "ping" ? [f.bucket] : []));
    expect(pinged).toContain(one);
    expect(pinged).not.toContain(buckets.shared({ list_id: "una-2" }));
    expect(vic.get("notes", "una-2-quiet")).toBeUndefined();
    await Promise.all([owner.close(), vic.close()]);
  });
});
