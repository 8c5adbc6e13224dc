/**
 * The outbox against a real notes server: a rejection is quarantined without blocking what
 * follows (and `createEngineStatus` shows it), a lost answer is pushed again and applied once, a copied store is renumbered after
 * `409`, `429` and `503` are retried after `Retry-After`, and optimistic state stays until a
 * pull reports `syncedMutationId` at or above its mutation.
 */

import { describe, expect, test } from "vitest";

import { createEngineStatus, memoryStore } from "@engine/client";

import { mutators } from "../src/contract.gen.js";
import { accept, notesClient, waitFor } from "./support/clients.js";
import { problem, Proxy } from "./support/proxy.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

/** The server through `proxy`, with the server's tokens. */
const through = (proxy: Proxy) => ({ url: proxy.url, token: (user: string) => notes().token(user) });

/** `ownerId`'s list `list`, shared with `viewerId` as a viewer: both clients, the viewer's pulled. */
async function sharedWithViewer(ownerId: string, viewerId: string, list: string) {
  const owner = await notesClient(notes(), ownerId);
  await mutators(owner).createList({ id: list, title: `${ownerId}'s` });
  await mutators(owner).shareList({ list_id: list, user_id: viewerId, role: "viewer" });
  await owner.sync();
  await accept(notes(), viewerId, list);
  const viewer = await notesClient(notes(), viewerId);
  await viewer.pull();
  return { owner, viewer };
}

describe("quarantine", () => {
  test("a rejected mutation is quarantined, its effect withdrawn, and later mutations still apply", async () => {
    const bob = await notesClient(notes(), "bob");
    const call = mutators(bob);
    await call.createList({ id: "bobs", title: "Bob's" });
    // The optimistic function cannot know the list does not exist on the server yet: guess it does.
    bob.registerOptimistic({
      add_note: (tx, args) => {
        tx.insert("notes", {
          id: args.id!, owner_id: tx.actor.ownerId, list_id: args.list_id, title: args.title,
          done: false, position: 0, body: "AAA=", image: null, deleted_at: null,
        });
      },
    });
    await call.addNote({ id: "lost", list_id: "nowhere", title: "into the void" });
    await call.addNote({ id: "kept", list_id: "bobs", title: "kept" });
    expect(bob.get("notes", "lost")?.title).toBe("into the void");

    await bob.sync();
    expect(bob.get("notes", "lost")).toBeUndefined();
    expect(bob.get("notes", "kept")?.title).toBe("kept");
    expect(bob.status.pending).toBe(0);
    expect(bob.status.quarantined).toHaveLength(1);
    const [rejected] = bob.status.quarantined;
    expect(rejected).toMatchObject({ name: "add_note", args: { id: "lost", list_id: "nowhere" } });
    expect(rejected!.error.code).toBe("mutator_failed");
    expect(rejected!.error.detail).toContain("nowhere");

    // Retried once the list exists, it applies; discarded, it is gone.
    await call.createList({ id: "nowhere", title: "Somewhere" });
    const retried = await bob.retryQuarantined(rejected!.clientMutationId);
    expect(retried).toBeDefined();
    expect(bob.status.quarantined).toHaveLength(0);
    await bob.sync();
    expect(bob.get("notes", "lost")?.list_id).toBe("nowhere");
    expect(await bob.discardQuarantined(rejected!.clientMutationId)).toBe(false);
    await bob.close();
  });

  test("a mutation the server forbids is quarantined with `forbidden`", async () => {
    const { owner, viewer } = await sharedWithViewer("oscar", "vera", "oscars");
    expect(viewer.get("lists", "oscars")?.title).toBe("oscar's");
    // Only the owner may share: the local run knows it too and refuses at once.
    await expect(mutators(viewer).shareList({ list_id: "oscars", user_id: "eve", role: "editor" })).rejects.toThrow(
      "only the list's owner may share it",
    );
    expect(viewer.status.pending).toBe(0);
    // Without the local check, the server refuses it.
    viewer.registerOptimistic({ share_list: () => undefined });
    await mutators(viewer).shareList({ list_id: "oscars", user_id: "eve", role: "editor" });
    await viewer.sync();
    expect(viewer.status.quarantined.map((q) => q.error.code)).toEqual(["forbidden"]);
    await Promise.all([owner.close(), viewer.close()]);
  });

  test("`createEngineStatus` shows the quarantine as it fills, and retries and discards", async () => {
    const { owner, viewer } = await sharedWithViewer("olive", "walt", "olives");
    viewer.registerOptimistic({ share_list: () => undefined });

    const status = createEngineStatus(viewer);
    const seen: number[] = [];
    const unsubscribe = status.subscribe((now) => seen.push(now.quarantined.length));
    await mutators(viewer).shareList({ list_id: "olives", user_id: "eve", role: "editor" });
    expect(status.pending).toBe(1);
    await viewer.sync();
    expect(status.pending).toBe(0);
    expect(status.quarantined.map((q) => [q.name, q.error.code])).toEqual([["share_list", "forbidden"]]);
    expect(seen.at(0)).toBe(0);
    expect(seen.at(-1)).toBe(1);

    // Retried, the server refuses it again: a new entry in its place.
    const first = status.quarantined[0]!.clientMutationId;
    expect(await status.retry(first)).toBeDefined();
    await viewer.sync();
    const again = status.quarantined.map((q) => q.clientMutationId);
    expect(again).toHaveLength(1);
    expect(again).not.toContain(first);
    expect(await status.discard(again[0]!)).toBe(true);
    expect(await status.discard(again[0]!)).toBe(false);
    expect(status.current.quarantined).toEqual([]);
    expect(seen.at(-1)).toBe(0);
    unsubscribe();
    await Promise.all([owner.close(), viewer.close()]);
  });
});

describe("replays and renumbering", () => {
  test("a push whose answer is lost goes again and applies once", async () => {
    const proxy = await Proxy.start(notes().url);
    let lost = 0;
    proxy.plan((path) => (path === "/sync/push" && lost++ === 0 ? { forward: true, loseResponse: true } : { forward: true }));
    const client = await notesClient(through(proxy), "rita");
    await mutators(client).createList({ id: "once", title: "Once" });
    await expect(client.push()).rejects.toThrow();
    expect(client.status.pending).toBe(1);
    await client.sync();
    expect(client.status.pending).toBe(0);
    const pushes = proxy.seen.filter((s) => s.path === "/sync/push");
    expect(pushes).toHaveLength(2);
    // The same mutation, both times; the server recorded one.
    const sent = pushes.map((p) => (p.body as { mutations: { clientMutationId: string }[] }).mutations[0]!.clientMutationId);
    expect(sent[0]).toBe(sent[1]);
    const reader = await notesClient(notes(), "rita");
    await reader.pull();
    expect(reader.rows("list_members")).toHaveLength(1);
    await Promise.all([client.close(), reader.close(), proxy.stop()]);
  });

  test("the server answers a replayed mutation `duplicate`", async () => {
    const token = notes().token("dora");
    const body = {
      clientId: "0192f0e0-0000-7000-8000-0000000000d1",
      mutations: [{ mutationId: 1, clientMutationId: "0192f0e0-0000-7000-8000-00000000d001", name: "create_list", args: { id: "d", title: "D" } }],
    };
    const push = () =>
      fetch(`${notes().url}/sync/push`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then((r) => r.json() as Promise<{ results: { status: string }[] }>);
    expect((await push()).results[0]!.status).toBe("applied");
    expect((await push()).results[0]!.status).toBe("duplicate");
  });

  test("a copied store is renumbered after the server's 409 and its mutation applies", async () => {
    const store = memoryStore();
    const first = await notesClient(notes(), "carl", { store });
    await mutators(first).createList({ id: "carls", title: "Carl's" });
    await first.sync();
    const snapshot = (await store.load())!;
    await mutators(first).addNote({ id: "n2", list_id: "carls", title: "two" });
    await mutators(first).addNote({ id: "n3", list_id: "carls", title: "three" });
    await first.sync();
    await first.close();

    // The store as it was after the first mutation, restored: its next id is taken on the server.
    const copy = memoryStore(snapshot);
    const restored = await notesClient(notes(), "carl", { store: copy });
    const queued = await mutators(restored).addNote({ id: "n4", list_id: "carls", title: "four" });
    expect(queued.mutationId).toBe(2);
    await restored.sync();
    expect(restored.status.pending).toBe(0);
    expect(restored.status.quarantined).toEqual([]);
    expect(restored.rows("notes").map((n) => n.id)).toEqual(["n2", "n3", "n4"]);
    expect((await copy.load())!.meta.lastMutationId).toBe(4);
    await restored.close();
  });
});

describe("retries", () => {
  for (const [status, code, seconds] of [
    [503, "retry_later", 1],
    [429, "rate_limited", 2],
  ] as const) {
    test(`a push answered ${status} is retried after its Retry-After`, async () => {
      const proxy = await Proxy.start(notes().url);
      let refused = 0;
      proxy.plan((path) =>
        path === "/sync/push" && refused++ < 2
          ? { status, headers: { "content-type": "application/problem+json", "retry-after": String(seconds) }, body: problem(status, code, "not now") }
          : { forward: true },
      );
      const client = await notesClient(through(proxy), "tess", { background: true });
      const retries = new Map<number, number>();
      client.onStatus((s) => {
        if (s.retry?.operation === "push" && s.retry.code === code) retries.set(s.retry.attempt, s.retry.waitMs);
      });
      await mutators(client).createList({ id: `retry-${status}`, title: "Retry" });
      await waitFor("the push to go through", () => client.status.pending === 0);
      // The backoff alone would wait at most 20 ms, then 40 ms: the server's word made it longer.
      expect([...retries.keys()]).toEqual([1, 2]);
      for (const wait of retries.values()) expect(wait).toBeGreaterThanOrEqual(seconds * 1000);
      expect(proxy.seen.filter((s) => s.path === "/sync/push").map((s) => s.status)).toEqual([status, status, 200]);
      expect(client.status.retry).toBeNull();
      await Promise.all([client.close(), proxy.stop()]);
    });
  }
});

describe("syncedMutationId", () => {
  test("optimistic state stays until a pull reports its mutation synced", async () => {
    const proxy = await Proxy.start(notes().url);
    let lag = false;
    // As while an older transaction is still running on the server: the pull holds less than pushed.
    proxy.plan((path) =>
      path === "/sync/pull" && lag
        ? { forward: true, rewrite: (page) => ({ ...page, syncedMutationId: Math.max(0, (page.lastMutationId as number) - 1) }) }
        : { forward: true },
    );
    const client = await notesClient(through(proxy), "sam");
    await mutators(client).createList({ id: "s", title: "S" });
    await client.sync();
    lag = true;
    const { result } = await mutators(client).addNote({ list_id: "s", title: "waiting" });
    await client.push();
    await client.pull();
    // Applied, but not yet reported synced: it is still pending, and still shown.
    expect(client.status.pending).toBe(1);
    expect(client.get("notes", result as string)?.title).toBe("waiting");
    lag = false;
    await client.pull();
    expect(client.status.pending).toBe(0);
    expect(client.get("notes", result as string)?.title).toBe("waiting");
    await Promise.all([client.close(), proxy.stop()]);
  });
});
