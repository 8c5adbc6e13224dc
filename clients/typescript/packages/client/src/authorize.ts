/**
 * Write authorization evaluated offline (`docs/design.md` §4): whether the server would refuse
 * one write of a local mutation as `forbidden`, read from the sync rules the schema carries, the
 * buckets the client holds and the rows it has. It follows the server's
 * `engine-runtime/src/mutation/authorize.rs` step by step, with a third answer besides allowed
 * and refused: `unknown`, where the server reads what the client lacks (membership rows it does
 * not hold, a bucket it has never seen, raw membership SQL, the receiver of a checked
 * `accept(...)`). Only a certain refusal is made offline, in the server's words; every other
 * write goes to the server, which stays the authority. Nor is anything refused that the server
 * allows.
 *
 * Pure functions: `authorizeWrite` reads only its arguments, and notes in `created` the buckets
 * the mutation may be creating, as the server notes the buckets it creates.
 */

import { bucketKey, bucketRule, encodeBucketParam, numberText, type BucketParam } from "./bucket.js";
import type { AnySchema, MembershipFilterSchema, SyncRuleSchema, TableSchema, WriteAlternative } from "./schema.js";
import { isSoftDeleted, sameValue, type Actor } from "./view.js";
import type { Row } from "./wire.js";

/** A yes or no the client may not be able to give. */
export type Permission = boolean | "unknown";

/** What the client can tell of a write before the server sees it. */
export type Verdict =
  | { readonly kind: "allowed" }
  | { readonly kind: "unknown" }
  | { readonly kind: "refused"; readonly message: string };

/** One write of a mutation: an insert (no `before`), an update (both) or a purge (no `after`). */
export interface Write {
  readonly table: string;
  readonly before: Row | null;
  readonly after: Row | null;
}

/** What the evaluation reads: everything as the mutation began, except `created`. */
export interface WriteContext {
  readonly schema: AnySchema;
  readonly actor: Actor;
  /** Whether the client holds `bucket`, as its pulls said. */
  held(bucket: string): boolean;
  /** The live rows of `table` the client has. */
  rows(table: string): Iterable<Row>;
  /** Buckets of membership rules the mutation may be creating: writes into them are not refused. */
  readonly created: Set<string>;
}

const ALLOWED: Verdict = { kind: "allowed" };
const UNKNOWN: Verdict = { kind: "unknown" };
const refused = (message: string): Verdict => ({ kind: "refused", message });

/** May the actor make `write`? The server's order of checks, each answered as far as the client can. */
export function authorizeWrite(ctx: WriteContext, write: Write): Verdict {
  try {
    return authorizeKnown(ctx, write);
  } catch (error) {
    if (error === INEXACT) return UNKNOWN;
    throw error;
  }
}

/** `authorizeWrite`, throwing `INEXACT` where it would read a number whose text it cannot tell. */
function authorizeKnown(ctx: WriteContext, write: Write): Verdict {
  const table = ctx.schema.tables[write.table];
  if (!table) return UNKNOWN;
  if (ctx.schema.serverOnly.includes(write.table)) {
    return refused(
      `\`${write.table}\` is written by server code only (\`server_only\`): a client mutation may not write it`,
    );
  }
  const rawReader = Object.entries(ctx.schema.syncRules).find(
    ([, rule]) => rule.membership !== null && "sql" in rule.membership && (rule.membership.reads ?? []).includes(write.table),
  );
  if (rawReader) {
    return refused(
      `\`${write.table}\` is written by server code only: the raw membership query of rule \`${rawReader[0]}\` reads it, and whom a change to it grants cannot be checked`,
    );
  }
  const { before, after } = write;
  const images = [before, after].filter((image): image is Row => image !== null);
  const steps: (() => Verdict)[] = [];
  if (before === null && after !== null) {
    const buckets = rowBuckets(ctx.schema, write.table, after);
    steps.push(
      () => entering(ctx, write.table, buckets, buckets, images),
      () => granting(ctx, write.table, null, after),
      () => placing(ctx, write.table, after),
    );
  } else if (before !== null && after !== null) {
    // A row in no bucket the actor holds is one the server does not find: not a refusal.
    if (!readable(ctx, table, write.table, before)) return UNKNOWN;
    // The actor accepting its own invitation: the server asks nothing else of it.
    if (isAccepting(ctx, write.table, before, after)) return ALLOWED;
    // A soft delete removes the row: its member may be leaving.
    const removes = !isSoftDeleted(table, before) && isSoftDeleted(table, after);
    const beforeBuckets = rowBuckets(ctx.schema, write.table, before);
    const afterBuckets = rowBuckets(ctx.schema, write.table, after);
    const entered = afterBuckets.filter((bucket) => !beforeBuckets.includes(bucket));
    const left = beforeBuckets.filter((bucket) => !afterBuckets.includes(bucket));
    const beforeWriteBuckets = writeBuckets(ctx.schema, write.table, before);
    const removed = removes ? before : null;
    steps.push(
      () => changing(ctx, write.table, beforeWriteBuckets, removed, images),
      () => leaving(ctx, write.table, left, beforeWriteBuckets, removed, images),
      () => entering(ctx, write.table, entered, afterBuckets, images),
      () => granting(ctx, write.table, before, after),
      () => (isSoftDeleted(table, after) ? ALLOWED : placing(ctx, write.table, after)),
    );
  } else if (before !== null) {
    // A soft-deleted row is in no bucket; the buckets it was in decide who may purge it.
    const live = isSoftDeleted(table, before) ? { ...before, [table.softDelete!]: null } : before;
    if (!readable(ctx, table, write.table, live)) return UNKNOWN;
    const beforeWriteBuckets = writeBuckets(ctx.schema, write.table, live);
    steps.push(
      () => changing(ctx, write.table, beforeWriteBuckets, live, images),
      () => leaving(ctx, write.table, rowBuckets(ctx.schema, write.table, live), beforeWriteBuckets, live, images),
    );
  }
  // The first refusal is the server's: a step it might have passed instead is assumed passed
  // (its buckets noted in `created`), and a step it might have refused refuses the mutation too.
  let unknown = false;
  for (const step of steps) {
    const verdict = step();
    if (verdict.kind === "refused") return verdict;
    unknown ||= verdict.kind === "unknown";
  }
  return unknown ? UNKNOWN : ALLOWED;
}

// --- Which buckets a row lies in -------------------------------------------------------------

/**
 * Thrown by `paramText` for an integer beyond 2^53: the server may name another bucket with it
 * than the client would, so the verdict is `unknown`.
 */
const INEXACT = Symbol("inexact number");

/** The text of a value as a bucket parameter (the server's `param_text`). */
export function paramText(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (typeof value === "boolean") return String(value);
  if (typeof value === "number") {
    const text = numberText(value);
    if (text === null) throw INEXACT;
    return text;
  }
  return null;
}

/** The key of a bucket of `rule` from its parameters' texts; a UUID's canonical text is lowercase. */
function keyOf(name: string, rule: SyncRuleSchema, params: readonly BucketParam[]): string {
  return bucketKey(
    name,
    params.map((param, i) => (rule.parameters[i]?.type === "uuid" ? String(param).toLowerCase() : param)),
  );
}

/** The rule named `name`; `undefined` for a rule the schema lacks. */
function ruleOf(schema: AnySchema, bucket: string): SyncRuleSchema | undefined {
  return schema.syncRules[bucketRule(bucket)];
}

/**
 * The buckets the selections of the rules put `row` of `table` in (the server's
 * `RuleSelection::bucket_of`): those whose constant filters it matches and whose scope columns
 * are all set, columns compared with one parameter agreeing. A soft-deleted row is in none.
 */
export function rowBuckets(schema: AnySchema, tableName: string, row: Row): string[] {
  const table = schema.tables[tableName];
  if (!table || isSoftDeleted(table, row)) return [];
  const buckets = new Set<string>();
  for (const [name, rule] of Object.entries(schema.syncRules)) {
    for (const selection of rule.data) {
      if (selection.table !== tableName) continue;
      const filtered = selection.filters.every(
        (filter) => typeof row[filter.column] === typeof filter.value && row[filter.column] === filter.value,
      );
      if (!filtered) continue;
      const params: string[] = [];
      for (const param of rule.parameters) {
        const texts = selection.scope.filter((eq) => eq.param === param.name).map((eq) => paramText(row[eq.column]));
        const first = texts[0];
        if (first === undefined || first === null || texts.some((text) => text !== first)) break;
        params.push(first);
      }
      if (params.length === rule.parameters.length) buckets.add(keyOf(name, rule, params));
    }
  }
  return [...buckets].sort();
}

/** The text of the actor's claim as a rule writes it (`actor.user_id`, `actor.claims.org`). */
function claimText(claim: string, actor: Actor): string | null {
  if (claim === "actor.user_id") return actor.userId;
  if (claim === "actor.owner_id") return actor.ownerId;
  if (claim.startsWith("actor.claims.")) return paramText(actor.claims[claim.slice("actor.claims.".length)]);
  return null;
}

/** The membership table and filters of `rule`, unless it has none or a raw query. */
function membershipTable(
  rule: SyncRuleSchema,
): { table: string; filters: readonly MembershipFilterSchema[] } | undefined {
  return rule.membership && "table" in rule.membership ? rule.membership : undefined;
}

/** The column of the membership table that gives each of `rule`'s parameters, in order. */
function paramColumns(rule: SyncRuleSchema): (string | undefined)[] {
  const filters = membershipTable(rule)?.filters ?? [];
  return rule.parameters.map((param) =>
    param.source.startsWith("membership.")
      ? param.source.slice("membership.".length)
      : filters.find((filter) => "claim" in filter && filter.claim === param.source)?.column,
  );
}

/**
 * The bucket of rule `name` a live row of `tableName` makes its member hold (the server's
 * `MembershipQuery::granted_by`), whether or not the rule's buckets are held through another's.
 */
function grantOf(schema: AnySchema, name: string, tableName: string, row: Row): string | null {
  const rule = schema.syncRules[name]!;
  const membership = membershipTable(rule);
  const table = schema.tables[tableName];
  if (!membership || membership.table !== tableName || !table || isSoftDeleted(table, row)) return null;
  if (!membership.filters.every((filter) => !("value" in filter) || sameValue(row[filter.column], filter.value))) {
    return null;
  }
  const params: string[] = [];
  for (const column of paramColumns(rule)) {
    const text = column === undefined ? null : paramText(row[column]);
    if (text === null) return null;
    params.push(text);
  }
  return keyOf(name, rule, params);
}

/**
 * The buckets a row counts as lying in for a write: its selections' and, for a live membership
 * row, the bucket it grants. A rule held through another's membership (`while`) grants nothing
 * of its own: its grants are the other rule's.
 */
export function writeBuckets(schema: AnySchema, tableName: string, row: Row): string[] {
  const buckets = new Set(rowBuckets(schema, tableName, row));
  for (const [name, rule] of Object.entries(schema.syncRules)) {
    if (rule.while !== null) continue;
    const granted = grantOf(schema, name, tableName, row);
    if (granted !== null) buckets.add(granted);
  }
  return [...buckets].sort();
}

/**
 * Whether a column's `value` equals the actor's `claim` (the server's `claim_equals`): the same
 * text. A null or missing value, or a claim the actor lacks, equals nothing, not each other.
 */
function claimEquals(value: unknown, claim: string, actor: Actor): boolean {
  const text = paramText(value);
  return text !== null && text === claimText(claim, actor);
}

/** Whether membership row `row` of `rule` is the actor's own (the server's `is_members_own`). */
function isMembersOwn(rule: SyncRuleSchema, row: Row, actor: Actor): boolean {
  const filters = membershipTable(rule)?.filters ?? [];
  return filters.every((filter) => !("claim" in filter) || claimEquals(row[filter.column], filter.claim, actor));
}

/** Whether two membership rows of `rule` are the same member's: equal in every column compared with a claim. */
function isSameMember(rule: SyncRuleSchema, one: Row, other: Row): boolean {
  const filters = membershipTable(rule)?.filters ?? [];
  return filters.every((filter) => !("claim" in filter) || sameValue(one[filter.column], other[filter.column]));
}

// --- What the actor holds and may write ------------------------------------------------------

/** The actor's own live membership rows granting `bucket`, as far as the client has them. */
function ownRows(ctx: WriteContext, bucket: string): Row[] {
  const name = bucketRule(bucket);
  const rule = ctx.schema.syncRules[name]!;
  const membership = membershipTable(rule);
  if (!membership) return [];
  return [...ctx.rows(membership.table)].filter(
    (row) => grantOf(ctx.schema, name, membership.table, row) === bucket && isMembersOwn(rule, row, ctx.actor),
  );
}

/**
 * Whether the client has every membership row of the actor that grants `bucket`: some selection
 * puts every such row into one bucket, and the client holds it. Such a row has the bucket's
 * parameters and the actor's claims in the columns the membership query reads, and its constant
 * filters' values; the selection must be scoped and filtered by those columns only.
 */
function ownRowsKnown(ctx: WriteContext, bucket: string): boolean {
  const rule = ruleOf(ctx.schema, bucket)!;
  const membership = membershipTable(rule);
  if (!membership || !ctx.schema.tables[membership.table]?.synced) return false;
  // The bucket parameter text of each column whose value such a row is known to have.
  const known = new Map<string, string>();
  const segments = bucket.split("/").slice(1);
  paramColumns(rule).forEach((column, i) => {
    if (column !== undefined && segments[i] !== undefined) known.set(column, segments[i]);
  });
  for (const filter of membership.filters) {
    const value = "claim" in filter ? claimText(filter.claim, ctx.actor) : filter.value;
    if (value !== null && !known.has(filter.column)) known.set(filter.column, encodeBucketParam(value));
  }
  const constants = membership.filters.filter((filter) => "value" in filter);
  for (const [name, other] of Object.entries(ctx.schema.syncRules)) {
    for (const selection of other.data) {
      if (selection.table !== membership.table) continue;
      const filtered = selection.filters.every((f) =>
        constants.some((c) => c.column === f.column && sameValue("value" in c ? c.value : undefined, f.value)),
      );
      const params = other.parameters.map((param) => {
        const given = selection.scope.filter((eq) => eq.param === param.name).map((eq) => known.get(eq.column));
        return given.every((segment) => segment === given[0]) ? given[0] : undefined;
      });
      if (filtered && params.every((segment) => segment !== undefined) && ctx.held([name, ...params].join("/"))) {
        return true;
      }
    }
  }
  return false;
}

/** The bucket of a rule without membership that the actor's claims give it. */
function claimBucket(name: string, rule: SyncRuleSchema, actor: Actor): string | null {
  const params: string[] = [];
  for (const param of rule.parameters) {
    const text = claimText(param.source, actor);
    if (text === null) return null;
    params.push(text);
  }
  return keyOf(name, rule, params);
}

/** Whether the actor holds `bucket`. */
function holds(ctx: WriteContext, bucket: string): Permission {
  const rule = ruleOf(ctx.schema, bucket);
  if (!rule) return false;
  if (rule.membership === null) return claimBucket(bucketRule(bucket), rule, ctx.actor) === bucket;
  if (ctx.held(bucket) || ownRows(ctx, bucket).length > 0) return true;
  return ownRowsKnown(ctx, bucket) ? false : "unknown";
}

/**
 * Whether alternative `alternative` of a `write(...)` holds of row `row`'s row terms for `actor`
 * (the server's `RowTerm::holds_on`). A claim equals a column whose value has its text; a null or
 * missing value, or a claim the actor lacks, equals nothing.
 */
function rowTermsHold(alternative: WriteAlternative, row: Row, actor: Actor): boolean {
  return alternative.row.every((term) => {
    if (!("claim" in term)) return sameValue(row[term.column], term.value) === (term.op === "==");
    return claimEquals(row[term.column], term.claim, actor) === (term.op === "==");
  });
}

/**
 * Whether the actor may write `table` in `bucket` (the server's `may_write`): it holds the
 * bucket, and an alternative of the rule's `write(...)` for the table applies: its row terms
 * hold on every image of the write, and its member terms on one of the actor's own membership
 * rows granting the bucket (an alternative without member terms: every holder).
 */
function mayWrite(ctx: WriteContext, bucket: string, table: string, images: readonly Row[]): Permission {
  const rule = ruleOf(ctx.schema, bucket);
  const alternatives = rule?.write[table];
  if (!alternatives) return false;
  const held = holds(ctx, bucket);
  if (held === false) return false;
  let answer: Permission = false;
  for (const alternative of alternatives) {
    if (!images.every((image) => rowTermsHold(alternative, image, ctx.actor))) continue;
    answer = or(answer, alternative.member.length === 0 ? held : memberMatches(ctx, bucket, alternative));
    if (answer === true) return true;
  }
  return answer;
}

/** Whether one of the actor's own membership rows granting `bucket` matches `alternative`'s member terms. */
function memberMatches(ctx: WriteContext, bucket: string, alternative: WriteAlternative): Permission {
  const own = ownRows(ctx, bucket);
  if (own.some((row) => alternative.member.every((term) => sameValue(row[term.column], term.value)))) return true;
  // No own row at all, though the bucket is held: the client lacks it.
  return own.length > 0 && ownRowsKnown(ctx, bucket) ? false : "unknown";
}

function or(a: Permission, b: Permission): Permission {
  if (a === true || b === true) return true;
  return a === "unknown" || b === "unknown" ? "unknown" : false;
}

function and(a: Permission, b: Permission): Permission {
  if (a === false || b === false) return false;
  return a === "unknown" || b === "unknown" ? "unknown" : true;
}

// --- The checks, in the server's words -------------------------------------------------------

/** Why a write is refused (the server's `Refusal`). */
type Refusal = "puts" | "grants" | "accepts";

/** The server's `forbidden`: the table and the rule, never the bucket key. */
function forbidden(table: string, bucket: string, refusal: Refusal): Verdict {
  const rule = bucketRule(bucket);
  const said: Record<Refusal, string> = {
    puts: `the mutation puts a row of \`${table}\` into a bucket of rule \`${rule}\` that the actor may not write \`${table}\` in, and no \`accept(...)\` of rule \`${rule}\` admits it`,
    grants: `the mutation's write to \`${table}\` grants a bucket of rule \`${rule}\` (or a permission in it) that the actor may not grant`,
    accepts: `the mutation's write to \`${table}\` accepts another member's invitation to a bucket of rule \`${rule}\`: an invitation is accepted by its member only (\`invite(...)\`)`,
  };
  return refused(said[refusal]);
}

/** The server's `forbidden_change`: each rule of `buckets` and what it says of `table`. */
function forbiddenChange(schema: AnySchema, table: string, buckets: readonly string[]): Verdict {
  if (buckets.length === 0) {
    return refused(
      `this row of \`${table}\` lies in no bucket: a client mutation writes only rows of a bucket whose rule lets the actor write them`,
    );
  }
  const names = [...buckets].sort().map(bucketRule).filter((name, i, all) => i === 0 || all[i - 1] !== name);
  const said = names.map((name) => {
    const write = schema.syncRules[name]?.write[table];
    if (!write) return `rule \`${name}\` has no \`write(${table})\``;
    if (write.some((alternative) => alternative.member.length === 0 && alternative.row.length === 0)) {
      return `rule \`${name}\` lets its holders write it, and the actor holds none of its buckets this row lies in`;
    }
    const readsRows = write.some((alternative) => alternative.row.length > 0);
    return readsRows
      ? `rule \`${name}\` lets only the memberships its \`write(${table}: …)\` names write it, and only rows it names`
      : `rule \`${name}\` lets only the memberships its \`write(${table}: …)\` names write it`;
  });
  return refused(`the actor may not write this row of \`${table}\`: ${said.join("; ")}`);
}

/**
 * Whether the server finds `row` for the actor: its table is not synced, or the row lies in a
 * bucket the actor holds or the mutation may be creating (the server's `can_read`; a row it does
 * not find is "not found" to the mutator, not a refusal).
 */
function readable(ctx: WriteContext, schema: TableSchema, table: string, row: Row): boolean {
  if (!schema.synced) return true;
  return rowBuckets(ctx.schema, table, row).some((bucket) => ctx.created.has(bucket) || holds(ctx, bucket) !== false);
}

/** A live row must lie in some bucket (the server's `authorize_placing`). */
function placing(ctx: WriteContext, table: string, row: Row): Verdict {
  const buckets = writeBuckets(ctx.schema, table, row);
  return buckets.length === 0 ? forbiddenChange(ctx.schema, table, buckets) : ALLOWED;
}

/** The bucket `row` grants or, for a pending invitation, would grant once accepted (the server's `invited_to`). */
function invitedTo(schema: AnySchema, name: string, table: string, row: Row): string | null {
  const column = schema.syncRules[name]!.invite;
  return grantOf(schema, name, table, column === undefined ? row : { ...row, [column]: true });
}

/**
 * Whether changing `before` into `after` is the actor accepting its own invitation: the rule's
 * `invite` column goes from false to true and no other column changes (the server's
 * `is_accepting`).
 */
function isAccepting(ctx: WriteContext, table: string, before: Row, after: Row): boolean {
  const columns = ctx.schema.tables[table]?.columns.map((c) => c.name) ?? [];
  return Object.entries(ctx.schema.syncRules).some(([name, rule]) => {
    const column = rule.invite;
    if (column === undefined || rule.while !== null) return false;
    const kept = columns.every((c) => c === column || sameValue(before[c], after[c]));
    return (
      before[column] === false &&
      after[column] === true &&
      kept &&
      invitedTo(ctx.schema, name, table, before) !== null &&
      isMembersOwn(rule, before, ctx.actor)
    );
  });
}

/** Whether removing `row` is the actor leaving (or declining) a bucket of a rule with `leave` (the server's `is_leaving`). */
function isLeaving(ctx: WriteContext, table: string, row: Row): boolean {
  return Object.entries(ctx.schema.syncRules).some(
    ([name, rule]) =>
      rule.leave && invitedTo(ctx.schema, name, table, row) !== null && isMembersOwn(rule, row, ctx.actor),
  );
}

/**
 * May the mutation change or delete a row lying in `buckets` (the server's
 * `authorize_changing`)? Where the actor may write the table in one of them, or where `removed`
 * is the actor's own membership row of a rule with `leave`.
 */
function changing(
  ctx: WriteContext,
  table: string,
  buckets: readonly string[],
  removed: Row | null,
  images: readonly Row[],
): Verdict {
  if (removed && isLeaving(ctx, table, removed)) return ALLOWED;
  let may: Permission = false;
  for (const bucket of buckets) {
    if (ctx.created.has(bucket)) return ALLOWED;
    may = or(may, mayWrite(ctx, bucket, table, images));
    if (may === true) return ALLOWED;
  }
  return may === "unknown" ? UNKNOWN : forbiddenChange(ctx.schema, table, buckets);
}

/**
 * May the mutation take a row of `table` out of each of `left`, data buckets of its image before
 * (the server's check of the buckets a row leaves, made after `authorize_changing`)? `before` are
 * the buckets the image before lies in, its grant included. Not only the buckets the row enters
 * are checked: otherwise a holder of one bucket of a row could delete it from another bucket,
 * whose rule says it may not. The actor's own membership row of a rule with `leave` is removed
 * with no check, as `changing` allows it.
 */
function leaving(
  ctx: WriteContext,
  table: string,
  left: readonly string[],
  before: readonly string[],
  removed: Row | null,
  images: readonly Row[],
): Verdict {
  if (removed && isLeaving(ctx, table, removed)) return ALLOWED;
  let unknown = false;
  for (const bucket of [...left].sort()) {
    const may = leavingOne(ctx, table, bucket, before, images);
    if (may === false) return forbiddenChange(ctx.schema, table, [bucket]);
    unknown ||= may === "unknown";
  }
  return unknown ? UNKNOWN : ALLOWED;
}

/**
 * May a row of `table` lying in `before` leave `bucket`? Where the actor may write the table in
 * it; or the bucket's rule accepts rows from a rule in one of whose buckets of `before` the actor
 * may write the table; or it is a claim bucket the actor holds whose rule says nothing of the
 * table. No receiver is asked of an `accept(...)`: a row leaving a bucket reaches no one. A
 * bucket the mutation may be creating counts as writable, as it does in `entering`.
 */
function leavingOne(
  ctx: WriteContext,
  table: string,
  bucket: string,
  before: readonly string[],
  images: readonly Row[],
): Permission {
  const writable = (key: string): Permission => (ctx.created.has(key) ? true : mayWrite(ctx, key, table, images));
  let may = writable(bucket);
  const rule = ruleOf(ctx.schema, bucket);
  if (may === true || !rule) return may;
  for (const accepted of rule.accept) {
    for (const other of before) {
      if (bucketRule(other) === accepted.rule) may = or(may, writable(other));
      if (may === true) return true;
    }
  }
  if (rule.membership === null && !rule.write[table]) may = or(may, holds(ctx, bucket));
  return may;
}

/**
 * May the mutation put a row of `table` into each of `entering`, the row lying in `rowBuckets`
 * (the server's `authorize_entering`)? A claim bucket the actor holds whose rule says nothing of
 * the table takes a row the actor may write through another of the row's buckets.
 */
function entering(
  ctx: WriteContext,
  table: string,
  entering: readonly string[],
  rowBuckets: readonly string[],
  images: readonly Row[],
): Verdict {
  const readOnly: string[] = [];
  let unknown = false;
  for (const bucket of [...entering].sort()) {
    const verdict = enteringOne(ctx, table, bucket, rowBuckets, images);
    if (verdict === "read-only") readOnly.push(bucket);
    else if (verdict.kind === "refused") return verdict;
    else unknown ||= verdict.kind === "unknown";
  }
  for (const bucket of readOnly) {
    let elsewhere: Permission = false;
    for (const other of rowBuckets) {
      if (other === bucket) continue;
      elsewhere = or(elsewhere, ctx.created.has(other) ? true : mayWrite(ctx, other, table, images));
    }
    if (elsewhere === false) return forbiddenChange(ctx.schema, table, [bucket]);
    unknown ||= elsewhere === "unknown";
  }
  return unknown ? UNKNOWN : ALLOWED;
}

/**
 * May the mutation put a row of `table` into `bucket` (the server's `authorize_entering_one`)?
 * `"read-only"`: the actor holds the claim bucket, whose rule says nothing of the table, and
 * another bucket of the row may still allow it. A bucket of a membership rule the actor does not
 * hold may be one the mutation creates: the client cannot tell whether it had rows, so the
 * answer is unknown, and the bucket is noted as created.
 */
function enteringOne(
  ctx: WriteContext,
  table: string,
  bucket: string,
  rowBuckets: readonly string[],
  images: readonly Row[],
): Verdict | "read-only" {
  if (ctx.created.has(bucket)) return ALLOWED;
  let may = mayWrite(ctx, bucket, table, images);
  if (may === true) return ALLOWED;
  const rule = ruleOf(ctx.schema, bucket);
  if (!rule) return forbidden(table, bucket, "puts");
  for (const accepted of rule.accept) {
    for (const other of rowBuckets) {
      if (bucketRule(other) !== accepted.rule) continue;
      const writable = ctx.created.has(other) ? true : mayWrite(ctx, other, table, images);
      const admitted = and(writable, accepted.open || writable === false ? true : receiverHolds(ctx, bucket, other));
      if (admitted === true) return ALLOWED;
      may = or(may, admitted);
    }
  }
  // What the server does when neither allowed it; unknown when one might have.
  const rest = ((): Verdict | "read-only" => {
    const held = holds(ctx, bucket);
    if (held === true) {
      if (rule.membership === null && !rule.write[table]) return "read-only";
      return forbiddenChange(ctx.schema, table, [bucket]);
    }
    if (rule.membership === null) return forbidden(table, bucket, "puts");
    ctx.created.add(bucket);
    return UNKNOWN;
  })();
  if (may === "unknown" && rest !== ALLOWED) return UNKNOWN;
  return rest;
}

/**
 * Whether the receiver of a row a checked `accept(...)` admits into claim bucket `bucket`, the
 * actor its parameters name, holds `source` (the server's `receiver_holds`). The client can tell
 * only when the receiver is the actor itself.
 */
function receiverHolds(ctx: WriteContext, bucket: string, source: string): Permission {
  const rule = ruleOf(ctx.schema, bucket);
  if (!rule || rule.membership !== null) return false;
  return claimBucket(bucketRule(bucket), rule, ctx.actor) === bucket ? holds(ctx, source) : "unknown";
}

/**
 * The bucket whose invitation writing `after` (over `before`, null for an insert) accepts for a
 * member other than the actor: a membership row of a rule with `invite` whose column is true
 * where the same member's row was not accepted (the server's `accepted_for_another`).
 */
function acceptedForAnother(ctx: WriteContext, table: string, before: Row | null, after: Row): string | null {
  for (const [name, rule] of Object.entries(ctx.schema.syncRules)) {
    const column = rule.invite;
    if (column === undefined || rule.while !== null) continue;
    const bucket = grantOf(ctx.schema, name, table, after);
    if (bucket === null) continue;
    const wasAccepted =
      before !== null &&
      before[column] === true &&
      grantOf(ctx.schema, name, table, before) === bucket &&
      isSameMember(rule, before, after);
    if (!wasAccepted && !isMembersOwn(rule, after, ctx.actor)) return bucket;
  }
  return null;
}

/**
 * Before a row of `table` becomes `row` (from `before`, null for an insert): it accepts no other
 * member's invitation, and the buckets and write permissions it grants its member are ones the
 * actor has, or new (the server's `authorize_granting`). Whether a bucket the actor does not hold
 * had rows the client cannot tell: unknown, and noted as created.
 */
function granting(ctx: WriteContext, table: string, before: Row | null, row: Row): Verdict {
  const accepted = acceptedForAnother(ctx, table, before, row);
  if (accepted !== null) return forbidden(table, accepted, "accepts");
  let unknown = false;
  for (const [name, rule] of Object.entries(ctx.schema.syncRules)) {
    if (rule.while !== null) continue;
    const bucket = grantOf(ctx.schema, name, table, row);
    if (bucket === null || ctx.created.has(bucket)) continue;
    const held = holds(ctx, bucket);
    if (held !== true) {
      ctx.created.add(bucket);
      unknown = true;
      continue;
    }
    for (const [target, alternatives] of Object.entries(rule.write)) {
      const grants = alternatives.some((alternative) =>
        alternative.member.every((term) => sameValue(row[term.column], term.value)),
      );
      if (!grants) continue;
      const may = mayWrite(ctx, bucket, target, []);
      if (may === false) return forbidden(table, bucket, "grants");
      unknown ||= may === "unknown";
    }
  }
  return unknown ? UNKNOWN : ALLOWED;
}
