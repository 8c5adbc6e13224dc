//! The write rules evaluated offline, against an app whose rules use every kind of term: claim
//! buckets, membership buckets with write conditions, `leave`, a checked and an open
//! `accept(...)`, row terms, `while`, raw membership SQL and `server_only`. Each refusal is
//! pinned to the server's exact words (`engine_kernel::rules::refusal`, which the server calls).

use engine_kernel::rules::{
    Accept, Claim, ConstFilter, ConstValue, FilterValue, Membership, MembershipFilter, ParamMeta, ParamSource, RowTerm,
    ScopeEq, Selection, SyncRules, WriteRule,
};
use engine_kernel::{ColumnMeta, MergePolicy, SqlType};
use serde_json::{Value, json};

use super::*;

macro_rules! columns {
    ($($name:literal),*) => {
        &[$(ColumnMeta {
            name: $name,
            field: $name,
            sql_type: if matches!($name.as_bytes(), b"locked" | b"public") { SqlType::Boolean } else { SqlType::Text },
            nullable: true,
            blob: false,
            description: "",
        }),*]
    };
}

macro_rules! table {
    ($name:literal, [$($column:literal),*], $key:expr, $soft_delete:expr) => {
        TableMeta {
            name: $name,
            struct_name: $name,
            description: "",
            columns: columns!($($column),*),
            primary_key: $key,
            owner: None,
            soft_delete: $soft_delete,
            merge: MergePolicy::Lww,
        }
    };
}

static LISTS: TableMeta = table!("lists", ["id", "owner_id", "title", "deleted_at"], &["id"], Some("deleted_at"));
static NOTES: TableMeta = table!("notes", ["id", "list_id", "title", "deleted_at"], &["id"], Some("deleted_at"));
static MEMBERS: TableMeta =
    table!("members", ["list_id", "user_id", "owner_id", "role"], &["list_id", "user_id"], None);
static TEAM_MEMBERS: TableMeta =
    table!("team_members", ["team_id", "user_id", "role", "deleted_at"], &["team_id", "user_id"], Some("deleted_at"));
static TASKS: TableMeta = table!("tasks", ["id", "team_id", "assignee"], &["id"], None);
static COMMENTS: TableMeta = table!("comments", ["id", "team_id", "author"], &["id"], None);
static MESSAGES: TableMeta = table!("messages", ["id", "sender", "recipient"], &["id"], None);
static CARDS: TableMeta = table!("cards", ["id", "owner", "locked"], &["id"], None);
static PROJECTS: TableMeta = table!("projects", ["id", "org"], &["id"], None);
static AUDIT: TableMeta = table!("audit", ["id"], &["id"], None);
static ORG_MEMBERS: TableMeta = table!("org_members", ["org", "user_id"], &["org", "user_id"], None);

const fn param(name: &'static str, source: ParamSource) -> ParamMeta {
    ParamMeta { name, sql_type: SqlType::Text, source }
}

const fn scoped(table: &'static str, scope: &'static [ScopeEq]) -> Selection {
    Selection { table, scope, filters: &[] }
}

const fn rule(name: &'static str, parameters: &'static [ParamMeta], data: &'static [Selection]) -> RuleMeta {
    RuleMeta {
        name,
        description: "",
        parameters,
        membership: None,
        data,
        writes: &[],
        accepts: &[],
        leave: false,
        invite: None,
        held_while: None,
        anchor: None,
    }
}

macro_rules! role {
    ($role:literal) => {
        WriteAlternative { member: &[ConstFilter { column: "role", value: ConstValue::Text($role) }], row: &[] }
    };
}

const EVERYONE: &[WriteAlternative] = &[WriteAlternative { member: &[], row: &[] }];
const BY_USER: &[MembershipFilter] =
    &[MembershipFilter { column: "user_id", value: FilterValue::Claim(Claim::UserId) }];
const LIST_MEMBERS: Option<Membership> = Some(Membership::Table { table: "members", filters: BY_USER });

static RULES: &[RuleMeta] = &[
    RuleMeta {
        writes: &[WriteRule { table: "lists", any_of: EVERYONE }],
        ..rule(
            "own",
            &[param("owner_id", ParamSource::Claim(Claim::OwnerId))],
            &[
                scoped("lists", &[ScopeEq { column: "owner_id", param: "owner_id" }]),
                scoped("members", &[ScopeEq { column: "owner_id", param: "owner_id" }]),
            ],
        )
    },
    RuleMeta {
        membership: LIST_MEMBERS,
        writes: &[
            WriteRule { table: "notes", any_of: &[role!("owner"), role!("editor")] },
            WriteRule { table: "lists", any_of: &[role!("owner")] },
            WriteRule { table: "members", any_of: &[role!("owner"), role!("editor")] },
        ],
        ..rule(
            "shared",
            &[param("list_id", ParamSource::Membership { column: "list_id" })],
            &[
                scoped("lists", &[ScopeEq { column: "id", param: "list_id" }]),
                scoped("notes", &[ScopeEq { column: "list_id", param: "list_id" }]),
                scoped("members", &[ScopeEq { column: "list_id", param: "list_id" }]),
            ],
        )
    },
    RuleMeta {
        membership: LIST_MEMBERS,
        held_while: Some("shared"),
        ..rule(
            "watch",
            &[param("list_id", ParamSource::Membership { column: "list_id" })],
            &[scoped("lists", &[ScopeEq { column: "id", param: "list_id" }])],
        )
    },
    RuleMeta {
        membership: Some(Membership::Table { table: "team_members", filters: BY_USER }),
        writes: &[
            WriteRule { table: "tasks", any_of: EVERYONE },
            WriteRule {
                table: "comments",
                any_of: &[WriteAlternative {
                    member: &[],
                    row: &[RowTerm { column: "author", value: FilterValue::Claim(Claim::UserId), equal: true }],
                }],
            },
        ],
        leave: true,
        invite: None,
        ..rule(
            "team",
            &[param("team_id", ParamSource::Membership { column: "team_id" })],
            &[
                scoped("tasks", &[ScopeEq { column: "team_id", param: "team_id" }]),
                scoped("team_members", &[ScopeEq { column: "team_id", param: "team_id" }]),
                scoped("comments", &[ScopeEq { column: "team_id", param: "team_id" }]),
            ],
        )
    },
    RuleMeta {
        accepts: &[Accept { rule: "team", open: false }],
        ..rule(
            "inbox",
            &[param("user", ParamSource::Claim(Claim::UserId))],
            &[scoped("tasks", &[ScopeEq { column: "assignee", param: "user" }])],
        )
    },
    RuleMeta {
        writes: &[WriteRule { table: "messages", any_of: EVERYONE }],
        ..rule(
            "sent",
            &[param("user", ParamSource::Claim(Claim::UserId))],
            &[scoped("messages", &[ScopeEq { column: "sender", param: "user" }])],
        )
    },
    RuleMeta {
        accepts: &[Accept { rule: "sent", open: true }],
        ..rule(
            "received",
            &[param("user", ParamSource::Claim(Claim::UserId))],
            &[scoped("messages", &[ScopeEq { column: "recipient", param: "user" }])],
        )
    },
    RuleMeta {
        writes: &[WriteRule {
            table: "cards",
            any_of: &[WriteAlternative {
                member: &[],
                row: &[RowTerm { column: "locked", value: FilterValue::Const(ConstValue::Bool(true)), equal: false }],
            }],
        }],
        ..rule(
            "board",
            &[param("owner", ParamSource::Claim(Claim::UserId))],
            &[scoped("cards", &[ScopeEq { column: "owner", param: "owner" }])],
        )
    },
    RuleMeta {
        membership: Some(Membership::Raw {
            sql: "SELECT org FROM org_members WHERE user_id = $user_id",
            reads: &["org_members"],
        }),
        writes: &[WriteRule { table: "projects", any_of: &[role!("admin")] }],
        ..rule(
            "orgs",
            &[param("org", ParamSource::Membership { column: "org" })],
            &[scoped("projects", &[ScopeEq { column: "org", param: "org" }])],
        )
    },
];

static SYNC_RULES: SyncRules = SyncRules { rules: RULES, server_only: &["audit"] };

fn index() -> RuleIndex {
    let tables = [
        &LISTS,
        &NOTES,
        &MEMBERS,
        &TEAM_MEMBERS,
        &TASKS,
        &COMMENTS,
        &MESSAGES,
        &CARDS,
        &PROJECTS,
        &AUDIT,
        &ORG_MEMBERS,
    ];
    RuleIndex::new(tables, &SYNC_RULES)
}

fn row(value: Value) -> Row {
    value.as_object().expect("an object").clone()
}

fn actor(user: &str) -> Actor {
    Actor::new(user, user)
}

fn member(list_id: &str, user_id: &str, role: &str) -> Row {
    row(json!({"list_id": list_id, "user_id": user_id, "owner_id": "olga", "role": role}))
}

fn note(id: &str, list_id: Option<&str>, deleted_at: Option<&str>) -> Row {
    row(json!({"id": id, "list_id": list_id, "title": id, "deleted_at": deleted_at}))
}

fn with(base: &Row, changes: Value) -> Row {
    let mut row = base.clone();
    row.extend(changes.as_object().expect("an object").clone());
    row
}

fn holdings(held: &[&str], rows: &[(&'static str, Row)]) -> Holdings {
    let mut holdings = Holdings {
        held: held.iter().map(|b| BucketKey::parse(b).expect("a bucket key")).collect(),
        rows: BTreeMap::new(),
    };
    for (table, row) in rows {
        holdings.rows.entry(table).or_default().push(row.clone());
    }
    holdings
}

/// Alice edits list `l1`, views `l2`, owns nothing shared; she is on team `t1`.
fn alice() -> Holdings {
    holdings(
        &[
            "own/alice",
            "shared/l1",
            "shared/l2",
            "team/t1",
            "inbox/alice",
            "sent/alice",
            "received/alice",
            "board/alice",
        ],
        &[
            ("members", member("l1", "alice", "editor")),
            ("members", member("l1", "olga", "owner")),
            ("members", member("l2", "alice", "viewer")),
            ("team_members", row(json!({"team_id": "t1", "user_id": "alice", "role": "member", "deleted_at": null}))),
        ],
    )
}

/// Olga owns list `l1`: the membership rows she writes lie in her `own` bucket too.
fn olga() -> Holdings {
    holdings(&["own/olga", "shared/l1"], &[("members", member("l1", "olga", "owner"))])
}

/// A verdict as text: `allowed`, `unknown`, or the refusal's message.
fn said(verdict: Verdict) -> String {
    match verdict {
        Verdict::Allowed => "allowed".into(),
        Verdict::Unknown => "unknown".into(),
        Verdict::Refused(KernelError::Forbidden(message)) => message,
        Verdict::Refused(other) => panic!("not `forbidden`: {other:?}"),
    }
}

/// One write evaluated in a fresh mutation of `user` holding `holdings`.
fn judge(
    user: &str,
    holdings: Holdings,
    table: &'static TableMeta,
    before: Option<&Row>,
    after: Option<&Row>,
) -> String {
    let index = index();
    let actor = actor(user);
    said(WriteContext::new(&index, &actor, holdings).authorize(table, before, after))
}

const NO_BUCKET: &str = "this row of `notes` lies in no bucket: a client mutation writes only rows of a bucket whose rule lets the actor write them";
const VIEWER: &str = "the actor may not write this row of `notes`: rule `shared` lets only the memberships its `write(notes: …)` names write it";
const CARDS_LOCKED: &str = "the actor may not write this row of `cards`: rule `board` lets only the memberships its `write(cards: …)` names write it, and only rows it names";
const NOT_HERS: &str = "the actor may not write this row of `comments`: rule `team` lets only the memberships its `write(comments: …)` names write it, and only rows it names";
const TEAM_NO_WRITE: &str =
    "the actor may not write this row of `team_members`: rule `team` has no `write(team_members)`";
const OWN_NO_WRITE: &str = "the actor may not write this row of `members`: rule `own` has no `write(members)`";

/// One case: its name, the writer, its holdings, the table, the row before and after, the verdict.
type Case = (&'static str, &'static str, Holdings, &'static TableMeta, Option<Row>, Option<Row>, &'static str);

#[test]
fn writes_judged_offline() {
    let l1 = note("n", Some("l1"), None);
    let l2 = note("n", Some("l2"), None);
    let card = |owner: &str, locked: bool| row(json!({"id": "c", "owner": owner, "locked": locked}));
    let comment = |author: &str| row(json!({"id": "c", "team_id": "t1", "author": author}));
    let own_team = row(json!({"team_id": "t1", "user_id": "alice", "role": "member", "deleted_at": null}));
    let bobs_team = with(&own_team, json!({"user_id": "bob"}));
    let task = |team: &str, assignee: &str| row(json!({"id": "k", "team_id": team, "assignee": assignee}));
    let list = |id: &str, owner: &str, deleted_at: Option<&str>| {
        row(json!({"id": id, "owner_id": owner, "title": id, "deleted_at": deleted_at}))
    };
    let mine = |m: Row| with(&m, json!({"owner_id": "alice"}));
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        // Certain refusals, in the server's words.
        ("a `server_only` table", "alice", alice(), &AUDIT, None, Some(row(json!({"id": "a"}))),
            "`audit` is written by server code only (`server_only`): a client mutation may not write it"),
        ("a table a raw membership query reads", "alice", alice(), &ORG_MEMBERS, None,
            Some(row(json!({"org": "acme", "user_id": "alice"}))),
            "`org_members` is written by server code only: the raw membership query of rule `orgs` reads it, and whom a change to it grants cannot be checked"),
        ("an insert in no bucket", "alice", alice(), &NOTES, None, Some(note("n", None, None)), NO_BUCKET),
        ("an update into no bucket", "alice", alice(), &NOTES, Some(l1.clone()), Some(note("n", None, None)), NO_BUCKET),
        ("an editor's update", "alice", alice(), &NOTES, Some(l1.clone()), Some(with(&l1, json!({"title": "new"}))), "allowed"),
        ("a viewer's update", "alice", alice(), &NOTES, Some(l2.clone()), Some(with(&l2, json!({"title": "new"}))), VIEWER),
        ("a viewer's purge", "alice", alice(), &NOTES, Some(l2.clone()), None, VIEWER),
        ("a viewer's soft delete", "alice", alice(), &NOTES, Some(l2.clone()), Some(note("n", Some("l2"), Some("now"))), VIEWER),
        ("a purge of a soft-deleted row, by the buckets of its live image", "alice", alice(), &NOTES,
            Some(note("n", Some("l1"), Some("then"))), None, "allowed"),
        ("the same, in a list alice views", "alice", alice(), &NOTES, Some(note("n", Some("l2"), Some("then"))), None, VIEWER),
        ("a note moved from the list alice edits into one she views", "alice", alice(), &NOTES, Some(l1.clone()), Some(l2.clone()), VIEWER),
        ("a note inserted into the list alice views", "alice", alice(), &NOTES, None, Some(l2.clone()), VIEWER),
        ("a rule with no `write` for the table", "alice", alice(), &TEAM_MEMBERS, Some(bobs_team.clone()),
            Some(with(&bobs_team, json!({"role": "lead"}))), TEAM_NO_WRITE),
        ("a member leaving by a purge", "alice", alice(), &TEAM_MEMBERS, Some(own_team.clone()), None, "allowed"),
        ("a member leaving by a soft delete", "alice", alice(), &TEAM_MEMBERS, Some(own_team.clone()),
            Some(with(&own_team, json!({"deleted_at": "now"}))), "allowed"),
        ("a member raising its role", "alice", alice(), &TEAM_MEMBERS, Some(own_team.clone()),
            Some(with(&own_team, json!({"role": "lead"}))), TEAM_NO_WRITE),
        ("a member removing another", "alice", alice(), &TEAM_MEMBERS, Some(bobs_team.clone()), None, TEAM_NO_WRITE),
        ("a claim bucket of another actor, with no `accept` that admits", "alice", alice(), &TASKS, None,
            Some(row(json!({"id": "k", "team_id": null, "assignee": "bob"}))),
            "the mutation puts a row of `tasks` into a bucket of rule `inbox` that the actor may not write `tasks` in, and no `accept(...)` of rule `inbox` admits it"),
        ("another actor's outbox", "alice", alice(), &MESSAGES, None, Some(row(json!({"id": "m", "sender": "bob", "recipient": "alice"}))),
            "the mutation puts a row of `messages` into a bucket of rule `sent` that the actor may not write `messages` in, and no `accept(...)` of rule `sent` admits it"),
        ("a member shared by the list's owner, through her read-only `own` bucket", "olga", olga(), &MEMBERS, None,
            Some(member("l1", "bob", "viewer")), "allowed"),
        ("a membership row in no list: only the read-only `own` bucket", "olga", olga(), &MEMBERS, None,
            Some(with(&member("l1", "bob", "viewer"), json!({"list_id": null}))), OWN_NO_WRITE),
        ("an editor shares the list", "alice", alice(), &MEMBERS, None, Some(mine(member("l1", "bob", "editor"))), "allowed"),
        ("an editor makes an owner", "alice", alice(), &MEMBERS, None, Some(mine(member("l1", "bob", "owner"))),
            "the mutation's write to `members` grants a bucket of rule `shared` (or a permission in it) that the actor may not grant"),
        ("a card inserted unlocked", "alice", alice(), &CARDS, None, Some(card("alice", false)), "allowed"),
        ("a card inserted locked", "alice", alice(), &CARDS, None, Some(card("alice", true)), CARDS_LOCKED),
        ("a card locked", "alice", alice(), &CARDS, Some(card("alice", false)), Some(card("alice", true)), CARDS_LOCKED),
        ("a card unlocked", "alice", alice(), &CARDS, Some(card("alice", true)), Some(card("alice", false)), CARDS_LOCKED),
        ("a locked card purged", "alice", alice(), &CARDS, Some(card("alice", true)), None, CARDS_LOCKED),
        ("a comment of her own", "alice", alice(), &COMMENTS, None, Some(comment("alice")), "allowed"),
        ("her own comment edited", "alice", alice(), &COMMENTS, Some(comment("alice")), Some(comment("alice")), "allowed"),
        ("a comment in bob's name", "alice", alice(), &COMMENTS, None, Some(comment("bob")), NOT_HERS),
        ("bob's comment edited", "alice", alice(), &COMMENTS, Some(comment("bob")), Some(comment("bob")), NOT_HERS),
        ("bob's comment purged", "alice", alice(), &COMMENTS, Some(comment("bob")), None, NOT_HERS),
        ("her comment handed to bob", "alice", alice(), &COMMENTS, Some(comment("alice")), Some(comment("bob")), NOT_HERS),
        ("a comment of nobody's", "alice", alice(), &COMMENTS, None, Some(row(json!({"id": "c", "team_id": "t1", "author": null}))), NOT_HERS),
        ("a `while` rule's bucket is not granted by a membership row, so a refusal does not name it", "alice", alice(), &MEMBERS,
            Some(member("l2", "bob", "viewer")), None,
            "the actor may not write this row of `members`: rule `own` has no `write(members)`; rule `shared` lets only the memberships its `write(members: …)` names write it"),
        // The buckets a row leaves.
        ("an update out of a claim bucket of another actor", "alice", alice(), &MEMBERS, Some(member("l1", "bob", "viewer")),
            Some(mine(member("l1", "bob", "viewer"))), OWN_NO_WRITE),
        ("a delete from a membership bucket whose `write` does not name the actor", "alice", alice(), &LISTS,
            Some(list("l2", "alice", None)), None,
            "the actor may not write this row of `lists`: rule `shared` lets only the memberships its `write(lists: …)` names write it"),
        ("a delete from a bucket of a `while` rule that says nothing of the table", "olga", olga(), &LISTS,
            Some(list("l1", "olga", None)), None, "the actor may not write this row of `lists`: rule `watch` has no `write(lists)`"),
        ("a task unassigned through the team", "alice", alice(), &TASKS, Some(task("t1", "bob")), None, "allowed"),
        ("a task reassigned within the team", "alice", alice(), &TASKS, Some(task("t1", "bob")), Some(task("t1", "alice")), "allowed"),
        ("a row taken out of the actor's own read-only claim bucket", "alice", alice(), &MEMBERS,
            Some(mine(member("l1", "bob", "viewer"))), None, "allowed"),
        // What the client lets through.
        ("a message into anyone's inbox", "alice", alice(), &MESSAGES, None,
            Some(row(json!({"id": "m", "sender": "alice", "recipient": "bob"}))), "allowed"),
        ("a task assigned to the actor", "alice", alice(), &TASKS, None, Some(task("t1", "alice")), "allowed"),
        ("a task assigned to a teammate the client cannot judge", "alice", alice(), &TASKS, None, Some(task("t1", "bob")), "unknown"),
        ("a row the server cannot read is not found there, not refused", "alice", alice(), &CARDS,
            Some(card("bob", false)), Some(card("bob", true)), "unknown"),
        ("a bucket never seen may be one the mutation creates", "alice", alice(), &LISTS, None, Some(list("l9", "alice", None)), "unknown"),
        ("a held bucket whose membership rows the client lacks", "alice", holdings(&["shared/l1"], &[]), &NOTES,
            Some(l1.clone()), Some(with(&l1, json!({"title": "x"}))), "unknown"),
        ("a bucket held through raw SQL", "alice", holdings(&["orgs/acme"], &[]), &PROJECTS,
            Some(row(json!({"id": "p", "org": "acme"}))), Some(row(json!({"id": "p", "org": "acme"}))), "unknown"),
        ("a membership row the client has grants its bucket, pulled or not", "alice",
            holdings(&["own/alice"], &[("members", mine(member("l9", "alice", "owner")))]), &NOTES,
            Some(note("n", Some("l9"), None)), Some(note("n", Some("l9"), None)), "allowed"),
    ];
    let mut wrong = Vec::new();
    for (case, user, holdings, table, before, after, expected) in cases {
        let got = judge(user, holdings, table, before.as_ref(), after.as_ref());
        if got != expected {
            wrong.push(format!("{case}:\n  expected {expected}\n  got      {got}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_bucket_the_mutation_may_create_takes_its_next_rows() {
    let index = index();
    let alice = actor("alice");
    let mut context = WriteContext::new(&index, &alice, self::alice());
    let list = row(json!({"id": "l9", "owner_id": "alice", "title": "New", "deleted_at": null}));
    assert_eq!(said(context.authorize(&LISTS, None, Some(&list))), "unknown");
    let created: Vec<String> = context.created.iter().map(ToString::to_string).collect();
    // Not `watch/l9`: a bucket held `while(...)` another's is never new.
    assert_eq!(created, ["shared/l9"]);
    let owner = with(&member("l9", "alice", "owner"), json!({"owner_id": "alice"}));
    assert_eq!(said(context.authorize(&MEMBERS, None, Some(&owner))), "allowed");
    assert_eq!(said(context.authorize(&NOTES, None, Some(&note("n", Some("l9"), None)))), "allowed");
}
