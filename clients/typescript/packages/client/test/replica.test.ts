/**
 * The replica's rules where no server can be asked to exercise them: a `superseded` result,
 * rows pending mutations wrote kept past the bucket TTL, a lost bucket filled again, an
 * optimistic function that throws, and the store layout's migrations.
 */

import { describe, expect, test } from "vitest";

import { ClientStoreVersionError, CLIENT_STORE_VERSION, defineSchema, upgradeStoredState, type StoredState } from "../src/index.js";
import { Replica } from "../src/replica.js";
import type { PullResponse } from "../src/wire.js";

interface Item {
  id: string;
  title: string;
}
const schema = defineSchema<{ items: Item }, { rename: { id: string; title: string }; other: object }>({
  version: "1",
  tables: {
    items: {
      columns: [
        { name: "id", type: "text", nullable: false },
        { name: "title", type: "text", nullable: false },
      ],
      primaryKey: ["id"],
      merge: "field",
      crdt: [],
      owner: null,
      softDelete: null,
      synced: true,
    },
  },
  // Held through raw membership SQL, which the client cannot evaluate: it lets every write through.
  syncRules: {
    own: {
      parameters: [{ name: "id", type: "text", source: "membership.id" }],
      tables: ["items"],
      membership: { sql: "SELECT id FROM items" },
      data: [{ table: "items", scope: [{ column: "id", param: "id" }], filters: [] }],
      write: { items: [{ member: [], row: [] }] },
      accept: [],
      leave: false,
      while: null,
    },
  },
  serverOnly: [],
  mutators: ["rename", "other"],
});
const actor = { userId: "u", ownerId: "u", claims: {} };

function page(changes: Item[], extra: Partial<PullResponse> = {}): PullResponse {
  return {
    changes: changes.map((row) => ({ table: "items", row: { ...row }, buckets: ["own/u"] })),
    tombstones: [],
    removedBuckets: [],
    cursor: "c",
    hasMore: false,
    reset: false,
    lastMutationId: 0,
    syncedMutationId: 0,
    ...extra,
  };
}

function replica(): Replica {
  const r = new Replica(schema, actor, undefined);
  r.setOptimistic({
    rename: ((tx: { update(t: string, k: string, c: object): boolean }, args: { id: string; title: string }) => {
      if (!tx.update("items", args.id, { title: args.title })) throw new Error("no item");
    }) as never,
  });
  r.applyPage(page([{ id: "i", title: "server" }]), 0, 0);
  r.takeViewChanges();
  return r;
}

describe("replica", () => {
  test("a mutation the server reports superseded stops showing at once", () => {
    const r = replica();
    const queued = r.mutate("rename", { id: "i", title: "mine" }, 1);
    expect(r.viewRow("items", '["i"]')?.title).toBe("mine");
    expect(r.takeViewChanges().map((c) => c.type)).toEqual(["update"]);
    r.recordResults([{ clientMutationId: queued.clientMutationId, mutationId: 1, status: "applied", superseded: true }], 2);
    expect(r.viewRow("items", '["i"]')?.title).toBe("server");
    expect(r.takeViewChanges()).toEqual([
      { table: "items", key: '["i"]', type: "update", row: { id: "i", title: "server" }, previous: { id: "i", title: "mine" } },
    ]);
    // It still waits for a pull to show it synced.
    expect(r.pendingCount).toBe(1);
    r.applyPage(page([], { lastMutationId: 1, syncedMutationId: 1 }), 3, 0);
    expect(r.pendingCount).toBe(0);
  });

  test("rows a pending mutation wrote outlive a lost bucket's TTL", () => {
    const r = replica();
    r.mutate("rename", { id: "i", title: "mine" }, 1);
    r.applyPage(page([], { removedBuckets: ["own/u"] }), 10, 0);
    expect(r.viewRow("items", '["i"]')?.title).toBe("mine");
    expect(r.heldBuckets()).toEqual([]);
  });

  test("a bucket lost and held again keeps only the rows its fill brings again", () => {
    const r = replica();
    r.applyPage(page([{ id: "j", title: "server" }]), 1, 0);
    // Lost, with rows kept for the TTL; meanwhile "i" is deleted on the server.
    const ttl = 3_600_000;
    r.applyPage(page([], { removedBuckets: ["own/u"] }), 10, ttl);
    expect(r.viewRow("items", '["i"]')).toBeDefined();
    // Held again: the fill brings what the bucket holds now, over two pages.
    r.applyPage(page([{ id: "j", title: "renamed" }], { hasMore: true }), 20, ttl);
    expect(r.viewRow("items", '["i"]'), "kept until the fill is complete").toBeDefined();
    const stored = r.flush().putRows.find((row) => row.key === '["i"]');
    expect(stored?.refill, "the wait survives a reload").toEqual(["own/u"]);
    r.applyPage(page([{ id: "k", title: "new" }]), 30, ttl);
    expect(r.viewRow("items", '["i"]')).toBeUndefined();
    expect(r.viewRow("items", '["j"]')?.title).toBe("renamed");
    expect(r.viewRow("items", '["k"]')).toBeDefined();
    expect(r.flush().putRows.every((row) => row.refill === undefined)).toBe(true);
  });

  test("an optimistic function that throws refuses the mutation locally: nothing is queued", () => {
    const r = replica();
    expect(() => r.mutate("rename", { id: "missing", title: "x" }, 1)).toThrow("no item");
    expect(r.pendingCount).toBe(0);
    expect(r.meta.lastMutationId).toBe(0);
    expect(() => r.mutate("unknown", {}, 1)).toThrow("no mutator `unknown`");
  });

  test("rows and queued arguments cannot be changed from outside", () => {
    const r = replica();
    const args = { id: "i", title: "mine" };
    r.mutate("rename", args, 1);
    args.title = "changed afterwards";
    expect(r.flush().putOutbox[0]!.args).toEqual({ id: "i", title: "mine" });
    const row = r.viewRow("items", '["i"]')!;
    expect(() => {
      row.title = "scribbled";
    }).toThrow(TypeError);
    expect(r.viewRow("items", '["i"]')?.title).toBe("mine");
  });

  test("the rows a pending mutation wrote are pending until a pull confirms it", () => {
    const r = replica();
    r.applyPage(page([{ id: "j", title: "server" }]), 1, 0);
    expect(r.pendingOn("items", '["i"]')).toBe(false);
    const queued = r.mutate("rename", { id: "i", title: "mine" }, 2);
    expect(r.pendingOn("items", '["i"]')).toBe(true);
    expect(r.pendingOn("items", '["j"]'), "a row it did not write").toBe(false);
    r.mutate("other", {}, 3);
    expect(r.pendingOn("items", '["j"]'), "no optimistic function, no local write").toBe(false);
    r.recordResults([{ clientMutationId: queued.clientMutationId, mutationId: 1, status: "applied" }], 4);
    expect(r.pendingOn("items", '["i"]'), "applied, but not yet pulled").toBe(true);
    r.applyPage(page([{ id: "i", title: "mine" }], { lastMutationId: 2, syncedMutationId: 2 }), 5, 0);
    expect(r.pendingOn("items", '["i"]')).toBe(false);
  });

  test("a mutator without an optimistic function queues without touching the view", () => {
    const r = replica();
    const queued = r.mutate("other", {}, 1);
    expect(queued.mutationId).toBe(1);
    expect(r.takeViewChanges()).toEqual([]);
    expect(r.flush().putOutbox.map((e) => e.name)).toEqual(["other"]);
  });
});

describe("schema evolution", () => {
  const v2 = defineSchema<{ items: Item & { priority: number | null } }, object>({
    ...schema,
    version: "2",
    tables: {
      items: {
        ...schema.tables.items,
        columns: [...schema.tables.items.columns, { name: "priority", type: "int8", nullable: true }],
      },
    },
    mutators: [],
  });

  test("an old client keeps rows of a newer server, its unknown column ignored", () => {
    const r = new Replica(schema, actor, undefined);
    r.applyPage(page([{ id: "n", title: "newer", priority: 3 } as Item]), 0, 0);
    expect(r.viewRow("items", '["n"]')?.title).toBe("newer");
  });

  test("rows stored before the app added a column read with it null, offline", () => {
    const stored: StoredState = {
      meta: {
        version: CLIENT_STORE_VERSION,
        clientId: "c",
        userId: "u",
        schemaFingerprint: "written by version 1",
        cursor: "c1",
        lastMutationId: 0,
        syncedMutationId: 0,
        sweeping: false,
        lastHlc: null,
      },
      rows: [{ table: "items", key: '["i"]', row: { id: "i", title: "before" }, buckets: ["own/u"] }],
      buckets: [{ bucket: "own/u", leftAt: null }],
      outbox: [],
      quarantine: [],
    };
    const upgraded = new Replica(v2, actor, upgradeStoredState(stored));
    expect(upgraded.viewRow("items", '["i"]')).toEqual({ id: "i", title: "before", priority: null });
    // And a row an older server sends without it, too.
    upgraded.applyPage(page([{ id: "j", title: "old server" }]), 0, 0);
    expect(upgraded.viewRow("items", '["j"]')).toEqual({ id: "j", title: "old server", priority: null });
  });
});

describe("store layout", () => {
  const stored = (version: number): StoredState => ({
    meta: {
      version,
      clientId: "c",
      userId: "u",
      schemaFingerprint: "f",
      cursor: null,
      lastMutationId: 0,
      syncedMutationId: 0,
      sweeping: false,
      lastHlc: null,
    },
    rows: [],
    buckets: [],
    outbox: [],
    quarantine: [],
  });

  test("the current layout passes unchanged; a newer one is refused", () => {
    expect(upgradeStoredState(stored(CLIENT_STORE_VERSION))).toEqual(stored(CLIENT_STORE_VERSION));
    expect(() => upgradeStoredState(stored(CLIENT_STORE_VERSION + 1))).toThrow(ClientStoreVersionError);
  });

  test("older layouts go through each step in order", () => {
    const steps = {
      1: (s: StoredState) => ({ ...s, meta: { ...s.meta, cursor: "one" } }),
      2: (s: StoredState) => ({ ...s, meta: { ...s.meta, cursor: `${s.meta.cursor}+two` } }),
    };
    const migrated = upgradeStoredState(stored(1), steps, 3);
    expect(migrated.meta).toMatchObject({ version: 3, cursor: "one+two" });
    expect(() => upgradeStoredState(stored(0), steps, 3)).toThrow("layout 0 has no migration");
  });
});
