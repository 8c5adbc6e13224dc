/**
 * The write rules evaluated offline (`src/authorize.ts`), against an app whose rules use every
 * kind of term: claim buckets, membership buckets with write conditions, `leave`, a checked and
 * an open `accept(...)`, row terms, `while`, raw membership SQL and `server_only`. Each refusal
 * is pinned to the server's exact words (`engine-runtime/src/mutation/authorize.rs`).
 */

import { readFileSync } from "node:fs";

import { describe, expect, test } from "vitest";

import { authorizeWrite, paramText, rowBuckets, writeBuckets, type Verdict, type WriteContext } from "../src/authorize.js";
import { ForbiddenError } from "../src/errors.js";
import { Replica } from "../src/replica.js";
import type { AnySchema, SyncRuleSchema, TableSchema } from "../src/schema.js";
import type { Row } from "../src/wire.js";

function table(columns: string[], primaryKey: string[], softDelete: string | null = null): TableSchema {
  return {
    columns: columns.map((name) => ({ name, type: name === "locked" ? "bool" : "text", nullable: true })),
    primaryKey,
    merge: "lww",
    crdt: [],
    owner: null,
    softDelete,
    synced: true,
  };
}

const rule = (fields: Partial<SyncRuleSchema> & Pick<SyncRuleSchema, "parameters" | "data">): SyncRuleSchema => ({
  tables: [...new Set(fields.data.map((s) => s.table))],
  membership: null,
  write: {},
  accept: [],
  leave: false,
  while: null,
  ...fields,
});
const param = (name: string, source: string) => ({ name, type: "text", source });
const scoped = (tableName: string, column: string, p: string, filters: { column: string; value: string | number | boolean }[] = []) => ({
  table: tableName,
  scope: [{ column, param: p }],
  filters,
});
const members = (...roles: string[]) => roles.map((role) => ({ member: [{ column: "role", value: role }], row: [] }));
const everyone = [{ member: [], row: [] }];

const schema: AnySchema = {
  version: "1",
  tables: {
    lists: table(["id", "owner_id", "title", "deleted_at"], ["id"], "deleted_at"),
    notes: table(["id", "list_id", "title", "deleted_at"], ["id"], "deleted_at"),
    members: table(["list_id", "user_id", "owner_id", "role"], ["list_id", "user_id"]),
    team_members: table(["team_id", "user_id", "role", "deleted_at"], ["team_id", "user_id"], "deleted_at"),
    tasks: table(["id", "team_id", "assignee"], ["id"]),
    comments: table(["id", "team_id", "author"], ["id"]),
    messages: table(["id", "sender", "recipient"], ["id"]),
    cards: table(["id", "owner", "locked"], ["id"]),
    docs: table(["id", "org", "public", "author", "editor"], ["id"]),
    projects: table(["id", "org"], ["id"]),
    org_members: table(["org", "user_id"], ["org", "user_id"]),
    audit: table(["id"], ["id"]),
  },
  syncRules: {
    own: rule({
      parameters: [param("owner_id", "actor.owner_id")],
      data: [scoped("lists", "owner_id", "owner_id"), scoped("members", "owner_id", "owner_id")],
      write: { lists: everyone },
    }),
    shared: rule({
      parameters: [param("list_id", "membership.list_id")],
      membership: { table: "members", filters: [{ column: "user_id", claim: "actor.user_id" }] },
      data: [scoped("lists", "id", "list_id"), scoped("notes", "list_id", "list_id"), scoped("members", "list_id", "list_id")],
      write: { notes: members("owner", "editor"), lists: members("owner"), members: members("owner", "editor") },
    }),
    watch: rule({
      parameters: [param("list_id", "membership.list_id")],
      membership: { table: "members", filters: [{ column: "user_id", claim: "actor.user_id" }] },
      data: [scoped("lists", "id", "list_id")],
      while: "shared",
    }),
    team: rule({
      parameters: [param("team_id", "membership.team_id")],
      membership: { table: "team_members", filters: [{ column: "user_id", claim: "actor.user_id" }] },
      data: [scoped("tasks", "team_id", "team_id"), scoped("team_members", "team_id", "team_id"), scoped("comments", "team_id", "team_id")],
      write: { tasks: everyone, comments: [{ member: [], row: [{ column: "author", op: "==", claim: "actor.user_id" }] }] },
      leave: true,
    }),
    inbox: rule({
      parameters: [param("user", "actor.user_id")],
      data: [scoped("tasks", "assignee", "user")],
      accept: [{ rule: "team", open: false }],
    }),
    sent: rule({ parameters: [param("user", "actor.user_id")], data: [scoped("messages", "sender", "user")], write: { messages: everyone } }),
    received: rule({
      parameters: [param("user", "actor.user_id")],
      data: [scoped("messages", "recipient", "user")],
      accept: [{ rule: "sent", open: true }],
    }),
    board: rule({
      parameters: [param("owner", "actor.user_id")],
      data: [scoped("cards", "owner", "owner")],
      write: { cards: [{ member: [], row: [{ column: "locked", op: "!=", value: true }] }] },
    }),
    lobby: rule({
      parameters: [param("org", "actor.claims.org")],
      data: [
        scoped("docs", "org", "org", [{ column: "public", value: true }]),
        { table: "docs", scope: [{ column: "author", param: "org" }, { column: "editor", param: "org" }], filters: [] },
      ],
    }),
    orgs: rule({
      parameters: [param("org", "membership.org")],
      membership: { sql: "SELECT org FROM org_members WHERE user_id = $user_id", reads: ["org_members"] },
      data: [scoped("projects", "org", "org")],
      write: { projects: members("admin") },
    }),
  },
  serverOnly: ["audit"],
  mutators: [],
};

const alice = { userId: "alice", ownerId: "alice", claims: { org: "acme" } };

/** Alice's client: the buckets it holds and the rows it has. */
function context(held: string[], rows: Record<string, Row[]> = {}): WriteContext {
  return {
    schema,
    actor: alice,
    held: (bucket) => held.includes(bucket),
    rows: (tableName) => rows[tableName] ?? [],
    created: new Set(),
  };
}

const member = (list_id: string, user_id: string, role: string): Row => ({ list_id, user_id, owner_id: "olga", role });
/** Alice edits list `l1`, views `l2`, owns nothing shared; she is on team `t1`. */
const aliceHolds = () =>
  context(["own/alice", "shared/l1", "shared/l2", "team/t1", "inbox/alice", "sent/alice", "received/alice", "board/alice"], {
    members: [member("l1", "alice", "editor"), member("l1", "olga", "owner"), member("l2", "alice", "viewer")],
    team_members: [{ team_id: "t1", user_id: "alice", role: "member", deleted_at: null }],
  });

const allowed: Verdict = { kind: "allowed" };
const unknown: Verdict = { kind: "unknown" };
const refused = (message: string): Verdict => ({ kind: "refused", message });

const note = (id: string, list_id: string | null, deleted_at: string | null = null): Row => ({ id, list_id, title: id, deleted_at });

describe("which buckets a row lies in", () => {
  test("a selection's constant filters, scope columns and ties decide; a soft-deleted row is in none", () => {
    const doc = (over: Row): Row => ({ id: "d", org: "acme", public: true, author: null, editor: null, ...over });
    expect(rowBuckets(schema, "docs", doc({}))).toEqual(["lobby/acme"]);
    expect(rowBuckets(schema, "docs", doc({ public: false })), "a constant filter not matched").toEqual([]);
    expect(rowBuckets(schema, "docs", doc({ public: "true" })), "a constant of another type").toEqual([]);
    expect(rowBuckets(schema, "docs", doc({ org: null })), "a scope column unset").toEqual([]);
    expect(rowBuckets(schema, "docs", doc({ org: null, author: "a b", editor: "a b" })), "two columns, one parameter").toEqual(["lobby/a%20b"]);
    expect(rowBuckets(schema, "docs", doc({ org: null, author: "a", editor: "b" })), "columns that disagree").toEqual([]);
    expect(rowBuckets(schema, "notes", note("n", "l1"))).toEqual(["shared/l1"]);
    expect(rowBuckets(schema, "notes", note("n", "l1", "2024-01-01T00:00:00.000000Z"))).toEqual([]);
  });

  test("a live membership row lies in the bucket it grants too, except a `while` rule's", () => {
    expect(rowBuckets(schema, "members", member("l1", "bob", "viewer"))).toEqual(["own/olga", "shared/l1"]);
    expect(writeBuckets(schema, "members", { ...member("l9", "bob", "viewer"), owner_id: null })).toEqual(["shared/l9"]);
    expect(writeBuckets(schema, "team_members", { team_id: "t2", user_id: "bob", role: "member", deleted_at: "x" })).toEqual([]);
  });
});

describe("the text of a value as a bucket parameter", () => {
  interface Case {
    what: string;
    json: string;
    text: string | null;
    javascript?: "unknown";
  }
  const cases = (
    JSON.parse(readFileSync(new URL("./vectors/param-texts.json", import.meta.url), "utf8")) as { cases: Case[] }
  ).cases;

  test("is the server's, by the cases `engine-kernel/tests/param_texts.rs` checks too", () => {
    expect(cases.length).toBeGreaterThanOrEqual(20);
    for (const { what, json, text, javascript } of cases) {
      const value: unknown = JSON.parse(json);
      if (javascript === "unknown") expect(() => paramText(value), `${what}: ${json}`).toThrow();
      else expect(paramText(value), `${what}: ${json}`).toBe(text);
    }
  });

  test("a claim beyond 2^53 makes a write unknown, not refused", () => {
    // The server reads the claim exactly, so the row is in the actor's bucket there.
    const ctx = { ...context([]), actor: { ...alice, claims: { org: JSON.parse("9007199254740993") as number } } };
    const doc = { id: "d", org: "9007199254740993", public: true, author: null, editor: null };
    expect(authorizeWrite(ctx, { table: "docs", before: null, after: doc })).toEqual(unknown);
    expect(authorizeWrite(ctx, { table: "docs", before: null, after: { ...doc, org: "acme" } })).toEqual(unknown);
  });
});

describe("refusals the client is sure of, in the server's words", () => {
  test("a `server_only` table is never written", () => {
    expect(authorizeWrite(aliceHolds(), { table: "audit", before: null, after: { id: "a" } })).toEqual(
      refused("`audit` is written by server code only (`server_only`): a client mutation may not write it"),
    );
  });

  test("a table a raw membership query reads is never written", () => {
    expect(
      authorizeWrite(aliceHolds(), { table: "org_members", before: null, after: { org: "acme", user_id: "mallory" } }),
    ).toEqual(
      refused(
        "`org_members` is written by server code only: the raw membership query of rule `orgs` reads it, and whom a change to it grants cannot be checked",
      ),
    );
  });

  test("a live row placed in no bucket is refused", () => {
    expect(authorizeWrite(aliceHolds(), { table: "notes", before: null, after: note("n", null) })).toEqual(
      refused("this row of `notes` lies in no bucket: a client mutation writes only rows of a bucket whose rule lets the actor write them"),
    );
    expect(authorizeWrite(aliceHolds(), { table: "notes", before: note("n", "l1"), after: note("n", null) })).toEqual(
      refused("this row of `notes` lies in no bucket: a client mutation writes only rows of a bucket whose rule lets the actor write them"),
    );
  });

  test("an update needs a bucket of the row where the actor's membership may write the table", () => {
    const edit = (list: string) => ({ table: "notes", before: note("n", list), after: { ...note("n", list), title: "new" } });
    expect(authorizeWrite(aliceHolds(), edit("l1")), "an editor").toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), edit("l2")), "a viewer").toEqual(
      refused("the actor may not write this row of `notes`: rule `shared` lets only the memberships its `write(notes: …)` names write it"),
    );
    expect(authorizeWrite(aliceHolds(), { table: "notes", before: note("n", "l2"), after: null }), "a viewer's purge").toEqual(
      refused("the actor may not write this row of `notes`: rule `shared` lets only the memberships its `write(notes: …)` names write it"),
    );
  });

  test("a soft-deleted row is purged by whoever could write it live", () => {
    const deleted = note("n", "l1", "2024-01-01T00:00:00.000000Z");
    expect(authorizeWrite(aliceHolds(), { table: "notes", before: deleted, after: null })).toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "notes", before: { ...deleted, list_id: "l2" }, after: null })).toEqual(
      refused("the actor may not write this row of `notes`: rule `shared` lets only the memberships its `write(notes: …)` names write it"),
    );
  });

  test("a rule with no `write` for the table, and one that lets every holder but is not held, are named", () => {
    const ctx = context(["own/alice"]);
    const list = { id: "l", owner_id: "olga", title: "L" };
    // Olga's list, in `own/olga` (not held) and `shared/l` (never seen): the client cannot tell.
    expect(authorizeWrite(ctx, { table: "lists", before: list, after: { ...list, title: "M" } })).toEqual(unknown);
    const bobs = { team_id: "t1", user_id: "bob", role: "member", deleted_at: null };
    expect(authorizeWrite(aliceHolds(), { table: "team_members", before: bobs, after: { ...bobs, role: "lead" } })).toEqual(
      refused("the actor may not write this row of `team_members`: rule `team` has no `write(team_members)`"),
    );
    // Rows in no bucket alice holds are ones the server does not find for her: "not found" to
    // the mutator, not a refusal.
    const cardOfBob = { id: "c", owner: "bob", locked: false };
    expect(authorizeWrite(aliceHolds(), { table: "cards", before: cardOfBob, after: { ...cardOfBob, locked: false } })).toEqual(unknown);
    const message = { id: "m", sender: "bob", recipient: "carl" };
    expect(authorizeWrite(aliceHolds(), { table: "messages", before: message, after: null })).toEqual(unknown);
  });

  test("a member may delete its own membership row of a rule with `leave`, and no one else's", () => {
    const own = { team_id: "t1", user_id: "alice", role: "member", deleted_at: null };
    expect(authorizeWrite(aliceHolds(), { table: "team_members", before: own, after: null }), "a purge").toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "team_members", before: own, after: { ...own, deleted_at: "now" } }), "a soft delete").toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "team_members", before: own, after: { ...own, role: "lead" } }), "raising its role").toEqual(
      refused("the actor may not write this row of `team_members`: rule `team` has no `write(team_members)`"),
    );
    const bobs = { ...own, user_id: "bob" };
    expect(authorizeWrite(aliceHolds(), { table: "team_members", before: bobs, after: null })).toEqual(
      refused("the actor may not write this row of `team_members`: rule `team` has no `write(team_members)`"),
    );
  });

  test("a membership row with no value where its claim goes is no one's, not an actor's lacking the claim", () => {
    const team = schema.syncRules.team!;
    const squads: AnySchema = {
      ...schema,
      syncRules: { ...schema.syncRules, team: { ...team, membership: { table: "team_members", filters: [{ column: "user_id", claim: "actor.claims.squad" }] } } },
    };
    const nobodys = { team_id: "t1", user_id: null, role: "member", deleted_at: null };
    expect(authorizeWrite({ ...aliceHolds(), schema: squads }, { table: "team_members", before: nobodys, after: null })).toEqual(
      refused("the actor may not write this row of `team_members`: rule `team` has no `write(team_members)`"),
    );
  });

  test("a member accepts its own invitation, declines it, and changes nothing else of it", () => {
    const invited: AnySchema = {
      ...schema,
      tables: { ...schema.tables, seats: table(["room", "user_id", "role", "accepted"], ["room", "user_id"]) },
      syncRules: {
        mine: rule({
          parameters: [param("user", "actor.user_id")],
          data: [scoped("seats", "user_id", "user")],
          accept: [{ rule: "room", open: true }],
        }),
        room: rule({
          parameters: [param("room", "membership.room")],
          membership: { table: "seats", filters: [{ column: "user_id", claim: "actor.user_id" }, { column: "accepted", value: true }] },
          data: [scoped("seats", "room", "room")],
          write: { seats: members("owner") },
          leave: true,
          invite: "accepted",
        }),
      },
    };
    const ctx = () => ({ ...context(["mine/alice"]), schema: invited });
    const pending = { room: "r", user_id: "alice", role: "viewer", accepted: false };
    const write = (after: Row | null) => authorizeWrite(ctx(), { table: "seats", before: pending, after });
    expect(write({ ...pending, accepted: true }), "accepting").toEqual(allowed);
    expect(write(null), "declining").toEqual(allowed);
    expect(write({ ...pending, accepted: true, role: "owner" }).kind, "accepting as the owner").toBe("refused");
    expect(write({ ...pending, role: "owner" }).kind, "raising its role").toBe("refused");

    // Nobody accepts for another, not even who may write every seat of the room.
    const owner = { room: "r", user_id: "alice", role: "owner", accepted: true };
    const owners = () => ({ ...context(["mine/alice", "room/r"], { seats: [owner] }), schema: invited });
    const bobs = { room: "r", user_id: "bob", role: "viewer", accepted: false };
    const accepting = refused(
      "the mutation's write to `seats` accepts another member's invitation to a bucket of rule `room`: an invitation is accepted by its member only (`invite(...)`)",
    );
    const seat = (before: Row | null, after: Row) => authorizeWrite(owners(), { table: "seats", before, after });
    expect(seat(null, { ...bobs, accepted: true }), "seating another accepted").toEqual(accepting);
    expect(seat(bobs, { ...bobs, accepted: true }), "accepting for another").toEqual(accepting);
    expect(seat(null, bobs).kind, "inviting").not.toBe("refused");
    expect(seat({ ...bobs, accepted: true }, { ...bobs, accepted: true, role: "editor" }).kind, "changing an accepted seat").not.toBe("refused");
  });

  test("a row entering a bucket the actor may not write it in is refused", () => {
    // From the list alice edits into the one she views.
    expect(authorizeWrite(aliceHolds(), { table: "notes", before: note("n", "l1"), after: note("n", "l2") })).toEqual(
      refused("the actor may not write this row of `notes`: rule `shared` lets only the memberships its `write(notes: …)` names write it"),
    );
    expect(authorizeWrite(aliceHolds(), { table: "notes", before: null, after: note("n", "l2") })).toEqual(
      refused("the actor may not write this row of `notes`: rule `shared` lets only the memberships its `write(notes: …)` names write it"),
    );
  });

  test("a claim bucket of another actor is never new, and takes rows only through `accept(...)`", () => {
    expect(authorizeWrite(aliceHolds(), { table: "tasks", before: null, after: { id: "k", team_id: null, assignee: "bob" } })).toEqual(
      refused("the mutation puts a row of `tasks` into a bucket of rule `inbox` that the actor may not write `tasks` in, and no `accept(...)` of rule `inbox` admits it"),
    );
    expect(authorizeWrite(aliceHolds(), { table: "messages", before: null, after: { id: "m", sender: "bob", recipient: "alice" } })).toEqual(
      refused("the mutation puts a row of `messages` into a bucket of rule `sent` that the actor may not write `messages` in, and no `accept(...)` of rule `sent` admits it"),
    );
  });

  test("a claim bucket the actor holds that says nothing of the table takes a row written through another bucket", () => {
    // Olga, owner of `l1`, shares it: the membership row lies in her `own` bucket too.
    const olgas = { ...context(["own/olga", "shared/l1"], { members: [member("l1", "olga", "owner")] }), actor: { userId: "olga", ownerId: "olga", claims: {} } };
    expect(authorizeWrite(olgas, { table: "members", before: null, after: member("l1", "bob", "viewer") })).toEqual(allowed);
    // A membership row in no list: only `own/olga`, which has no `write(members)`.
    const stray = { ...member("l1", "bob", "viewer"), list_id: null };
    expect(authorizeWrite(olgas, { table: "members", before: null, after: stray })).toEqual(
      refused("the actor may not write this row of `members`: rule `own` has no `write(members)`"),
    );
  });

  test("a membership row may grant only permissions the actor has", () => {
    // Alice edits `l1`: she may share it, not make an owner.
    expect(authorizeWrite(aliceHolds(), { table: "members", before: null, after: { ...member("l1", "bob", "editor"), owner_id: "alice" } })).toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "members", before: null, after: { ...member("l1", "bob", "owner"), owner_id: "alice" } })).toEqual(
      refused("the mutation's write to `members` grants a bucket of rule `shared` (or a permission in it) that the actor may not grant"),
    );
  });

  test("row terms hold on every image: before for a purge, after for an insert, both for an update", () => {
    const card = (locked: boolean) => ({ id: "c", owner: "alice", locked });
    expect(authorizeWrite(aliceHolds(), { table: "cards", before: null, after: card(false) })).toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "cards", before: card(false), after: card(false) })).toEqual(allowed);
    const lockedOut = refused(
      "the actor may not write this row of `cards`: rule `board` lets only the memberships its `write(cards: …)` names write it, and only rows it names",
    );
    expect(authorizeWrite(aliceHolds(), { table: "cards", before: null, after: card(true) }), "an insert").toEqual(lockedOut);
    expect(authorizeWrite(aliceHolds(), { table: "cards", before: card(false), after: card(true) }), "locking").toEqual(lockedOut);
    expect(authorizeWrite(aliceHolds(), { table: "cards", before: card(true), after: card(false) }), "unlocking").toEqual(lockedOut);
    expect(authorizeWrite(aliceHolds(), { table: "cards", before: card(true), after: null }), "a purge").toEqual(lockedOut);
  });

  test("a row term on a claim compares the row with the actor, before and after the write", () => {
    const comment = (author: string | null) => ({ id: "c", team_id: "t1", author });
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: null, after: comment("alice") })).toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: comment("alice"), after: comment("alice") })).toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: comment("alice"), after: null })).toEqual(allowed);
    const notHers = refused(
      "the actor may not write this row of `comments`: rule `team` lets only the memberships its `write(comments: …)` names write it, and only rows it names",
    );
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: null, after: comment("bob") }), "in bob's name").toEqual(notHers);
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: comment("bob"), after: comment("bob") }), "an edit").toEqual(notHers);
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: comment("bob"), after: null }), "a purge").toEqual(notHers);
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: comment("alice"), after: comment("bob") }), "handed over").toEqual(notHers);
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: comment("bob"), after: comment("alice") }), "taken").toEqual(notHers);
    // A null author is nobody's, not the actor's.
    expect(authorizeWrite(aliceHolds(), { table: "comments", before: null, after: comment(null) }), "no author").toEqual(notHers);
  });
});

describe("the buckets a row leaves", () => {
  // Each data bucket of the image before that the image after is not in (all of them for a
  // delete or a soft delete), checked after the image before and before the buckets entered.
  const olgas = () => ({ ...context(["own/olga", "shared/l1"], { members: [member("l1", "olga", "owner")] }), actor: { userId: "olga", ownerId: "olga", claims: {} } });
  const list = (id: string, owner_id: string, deleted_at: string | null = null): Row => ({ id, owner_id, title: id, deleted_at });
  const task = (team_id: string, assignee: string): Row => ({ id: "k", team_id, assignee });
  const ownTeamRow = { team_id: "t1", user_id: "alice", role: "member", deleted_at: null };
  const mayNotShared = (tableName: string) =>
    refused(`the actor may not write this row of \`${tableName}\`: rule \`shared\` lets only the memberships its \`write(${tableName}: …)\` names write it`);
  const cases: [string, () => WriteContext, { table: string; before: Row; after: Row | null }, Verdict][] = [
    // Refused: the image before passes through one bucket, the row leaves another.
    ["an update out of a claim bucket of another actor", aliceHolds, { table: "members", before: member("l1", "bob", "viewer"), after: { ...member("l1", "bob", "viewer"), owner_id: "alice" } }, refused("the actor may not write this row of `members`: rule `own` has no `write(members)`")],
    ["a delete from a claim bucket of another actor", aliceHolds, { table: "members", before: member("l1", "bob", "viewer"), after: null }, refused("the actor may not write this row of `members`: rule `own` has no `write(members)`")],
    ["a delete from a membership bucket whose `write` does not name the actor", aliceHolds, { table: "lists", before: list("l2", "alice"), after: null }, mayNotShared("lists")],
    ["a soft delete from it: a soft-deleted row lies in no bucket", aliceHolds, { table: "lists", before: list("l2", "alice"), after: list("l2", "alice", "now") }, mayNotShared("lists")],
    ["a purge of a soft-deleted row, from the buckets of its live image", aliceHolds, { table: "lists", before: list("l2", "alice", "then"), after: null }, mayNotShared("lists")],
    ["a delete from a bucket of a membership rule that says nothing of the table", olgas, { table: "lists", before: list("l1", "olga"), after: null }, refused("the actor may not write this row of `lists`: rule `watch` has no `write(lists)`")],
    // Allowed.
    ["a bucket the actor may write the table in", aliceHolds, { table: "notes", before: note("n", "l1"), after: note("n", "l1", "now") }, allowed],
    ["a bucket whose `accept(...)` takes rows from a bucket of the image before the actor may write in", aliceHolds, { table: "tasks", before: task("t1", "bob"), after: null }, allowed],
    ["the same, moved into another accepting bucket", aliceHolds, { table: "tasks", before: task("t1", "bob"), after: task("t1", "alice") }, allowed],
    ["a claim bucket the actor holds whose rule says nothing of the table", aliceHolds, { table: "members", before: { ...member("l1", "bob", "viewer"), owner_id: "alice" }, after: null }, allowed],
    ["the actor's own membership row of a rule with `leave`, deleted", aliceHolds, { table: "team_members", before: ownTeamRow, after: null }, allowed],
    ["the same, soft-deleted", aliceHolds, { table: "team_members", before: ownTeamRow, after: { ...ownTeamRow, deleted_at: "now" } }, allowed],
    ["a bucket the mutation may be creating", () => ({ ...aliceHolds(), created: new Set(["shared/l9"]) }), { table: "notes", before: note("n", "l9"), after: note("n", "l1") }, allowed],
    // Where the client cannot tell whether the actor may write the table in `team/t9`.
    ["a bucket whose rule accepts from a bucket the client cannot judge", aliceHolds, { table: "tasks", before: task("t9", "bob"), after: null }, unknown],
  ];
  test.each(cases)("%s", (_, ctx, write, verdict) => {
    expect(authorizeWrite(ctx(), write)).toEqual(verdict);
  });
});

describe("what the client lets through", () => {
  test("`accept(...)`: open to any writer of the source, checked only when the receiver is the actor", () => {
    expect(authorizeWrite(aliceHolds(), { table: "messages", before: null, after: { id: "m", sender: "alice", recipient: "bob" } })).toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "tasks", before: null, after: { id: "k", team_id: "t1", assignee: "alice" } })).toEqual(allowed);
    expect(authorizeWrite(aliceHolds(), { table: "tasks", before: null, after: { id: "k", team_id: "t1", assignee: "bob" } }), "bob's team is unknown").toEqual(unknown);
  });

  test("a bucket never seen may be one the mutation creates: unknown, and its next rows pass", () => {
    const ctx = aliceHolds();
    expect(authorizeWrite(ctx, { table: "lists", before: null, after: { id: "l9", owner_id: "alice", title: "New" } })).toEqual(unknown);
    expect(ctx.created).toEqual(new Set(["shared/l9", "watch/l9"]));
    expect(authorizeWrite(ctx, { table: "members", before: null, after: { ...member("l9", "alice", "owner"), owner_id: "alice" } })).toEqual(allowed);
    expect(authorizeWrite(ctx, { table: "notes", before: null, after: note("n", "l9") })).toEqual(allowed);
  });

  test("a held bucket whose membership rows the client lacks, or holds through raw SQL, is unknown", () => {
    const lacking = context(["shared/l1"]);
    expect(authorizeWrite(lacking, { table: "notes", before: note("n", "l1"), after: { ...note("n", "l1"), title: "x" } })).toEqual(unknown);
    const project = { id: "p", org: "acme" };
    expect(authorizeWrite(context(["orgs/acme"]), { table: "projects", before: project, after: { ...project, id: "p" } })).toEqual(unknown);
    expect(authorizeWrite(context([]), { table: "projects", before: null, after: project })).toEqual(unknown);
  });

  test("a membership row the client has grants its bucket, held or not yet pulled", () => {
    // A list alice created offline: her owner membership is in the view, the bucket not pulled yet.
    const ctx = context(["own/alice"], { members: [{ ...member("l9", "alice", "owner"), owner_id: "alice" }] });
    expect(authorizeWrite(ctx, { table: "notes", before: note("n", "l9"), after: { ...note("n", "l9"), title: "x" } })).toEqual(allowed);
  });

  test("a `while` rule's buckets are not granted by membership rows, so a refusal does not name it", () => {
    const bobs = member("l2", "bob", "viewer");
    expect(writeBuckets(schema, "members", bobs)).toEqual(["own/olga", "shared/l2"]);
    expect(authorizeWrite(aliceHolds(), { table: "members", before: bobs, after: null })).toEqual(
      refused("the actor may not write this row of `members`: rule `own` has no `write(members)`; rule `shared` lets only the memberships its `write(members: …)` names write it"),
    );
  });
});

describe("a local mutation's writes", () => {
  const app: AnySchema = { ...schema, mutators: ["retitle", "retitle_quietly"] };
  function replica(): Replica {
    const r = new Replica(app, alice, undefined);
    const change = (tableName: string, row: Row, bucket: string) => ({ table: tableName, row, buckets: [bucket] });
    r.applyPage(
      {
        changes: [
          change("members", member("l1", "alice", "editor"), "shared/l1"),
          change("members", member("l2", "alice", "viewer"), "shared/l2"),
          change("notes", note("a", "l1"), "shared/l1"),
          change("notes", note("b", "l2"), "shared/l2"),
        ],
        tombstones: [],
        removedBuckets: [],
        cursor: "c",
        hasMore: false,
        reset: false,
        lastMutationId: 0,
        syncedMutationId: 0,
      },
      0,
      0,
    );
    type Tx = { update(t: string, k: string, c: object): boolean };
    r.setOptimistic({
      retitle: ((tx: Tx, args: { id: string }) => tx.update("notes", args.id, { title: "new" })) as never,
      // A mutator that goes on past the refusal: the server fails the whole mutation anyway.
      retitle_quietly: ((tx: Tx, args: { ids: string[] }) => {
        for (const id of args.ids) {
          try {
            tx.update("notes", id, { title: "new" });
          } catch {
            // ignored
          }
        }
      }) as never,
    });
    return r;
  }

  test("a certain refusal rejects the mutation with `ForbiddenError`: nothing written, nothing queued", () => {
    const r = replica();
    expect(() => r.mutate("retitle", { id: "b" }, 0)).toThrow(ForbiddenError);
    expect(() => r.mutate("retitle_quietly", { ids: ["a", "b"] }, 0)).toThrow(
      "forbidden: the actor may not write this row of `notes`: rule `shared` lets only the memberships its `write(notes: …)` names write it",
    );
    expect(r.pendingCount).toBe(0);
    expect(r.viewRow("notes", '["a"]')?.title).toBe("a");
    expect(r.mutate("retitle", { id: "a" }, 0).mutationId).toBe(1);
    expect(r.viewRow("notes", '["a"]')?.title).toBe("new");
  });

  test("`canWrite` answers for an update of the row", () => {
    const r = replica();
    expect(r.canWrite("notes", note("a", "l1"))).toBe(true);
    expect(r.canWrite("notes", note("b", "l2"))).toBe(false);
    expect(r.canWrite("notes", note("c", "l7"))).toBe("unknown");
  });
});
