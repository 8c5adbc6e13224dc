/**
 * Blobs against a real notes server (`createEngineBlobs`): an image put offline is kept with its
 * queued upload through a reload, its note syncs before the bytes do (a reader sees it
 * `uploading`), and once online the upload goes and a member of the list downloads the same
 * bytes; who cannot read the note is refused, and a member removed from the list is refused
 * from then on and keeps no copy. Uploads the server refuses for good (over its size limit,
 * bytes that do not hash to their key) leave the queue, are reported, and hold up nothing.
 */

import { randomBytes } from "node:crypto";

import { describe, expect, test } from "vitest";

import {
  createEngineBlobs,
  keyForBlob,
  memoryBlobStore,
  memoryStore,
  type BlobState,
  type Fetch,
  type OnlineSignal,
} from "@engine/client";

import { mutators } from "../src/contract.gen.js";
import { accept, notesClient } from "./support/clients.js";
import { useNotesServer } from "./support/lifecycle.js";

const notes = useNotesServer();

/** Short waits between tries, so that a test does not sit out a production backoff. */
const retry = { backoffBaseMs: 20, backoffMaxMs: 200 };

/**
 * A client's way to the server: `down`, no request gets through (as offline); `blocked`, the
 * requests to matching paths do not.
 */
class Network {
  down = false;
  blocked: RegExp | undefined;
  readonly fetch: Fetch = (input, init) => {
    if (this.down || this.blocked?.test(new URL(input).pathname)) {
      return Promise.reject(new TypeError("fetch failed: the network is down"));
    }
    return globalThis.fetch(input, init);
  };
}

/** The platform's connectivity, switched by the test. */
class Connectivity implements OnlineSignal {
  private readonly listeners = new Set<(online: boolean) => void>();
  subscribe(listener: (online: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  set(online: boolean): void {
    for (const listener of this.listeners) listener(online);
  }
}

/** `owner`'s list `list`, shared with `viewer` as a viewer, synced. */
async function sharedList(owner: string, viewer: string, list: string, options: Parameters<typeof notesClient>[2] = {}) {
  const client = await notesClient(notes(), owner, options);
  await mutators(client).createList({ id: list, title: list });
  await mutators(client).shareList({ list_id: list, user_id: viewer, role: "viewer" });
  await client.sync();
  await accept(notes(), viewer, list);
  return client;
}

describe("blobs", () => {
  test("an image put offline survives a reload, uploads once online, and reaches a member", async () => {
    const network = new Network();
    const rows = memoryStore();
    const blobStore = memoryBlobStore();
    const online = new Connectivity();
    const alice = await sharedList("alice", "bob", "trip", { store: rows, fetch: network.fetch });

    // Offline: the image is kept and queued, its note written; the upload waits.
    network.down = true;
    const before = createEngineBlobs(alice, { store: blobStore, online, retry });
    const photo = new Uint8Array(randomBytes(300_000));
    const key = await before.put(photo, { type: "image/jpeg" });
    expect(key).toBe(await keyForBlob(photo));
    await mutators(alice).addNote({ id: "passport", list_id: "trip", title: "Passport" });
    await mutators(alice).setNoteImage({ id: "passport", image: key });
    expect(before.status(key)).toMatchObject({ state: "uploading", local: true });
    await expect.poll(async () => (await before.queued())[0]?.attempts ?? 0).toBeGreaterThan(0);
    expect((await before.queued())[0]?.lastError).toContain("the network is down");
    await before.close();
    await alice.close();

    // Reloaded, still offline: the upload is still queued, the bytes still here.
    const reloaded = await notesClient(notes(), "alice", { store: rows, fetch: network.fetch });
    const blobs = createEngineBlobs(reloaded, { store: blobStore, online, retry: { backoffBaseMs: 60_000, backoffMaxMs: 60_000 } });
    expect(reloaded.status.pending).toBe(2);
    await expect.poll(() => blobs.status(key).state).toBe("uploading");
    expect(blobs.status(key).local).toBe(true);
    expect(await blobs.type(key)).toBe("image/jpeg");
    expect(await blobs.get(key)).toEqual(photo);
    expect((await blobs.queued()).map((upload) => upload.key)).toEqual([key]);

    // Back online, but the blob routes do not answer yet: the note syncs before the bytes, and
    // bob sees the image uploading.
    network.down = false;
    network.blocked = /^\/blobs\//;
    await reloaded.sync();
    expect(reloaded.status.pending).toBe(0);
    const bob = await notesClient(notes(), "bob");
    await bob.pull();
    expect(bob.get("notes", "passport")?.image).toBe(key);
    const bobs = createEngineBlobs(bob, { retry });
    const seen: BlobState[] = [];
    const stop = bobs.watch(key, (status) => seen.push(status.state));
    await expect.poll(() => bobs.status(key).state).toBe("uploading");
    expect(bobs.status(key).local).toBe(false);
    expect((await blobs.queued()).length, "alice's upload is still queued").toBe(1);

    // The blob routes answer and the platform says online: the upload goes at once, and bob's
    // watch brings the bytes.
    network.blocked = undefined;
    online.set(true);
    await expect.poll(() => blobs.status(key).state).toBe("available");
    expect(await blobs.queued()).toEqual([]);
    await expect.poll(() => bobs.status(key).state).toBe("available");
    expect(bobs.status(key).local).toBe(true);
    expect(await bobs.get(key)).toEqual(photo);
    expect(seen).toEqual(expect.arrayContaining(["uploading", "available"]));
    stop();

    // Carol reads no row naming it: refused, as for a blob that does not exist.
    const carol = await notesClient(notes(), "carol");
    const carols = createEngineBlobs(carol);
    await expect(carols.get(key)).rejects.toMatchObject({ name: "BlobError", code: "not_found" });
    expect(carols.status(key)).toMatchObject({ state: "missing", local: false });
    await Promise.all([blobs.close(), bobs.close(), carols.close(), reloaded.close(), bob.close(), carol.close()]);
  });

  test("a member removed from the list is refused the image and keeps no copy", async () => {
    const owner = await sharedList("olga", "vic", "pics");
    const blobs = createEngineBlobs(owner, { background: false });
    const image = new Uint8Array(randomBytes(10_000));
    const key = await blobs.put(image);
    await mutators(owner).addNote({ id: "sunset", list_id: "pics", title: "Sunset" });
    await mutators(owner).setNoteImage({ id: "sunset", image: key });
    await owner.sync();
    await blobs.upload();

    const viewer = await notesClient(notes(), "vic");
    await viewer.pull();
    const viewerStore = memoryBlobStore();
    const viewers = createEngineBlobs(viewer, { store: viewerStore, background: false });
    expect(await viewers.get(key)).toEqual(image);
    expect(await viewerStore.keys()).toEqual([key]);

    await mutators(owner).unshareList({ list_id: "pics", user_id: "vic" });
    await owner.sync();
    await viewer.pull();
    expect(viewer.get("notes", "sunset")).toBeUndefined();
    await expect.poll(() => viewerStore.keys()).toEqual([]);
    await expect(viewers.get(key)).rejects.toMatchObject({ code: "not_found" });
    expect(viewers.status(key).state).toBe("missing");
    await Promise.all([blobs.close(), viewers.close(), owner.close(), viewer.close()]);
  });

  test("uploads refused for good leave the queue, are reported, and hold up nothing", async () => {
    const client = await notesClient(notes(), "uma");
    const store = memoryBlobStore();
    const blobs = createEngineBlobs(client, { store, background: false });
    const encode = (text: string) => new TextEncoder().encode(text);

    // Bytes that do not hash to their key, as a damaged store would hold them.
    const claimed = await keyForBlob(encode("what the key says"));
    await store.put(
      { key: claimed, bytes: encode("other bytes"), type: "" },
      { key: claimed, size: 11, queuedAt: 0, attempts: 0, lastError: null },
    );
    // Over the notes server's limit of 10 MiB.
    const big = new Uint8Array(10 * 1024 * 1024 + 1);
    const bigKey = await blobs.put(big);
    const fine = await blobs.put(encode("a small file"));

    await blobs.upload();
    expect(await blobs.queued()).toEqual([]);
    expect(blobs.failures.map((failure) => [failure.key, failure.code])).toEqual([
      [claimed, "validation_failed"],
      [bigKey, "payload_too_large"],
    ]);
    expect(blobs.status(bigKey)).toMatchObject({ state: "failed", local: true });
    expect(blobs.status(bigKey).error).toContain("payload_too_large");
    expect(blobs.status(claimed).error).toContain("validation_failed");
    expect(blobs.status(fine).state).toBe("available");

    // Told the limit, `put` refuses at once and queues nothing.
    const strict = createEngineBlobs(client, { maxSize: 10 * 1024 * 1024, background: false });
    await expect(strict.put(big)).rejects.toMatchObject({ name: "BlobError", code: "payload_too_large" });
    expect(await strict.queued()).toEqual([]);
    await Promise.all([blobs.close(), strict.close(), client.close()]);
  });
});
