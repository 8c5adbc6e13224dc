/**
 * The stream against a real notes server: a write by one client reaches another without a
 * pull of its own asking, presence goes between two clients with joins and leaves (through the
 * client's methods and the functions of it), and the stream comes back by itself after the
 * server restarts.
 */

import { describe, expect, test } from "vitest";

import {
  bucketKey,
  createWebSocketSource,
  onPresence,
  presence,
  presenceState,
  subscribePresence,
  track,
  untrack,
  type PresenceEvent,
  type PresenceState,
} from "@engine/client";

import { buckets, mutators } from "../src/contract.gen.js";
import { accept, notesClient, waitFor, type NotesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";
import { Proxy } from "./support/proxy.js";

const notes = useNotesServer();

/** A client that syncs in the background over a WebSocket source, reconnecting quickly. */
const live = (user: string) =>
  notesClient(notes(), user, {
    background: true,
    realtime: createWebSocketSource({ backoffBaseMs: 50, backoffMaxMs: 500, connectTimeoutMs: 2_000 }),
  });

/** Live clients of `ownerId` and `viewerId`, once both hold the bucket of `ownerId`'s list `list`. */
async function sharedRoom(ownerId: string, viewerId: string, list: string) {
  const owner = await live(ownerId);
  const viewer = await live(viewerId);
  await mutators(owner).createList({ id: list, title: list });
  await mutators(owner).shareList({ list_id: list, user_id: viewerId, role: "viewer" });
  await accept(notes(), viewerId, list);
  const room = bucketKey("shared", [list]);
  await waitFor(`both to hold ${room}`, () => owner.buckets().includes(room) && viewer.buckets().includes(room));
  return { owner, viewer, room };
}

describe("realtime", () => {
  test("a write shows on another user's client through the stream", async () => {
    const ann = await live("ann");
    const ben = await live("ben");
    await waitFor("both streams up", () => ann.status.connected && ben.status.connected);
    const call = mutators(ann);
    await call.createList({ id: "shared-ab", title: "Ours" });
    await call.shareList({ list_id: "shared-ab", user_id: "ben", role: "editor" });
    await accept(notes(), "ben", "shared-ab");
    await waitFor("ben to see the shared list", () => ben.get("lists", "shared-ab")?.title === "Ours");
    await mutators(ben).addNote({ id: "from-ben", list_id: "shared-ab", title: "hello" });
    await waitFor("ann to see ben's note", () => ann.get("notes", "from-ben")?.title === "hello");
    expect(ben.buckets()).toContain(buckets.shared({ list_id: "shared-ab" }));
    await Promise.all([ann.close(), ben.close()]);
  });

  test("behind a proxy that refuses WebSocket upgrades, a write arrives by long-poll", async () => {
    const proxy = await Proxy.start(notes().url, { refuseUpgrades: true });
    // The default source; pulls come only when realtime asks for them.
    const behind = (user: string) =>
      notesClient({ url: proxy.url, token: (u: string) => notes().token(u) }, user, {
        background: true,
        realtime: undefined,
        pullIntervalMs: 3_600_000,
      });
    const fay = await behind("fay");
    const gus = await behind("gus");
    await waitFor("both long-poll", () => [fay, gus].every((c) => c.status.longPoll && c.status.connected));
    expect(proxy.refusedUpgrades).toBeGreaterThanOrEqual(4);
    const call = mutators(fay);
    await call.createList({ id: "shared-fg", title: "Polled" });
    await call.shareList({ list_id: "shared-fg", user_id: "gus", role: "editor" });
    await accept(notes(), "gus", "shared-fg");
    await waitFor("gus to see the shared list", () => gus.get("lists", "shared-fg")?.title === "Polled");
    await mutators(gus).addNote({ id: "from-gus", list_id: "shared-fg", title: "polled" });
    await waitFor("fay to see gus's note", () => fay.get("notes", "from-gus")?.title === "polled");
    await Promise.all([fay.close(), gus.close()]);
    await proxy.stop();
  });

  test("presence goes between two clients, with joins and leaves", async () => {
    const { owner: cleo, viewer: dan, room } = await sharedRoom("cleo", "dan", "room");

    const seenByCleo: PresenceEvent[] = [];
    cleo.onPresence((event) => event.bucket === room && seenByCleo.push(event));
    cleo.track(room, { at: "title" });
    dan.track(room, { at: "body" });
    const present = (client: NotesClient, user: string) => (client.presenceState(room)[user] ?? []).length > 0;
    await waitFor("each to see the other", () => present(cleo, "dan") && present(dan, "cleo"));
    const danMeta = cleo.presenceState(room).dan![0]!;
    expect(danMeta.at).toBe("body");
    expect(typeof danMeta.presenceRef).toBe("string");
    expect(seenByCleo.some((e) => e.joins.dan?.some((m) => m.presenceRef === danMeta.presenceRef))).toBe(true);

    // A new meta replaces the old one; untrack leaves.
    dan.track(room, { at: "title" });
    await waitFor("dan's meta to change", () => cleo.presenceState(room).dan?.[0]?.at === "title");
    expect(cleo.presenceState(room).dan).toHaveLength(1);
    dan.untrack(room);
    await waitFor("dan to leave", () => !present(cleo, "dan"));
    expect(seenByCleo.at(-1)!.leaves.dan).toHaveLength(1);
    expect(present(dan, "cleo")).toBe(true);
    await Promise.all([cleo.close(), dan.close()]);
  });

  test("presence as functions of a client: `track`, `subscribePresence`, `presence`", async () => {
    const { owner: fay, viewer: gus, room: den } = await sharedRoom("fay", "gus", "den");

    const seenByFay: PresenceState[] = [];
    const stop = subscribePresence(fay, den, (state) => seenByFay.push(state));
    expect(seenByFay).toEqual([{}]);
    const events: PresenceEvent[] = [];
    const stopEvents = onPresence(fay, (event) => event.bucket === den && events.push(event));
    track(fay, den, { at: "list" });
    const gusHere = presence(gus, den);
    expect(gusHere.bucket).toBe(den);
    gusHere.track({ at: "note" });
    await waitFor("fay to see gus", () => presenceState(fay, den).gus?.[0]?.at === "note");
    await waitFor("gus to see fay", () => gusHere.state().fay?.[0]?.at === "list");
    expect(seenByFay.at(-1)?.gus?.[0]?.at).toBe("note");
    expect(events.some((e) => e.joins.gus !== undefined)).toBe(true);

    const seenByGus: PresenceState[] = [];
    const stopGus = gusHere.subscribe((state) => seenByGus.push(state));
    expect(seenByGus.at(0)?.fay).toHaveLength(1);
    untrack(fay, den);
    await waitFor("gus to see fay leave", () => seenByGus.at(-1)?.fay === undefined);
    gusHere.untrack();
    await waitFor("fay to see gus leave", () => presenceState(fay, den).gus === undefined);
    expect(seenByFay.at(-1)).toEqual({});
    stop();
    stopEvents();
    stopGus();
    const count = seenByFay.length;
    gusHere.track({ at: "again" });
    await waitFor("gus again", () => fay.presenceState(den).gus !== undefined);
    expect(seenByFay).toHaveLength(count);
    await Promise.all([fay.close(), gus.close()]);
  });

  test("presence refused as too many (`too_many_presences`) is held back, not announced on every connection", async () => {
    const hal = await live("hal");
    await waitFor("the stream up", () => hal.status.connected);
    // One more list than the server lets an actor be present in (64 on one server).
    const lists = Array.from({ length: 65 }, (_, i) => `many-${i}`);
    for (const id of lists) await mutators(hal).createList({ id, title: id });
    const rooms = lists.map((id) => bucketKey("shared", [id]));
    await waitFor("hal to hold every list", () => rooms.every((room) => hal.buckets().includes(room)));
    let drops = 0;
    let refusal = "";
    let connected = hal.status.connected;
    hal.onStatus((status) => {
      if (connected && !status.connected) drops += 1;
      connected = status.connected;
      if (status.lastError?.includes("too_many_presences")) refusal = status.lastError;
    });
    for (const room of rooms) hal.track(room, { at: "list" });
    await waitFor("the server to refuse", () => hal.status.presenceRefused);
    expect(refusal).toContain("too_many_presences");
    await waitFor("the refused connection to close", () => drops >= 1);
    await waitFor("the stream back", () => hal.status.connected);
    const dropsNow = drops;
    // The same presences announced again would close the new connection too (65 tracks take
    // about 4 s at the client's pace).
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    expect(drops).toBe(dropsNow);
    expect(hal.status.connected && hal.status.presenceRefused).toBe(true);
    // A change of presence is announced again.
    hal.untrack(rooms[64]!);
    expect(hal.status.presenceRefused).toBe(false);
    await hal.close();
  }, 30_000);

  test("the stream comes back after the server restarts, and what happened meanwhile arrives", async () => {
    const eli = await live("eli");
    await mutators(eli).createList({ id: "eli", title: "Eli" });
    await waitFor("eli connected and synced", () => eli.status.connected && eli.status.pending === 0);
    const disconnects: boolean[] = [];
    eli.onStatus((s) => disconnects.push(s.connected));

    await notes().stop();
    await waitFor("eli to notice", () => !eli.status.connected);
    await notes().restart();
    await waitFor("eli to reconnect", () => eli.status.connected);
    expect(disconnects).toContain(false);

    // Another client of eli's writes; the reconnected stream's ping brings it.
    const other = await notesClient(notes(), "eli");
    await other.pull();
    await mutators(other).addNote({ id: "after", list_id: "eli", title: "after the restart" });
    await other.sync();
    await waitFor("eli to see the note", () => eli.get("notes", "after")?.title === "after the restart");
    await Promise.all([eli.close(), other.close()]);
  });
});
