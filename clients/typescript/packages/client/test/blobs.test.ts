/**
 * Blob keys and blob stores on their own. `keyForBlob` gives the keys the server's
 * `BlobKey::for_bytes` gives, by the vectors the Rust code writes (`test/vectors/blob-keys.json`,
 * from `engine-kernel/tests/blob_keys.rs`), whatever form the bytes come in. The memory and
 * IndexedDB blob stores keep bytes and the upload queue alike: a put that queues is one write,
 * the queue goes oldest first, and an upload taken off the queue stays off.
 */

import "fake-indexeddb/auto";

import { readFileSync } from "node:fs";

import { describe, expect, test } from "vitest";

import { indexedDbBlobStore, isBlobKey, keyForBlob, memoryBlobStore, type BlobStore } from "@engine/client";

interface Vector {
  what: string;
  hex?: string;
  counting?: number;
  key: string;
}

const vectors = (
  JSON.parse(readFileSync(new URL("./vectors/blob-keys.json", import.meta.url), "utf8")) as { vectors: Vector[] }
).vectors;

/** The bytes a vector describes. */
function input(vector: Vector): Uint8Array {
  if (vector.hex !== undefined) return Uint8Array.from(vector.hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
  return Uint8Array.from({ length: vector.counting! }, (_, i) => i % 256);
}

describe("keyForBlob", () => {
  test("gives the keys the Rust kernel gives", async () => {
    expect(vectors.length).toBeGreaterThanOrEqual(10);
    for (const vector of vectors) {
      expect(await keyForBlob(input(vector)), vector.what).toBe(vector.key);
    }
  });

  test("the same key from bytes, a buffer, a view into a larger buffer and a Blob", async () => {
    const vector = vectors.find((v) => v.hex === "68656c6c6f")!;
    const bytes = input(vector);
    const larger = new Uint8Array(bytes.length + 8);
    larger.set(bytes, 4);
    const forms = [bytes, bytes.slice().buffer, larger.subarray(4, 4 + bytes.length), new Blob([bytes as Uint8Array<ArrayBuffer>], { type: "text/plain" })];
    for (const form of forms) expect(await keyForBlob(form)).toBe(vector.key);
  });

  test("a key is `sha256:` and 64 lowercase hex digits", () => {
    for (const vector of vectors) expect(isBlobKey(vector.key)).toBe(true);
    expect(isBlobKey(vectors[0]!.key.toUpperCase())).toBe(false);
    expect(isBlobKey("sha256:abc")).toBe(false);
    expect(isBlobKey(null)).toBe(false);
  });
});

const stores: [string, () => BlobStore][] = [
  ["memory", () => memoryBlobStore()],
  ["IndexedDB", () => indexedDbBlobStore(`blobs-${crypto.randomUUID()}`)],
];

describe.each(stores)("the %s blob store", (_name, open) => {
  const blob = (key: string, text: string) => ({ key, bytes: new TextEncoder().encode(text), type: "text/plain" });
  const upload = (key: string, queuedAt: number) => ({ key, size: 1, queuedAt, attempts: 0, lastError: null });

  test("keeps bytes with their queued upload, the queue oldest first", async () => {
    const store = open();
    await store.put(blob("b", "second"), upload("b", 20));
    await store.put(blob("a", "first"), upload("a", 10));
    await store.put(blob("c", "cached, not queued"));
    expect((await store.uploads()).map((u) => u.key)).toEqual(["a", "b"]);
    expect(new TextDecoder().decode((await store.get("a"))!.bytes)).toBe("first");
    expect((await store.get("c"))?.type).toBe("text/plain");
    expect((await store.keys()).sort()).toEqual(["a", "b", "c"]);
    expect(await store.get("d")).toBeUndefined();
    await store.close();
  });

  test("an upload taken off the queue stays off, and its bytes stay", async () => {
    const store = open();
    await store.put(blob("a", "x"), upload("a", 1));
    await store.updateUpload({ ...upload("a", 1), attempts: 2, lastError: "offline" });
    expect((await store.uploads())[0]).toMatchObject({ attempts: 2, lastError: "offline" });
    await store.dequeue("a");
    // A late update of an upload that is done does not queue it again.
    await store.updateUpload({ ...upload("a", 1), attempts: 3, lastError: "late" });
    expect(await store.uploads()).toEqual([]);
    expect(await store.get("a")).toBeDefined();
    await store.delete("a");
    expect(await store.get("a")).toBeUndefined();
    await store.close();
  });

  test("bytes are copied in and out", async () => {
    const store = open();
    const put = blob("a", "abc");
    await store.put(put);
    put.bytes[0] = 0;
    const got = (await store.get("a"))!;
    expect(new TextDecoder().decode(got.bytes)).toBe("abc");
    got.bytes[0] = 0;
    expect(new TextDecoder().decode((await store.get("a"))!.bytes)).toBe("abc");
    await store.close();
  });
});

test("an IndexedDB blob store reopened by name keeps its queue, as after a reload", async () => {
  const name = `blobs-${crypto.randomUUID()}`;
  const before = indexedDbBlobStore(name);
  await before.put({ key: "k", bytes: new Uint8Array([1, 2, 3]), type: "" }, { key: "k", size: 3, queuedAt: 5, attempts: 0, lastError: null });
  await before.close();
  const after = indexedDbBlobStore(name);
  expect(await after.uploads()).toEqual([{ key: "k", size: 3, queuedAt: 5, attempts: 0, lastError: null }]);
  expect([...(await after.get("k"))!.bytes]).toEqual([1, 2, 3]);
  await after.close();
});
