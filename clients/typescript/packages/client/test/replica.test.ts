/**
 * The replica's rules where no server can be asked to exercise them: a `superseded` result,
 * rows pending mutations wrote kept past the bucket TTL, a lost bucket filled again, an
 * optimistic function that throws, the store layout's migrations, and a follower tab's replica
 * following the leader's writes (`replica/mirror.ts`).
 */

import { describe, expect, test } from "vitest";

import { ClientStoreVersionError, CLIENT_STORE_VERSION, defineSchema, formatHlc, upgradeStoredState, type StoredState } from "../src/index.js";
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

describe("a follower tab's replica", () => {
  /** A follower of `leader`: a replica built from the leader's writes alone. */
  function follower(leader: Replica): Replica {
    const r = new Replica(schema, actor, undefined);
    r.setOptimistic({
      rename: ((tx: { update(t: string, k: string, c: object): boolean }, args: { id: string; title: string }) => {
        tx.update("items", args.id, { title: args.title });
      }) as never,
    });
    r.applyWrite(leader.flush(), true, new Set());
    r.takeViewChanges();
    return r;
  }

  test("applies the leader's writes, its own mutation staying on top until the leader queues it", () => {
    const leader = replica();
    const tab = follower(leader);
    expect(tab.clientId).toBe(leader.clientId);
    expect(tab.viewRow("items", '["i"]')?.title).toBe("server");

    // The tab's clock ahead of the leader's, as when it observed a later reading.
    tab.clock.observe(formatHlc({ physicalMs: Date.now() + 60_000, counter: 0, node: "ahead" }));
    const own = tab.mutate("rename", { id: "i", title: "the tab's" }, 1);
    const local = new Set([own.clientMutationId]);
    leader.mutate("rename", { id: "i", title: "the leader's" }, 2);
    tab.applyWrite(leader.flush(), false, local);
    expect(tab.viewRow("items", '["i"]')?.title, "made later here: it stays on top").toBe("the tab's");
    expect(tab.unpushed(10).map((e) => e.mutationId), "numbered past the leader's").toEqual([1, 2]);

    // The leader queues it with its id and reading; the tab holds the leader's numbering.
    const entry = tab.outboxEntry(own.clientMutationId)!;
    const queued = leader.mutate("rename", entry.args, entry.createdAt, { clientMutationId: entry.clientMutationId, hlc: entry.hlc });
    expect(queued.mutationId).toBe(2);
    expect(leader.outboxEntry(entry.clientMutationId)?.hlc, "the reading past the leader's is kept").toBe(entry.hlc);
    local.delete(own.clientMutationId);
    tab.applyWrite(leader.flush(), false, local);
    expect(tab.unpushed(10).map((e) => [e.mutationId, e.clientMutationId])).toEqual(
      leader.unpushed(10).map((e) => [e.mutationId, e.clientMutationId]),
    );
    expect(tab.viewRow("items", '["i"]')?.title).toBe("the tab's");

    // A pull confirms both: every tab shows the server's row.
    leader.applyPage(page([{ id: "i", title: "the tab's" }], { lastMutationId: 2, syncedMutationId: 2 }), 3, 0);
    tab.applyWrite(leader.flush(), true, local);
    expect(tab.pendingCount).toBe(leader.pendingCount);
    expect(tab.viewRow("items", '["i"]')?.title).toBe("the tab's");
  });

  test("a reading not past the leader's clock is stamped again, so readings rise with mutation ids", () => {
    const leader = replica();
    const tab = follower(leader);
    const early = tab.mutate("rename", { id: "i", title: "early" }, 1);
    const hlc = tab.outboxEntry(early.clientMutationId)!.hlc;
    leader.mutate("rename", { id: "i", title: "later" }, 2);
    leader.clock.observe(`9${hlc.slice(1)}`);
    leader.mutate("rename", { id: "i", title: "early" }, 1, { clientMutationId: early.clientMutationId, hlc });
    const [first, second] = leader.unpushed(10);
    expect(second!.clientMutationId).toBe(early.clientMutationId);
    expect(second!.hlc).not.toBe(hlc);
    expect(second!.hlc > first!.hlc).toBe(true);
  });

  test("takes what the store holds, keeping its own mutations the store lacks", () => {
    const leader = replica();
    const tab = follower(leader);
    const own = tab.mutate("rename", { id: "i", title: "the tab's" }, 1);
    leader.applyPage(page([{ id: "j", title: "new" }]), 2, 0);
    leader.flush();
    const stored: StoredState = {
      meta: leader.meta,
      rows: [
        { table: "items", key: '["i"]', row: { id: "i", title: "server" }, buckets: ["own/u"] },
        { table: "items", key: '["j"]', row: { id: "j", title: "new" }, buckets: ["own/u"] },
      ],
      buckets: [{ bucket: "own/u", leftAt: null }],
      outbox: [],
      quarantine: [],
    };
    tab.replaceWith(stored, new Set([own.clientMutationId]));
    expect(tab.viewRow("items", '["j"]')?.title).toBe("new");
    expect(tab.viewRow("items", '["i"]')?.title).toBe("the tab's");
    tab.replaceWith(stored, new Set());
    expect(tab.viewRow("items", '["i"]')?.title).toBe("server");
    expect(tab.pendingCount).toBe(0);
  });
});
