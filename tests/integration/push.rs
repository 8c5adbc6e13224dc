//! Push on each backend (`docs/protocol.md#post-syncpush`, `docs/design.md` §4–7).

use std::sync::Arc;

use engine::server::storage::{PostgresStorage, Pushed};
use engine::server::{Error, Storage};
use engine::wire::{MutationRequest, MutationStatus, PullRequest, PushRequest};
use engine::{Actor, CrdtText, ErrorCode, MutatorCtx, Outcome, Result};
use example_notes::{List, ListMember, Note};
use serde_json::{Value, json};

use crate::support::{Backend, TestDb, TestServer, backend, postgres_only};

/// The notes app plus mutators that write without the checks the notes mutators make
/// themselves, so that the runtime's authorization is what stands in the way.
mod raw {
    use super::*;

    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    pub(super) struct Target {
        pub(super) list_id: String,
        #[serde(default)]
        pub(super) owner_id: Option<String>,
        #[serde(default)]
        pub(super) note_id: Option<String>,
    }

    /// Add a membership of the actor to any list.
    #[engine::mutator]
    pub(super) async fn join_list(ctx: &mut MutatorCtx<'_>, args: Target) -> Result<Outcome> {
        let user = ctx.actor().user_id.clone();
        let owner = args.owner_id.unwrap_or_else(|| ctx.actor().owner_id.clone());
        let member = ListMember {
            list_id: args.list_id,
            user_id: user.clone(),
            owner_id: owner,
            role: "editor".into(),
            accepted: true,
            invited_by: user,
            title: String::new(),
        };
        ctx.insert(&member).await?;
        Ok(Outcome::new())
    }

    /// Put a note into any list.
    #[engine::mutator]
    pub(super) async fn inject_note(ctx: &mut MutatorCtx<'_>, args: Target) -> Result<Outcome> {
        let owner = args.owner_id.unwrap_or_else(|| ctx.actor().owner_id.clone());
        let id = args.note_id.unwrap_or_else(|| ctx.new_id());
        let note = Note {
            id,
            owner_id: owner,
            list_id: args.list_id,
            title: "injected".into(),
            done: false,
            position: 0,
            body: CrdtText::new(),
            image: None,
            deleted_at: None,
        };
        ctx.insert(&note).await?;
        Ok(Outcome::new())
    }

    /// Move any note to any list, without looking first.
    #[engine::mutator]
    pub(super) async fn force_move(ctx: &mut MutatorCtx<'_>, args: Target) -> Result<Outcome> {
        let id = args.note_id.unwrap_or_default();
        if !ctx.update::<Note>(&id, [Note::list_id.set(args.list_id)]).await? {
            return Err(engine::Error::mutator_failed("no such note"));
        }
        Ok(Outcome::new())
    }

    /// Rename any list, without the owner check of the notes mutators.
    #[engine::mutator]
    pub(super) async fn force_rename(ctx: &mut MutatorCtx<'_>, args: Target) -> Result<Outcome> {
        if !ctx.update::<List>(&args.list_id, [List::title.set("renamed".to_owned())]).await? {
            return Err(engine::Error::mutator_failed("no such list"));
        }
        Ok(Outcome::new())
    }

    /// Make the actor an owner of a list it is a member of.
    #[engine::mutator]
    pub(super) async fn promote_self(ctx: &mut MutatorCtx<'_>, args: Target) -> Result<Outcome> {
        let key = (args.list_id, ctx.actor().user_id.clone());
        if !ctx.update::<ListMember>(&key, [ListMember::role.set("owner".to_owned())]).await? {
            return Err(engine::Error::mutator_failed("no such membership"));
        }
        Ok(Outcome::new())
    }

    /// Delete any membership of a list, without the owner check of `unshare_list`.
    #[engine::mutator]
    pub(super) async fn drop_member(ctx: &mut MutatorCtx<'_>, args: Member) -> Result<Outcome> {
        if !ctx.delete::<ListMember>(&(args.list_id, args.user_id)).await? {
            return Err(engine::Error::mutator_failed("no such membership"));
        }
        Ok(Outcome::new())
    }

    /// A membership of `drop_member`: the list and its member.
    #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
    pub(super) struct Member {
        pub(super) list_id: String,
        pub(super) user_id: String,
    }

    /// Write three tables; the last write goes to the list `list_id`.
    #[engine::mutator]
    pub(super) async fn three_writes(ctx: &mut MutatorCtx<'_>, args: Target) -> Result<Outcome> {
        let me = ctx.actor().owner_id.clone();
        let user = ctx.actor().user_id.clone();
        ctx.insert(&List { id: "three-list".into(), owner_id: me.clone(), title: "three".into(), archived: false })
            .await?;
        ctx.insert(&ListMember {
            list_id: "three-list".into(),
            user_id: user.clone(),
            owner_id: me.clone(),
            role: "owner".into(),
            accepted: true,
            invited_by: user,
            title: "three".into(),
        })
        .await?;
        let note = Note {
            id: "three-note".into(),
            owner_id: me,
            list_id: args.list_id,
            title: "last".into(),
            done: false,
            position: 0,
            body: CrdtText::new(),
            image: None,
            deleted_at: None,
        };
        ctx.insert(&note).await?;
        Ok(Outcome::new())
    }

    /// Write the list `list_id` of the actor (its insert sent by the update after it), then
    /// panic: a bug in app code.
    #[engine::mutator]
    pub(super) async fn write_then_panic(ctx: &mut MutatorCtx<'_>, args: Target) -> Result<Outcome> {
        let me = ctx.actor().owner_id.clone();
        ctx.insert(&List { id: args.list_id.clone(), owner_id: me, title: "half".into(), archived: false }).await?;
        ctx.update::<List>(&args.list_id, [List::title.set("written".to_owned())]).await?;
        panic!("a bug in app code");
    }

    pub(super) fn app() -> engine::App {
        use example_notes::mutators::*;
        engine::app! {
            tables: [List, ListMember, Note],
            mutators: [create_list, share_list, accept_list, unshare_list, leave_list, add_note, update_note, edit_note_body, move_note,
                       delete_note, purge_note, join_list, inject_note, force_move, three_writes, force_rename, promote_self,
                       drop_member, write_then_panic],
            sync_rules: example_notes::rules,
        }
    }
}

async fn store(db: &TestDb) -> Arc<dyn Storage> {
    db.open(raw::app()).await
}

fn actor(user: &str) -> Actor {
    Actor::new(user, user)
}

fn client(n: u128) -> uuid::Uuid {
    uuid::Uuid::from_u128(0x0192_f0e0_0000_7000_8000_0000_0000_0000 + n)
}

fn mutation(id: u64, name: &str, args: Value) -> MutationRequest {
    MutationRequest { mutation_id: id, client_mutation_id: uuid::Uuid::new_v4(), name: name.into(), args, hlc: None }
}

async fn push(storage: &Arc<dyn Storage>, who: &str, client_id: uuid::Uuid, mutations: Vec<MutationRequest>) -> Pushed {
    storage.push(&actor(who), &PushRequest { client_id, mutations }).await.unwrap()
}

/// Push one mutation as the next of `who`'s client 1 and return its result.
async fn one(storage: &Arc<dyn Storage>, who: &str, name: &str, args: Value) -> engine::wire::MutationResult {
    let last = last_mutation_id(storage, who, client(1)).await;
    let pushed = push(storage, who, client(1), vec![mutation(last + 1, name, args)]).await;
    assert!(pushed.stopped.is_none(), "{:?}", pushed.stopped);
    pushed.response.results.into_iter().next().unwrap()
}

/// Push `m` as alice's client 1 from eight tasks at once.
async fn race(storage: &Arc<dyn Storage>, m: &MutationRequest) -> Vec<Pushed> {
    let pushes: Vec<_> = (0..8)
        .map(|_| {
            let (storage, m) = (storage.clone(), m.clone());
            tokio::spawn(async move { push(&storage, "alice", client(1), vec![m]).await })
        })
        .collect();
    let mut pushed = Vec::new();
    for handle in pushes {
        pushed.push(handle.await.unwrap());
    }
    pushed
}

async fn last_mutation_id(storage: &Arc<dyn Storage>, who: &str, client_id: uuid::Uuid) -> u64 {
    let request = PullRequest { client_id, cursor: None, buckets: None, limit: Some(1), ..Default::default() };
    storage.pull(&actor(who), &request).await.unwrap().response().unwrap().last_mutation_id
}

fn code(result: &engine::wire::MutationResult) -> Option<ErrorCode> {
    result.error.as_ref().map(|e| e.code)
}

async fn rows(db: &TestDb, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM ({sql}) AS q")))
        .fetch_one(&db.pool)
        .await
        .unwrap()
}

/// alice owns `a1` (a list shared with bob as an editor); carol owns `c1`.
async fn seed(storage: &Arc<dyn Storage>) {
    assert_eq!(
        one(storage, "alice", "create_list", json!({"id": "a1", "title": "alice"})).await.status,
        MutationStatus::Applied
    );
    assert_eq!(
        one(storage, "carol", "create_list", json!({"id": "c1", "title": "carol"})).await.status,
        MutationStatus::Applied
    );
    let shared =
        one(storage, "alice", "share_list", json!({"list_id": "a1", "user_id": "bob", "role": "editor"})).await;
    assert_eq!(shared.status, MutationStatus::Applied, "{shared:?}");
    assert_eq!(one(storage, "bob", "accept_list", json!({"list_id": "a1"})).await.status, MutationStatus::Applied);
    assert_eq!(
        one(storage, "alice", "add_note", json!({"id": "an1", "list_id": "a1", "title": "milk"})).await.status,
        MutationStatus::Applied
    );
}

#[tokio::test]
async fn replays_of_applied_and_rejected_mutations_repeat_their_outcome() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let batch = vec![
        mutation(1, "create_list", json!({"title": "groceries"})),
        mutation(2, "share_list", json!({"list_id": "nope", "user_id": "bob", "role": "viewer"})),
        mutation(3, "no_such_mutator", json!({})),
        mutation(4, "add_note", json!({"list_id": 7})),
    ];
    let first = push(&storage, "alice", client(1), batch.clone()).await;
    let statuses: Vec<_> = first.response.results.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [MutationStatus::Applied, MutationStatus::Rejected, MutationStatus::Rejected, MutationStatus::Rejected]
    );
    assert_eq!(
        first.response.results.iter().map(code).collect::<Vec<_>>(),
        [None, Some(ErrorCode::MutatorFailed), Some(ErrorCode::UnknownMutator), Some(ErrorCode::ValidationFailed)]
    );
    assert_eq!(first.response.last_mutation_id, 4, "rejections advance the sequence");
    let replay = push(&storage, "alice", client(1), batch).await;
    assert_eq!(replay.response.results[0].status, MutationStatus::Duplicate);
    assert_eq!(replay.response.results[0].server_id, first.response.results[0].server_id);
    assert_eq!(replay.response.results[0].reconciliation, first.response.results[0].reconciliation);
    for i in 1..4 {
        assert_eq!(replay.response.results[i], first.response.results[i], "a rejection is replayed verbatim");
    }
    assert_eq!(rows(&db, "SELECT 1 FROM lists").await, 1, "the replay applied nothing again");
    assert!(replay.affected.is_empty());
}

#[tokio::test]
async fn the_same_mutation_pushed_concurrently_applies_once() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let m = mutation(1, "create_list", json!({"title": "once"}));
    let statuses: Vec<_> = race(&storage, &m).await.into_iter().map(|p| p.response.results[0].status).collect();
    assert_eq!(statuses.iter().filter(|s| **s == MutationStatus::Applied).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == MutationStatus::Duplicate).count(), 7);
    assert_eq!(rows(&db, "SELECT 1 FROM lists").await, 1);
}

#[tokio::test]
async fn racing_pushes_of_a_known_client_apply_each_mutation_once() {
    // The client's sequence exists, so every push tries the next path: the racers run the
    // mutator side by side and only one record may advance the sequence.
    let db = TestDb::new().await;
    let storage = store(&db).await;
    push(&storage, "alice", client(1), vec![mutation(1, "create_list", json!({"id": "l1", "title": "first"}))]).await;
    let racing = [
        // Two inserts: the first begins a transaction, the second goes with the record.
        mutation(2, "create_list", json!({"id": "l2", "title": "second"})),
        // One insert: sent with the record as a single statement.
        mutation(3, "add_note", json!({"id": "n1", "list_id": "l1", "title": "milk"})),
    ];
    for m in racing {
        let mut statuses = Vec::new();
        for pushed in race(&storage, &m).await {
            assert!(pushed.stopped.is_none(), "{:?}", pushed.stopped);
            assert_eq!(pushed.response.last_mutation_id, m.mutation_id);
            statuses.push(pushed.response.results[0].status);
        }
        assert_eq!(statuses.iter().filter(|s| **s == MutationStatus::Applied).count(), 1, "{statuses:?}");
        assert_eq!(statuses.iter().filter(|s| **s == MutationStatus::Duplicate).count(), 7, "{statuses:?}");
    }
    assert_eq!(rows(&db, "SELECT 1 FROM lists").await, 2);
    assert_eq!(rows(&db, "SELECT 1 FROM list_members").await, 2);
    assert_eq!(rows(&db, "SELECT 1 FROM notes").await, 1);
    assert_eq!(rows(&db, "SELECT 1 FROM _engine_mutations WHERE status = 'applied'").await, 3);
}

/// Ids start at 1: a mutation sent as 0 was confirmed as a `duplicate` though nothing ran, so a
/// client numbering from 0 lost its first write silently. It is out of order, fresh or not.
#[tokio::test]
async fn a_mutation_id_of_zero_is_out_of_order_not_a_duplicate() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    for last in [0, 1] {
        let zero = push(&storage, "alice", client(1), vec![mutation(0, "create_list", json!({"title": "zero"}))]).await;
        match zero.stopped {
            Some(Error::MutationOutOfOrder { last_mutation_id, got: 0 }) if last_mutation_id == last => {}
            other => panic!("expected mutation 0 out of order after {last}, got {other:?}"),
        }
        assert!(zero.response.results.is_empty(), "{:?}", zero.response);
        push(&storage, "alice", client(1), vec![mutation(last + 1, "create_list", json!({"title": "next"}))]).await;
    }
    assert_eq!(rows(&db, "SELECT 1 FROM lists WHERE title = 'zero'").await, 0);
}

#[tokio::test]
async fn a_gap_in_the_sequence_is_refused_with_the_last_applied_id() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    push(&storage, "alice", client(1), vec![mutation(1, "create_list", json!({"title": "a"}))]).await;
    let gap = push(&storage, "alice", client(1), vec![mutation(3, "create_list", json!({"title": "b"}))]).await;
    match gap.stopped {
        Some(Error::MutationOutOfOrder { last_mutation_id: 1, got: 3 }) => {}
        other => panic!("expected a sequence gap, got {other:?}"),
    }
    let problem = gap.stopped.unwrap().problem();
    assert_eq!((problem.status, problem.last_mutation_id), (409, Some(1)));
    assert!(gap.response.results.is_empty());
    assert_eq!(rows(&db, "SELECT 1 FROM lists").await, 1);
}

#[tokio::test]
async fn an_id_another_mutation_holds_is_refused_with_the_last_applied_id() {
    // A store copied to a second device: both number their mutations from the same point.
    let db = TestDb::new().await;
    let storage = store(&db).await;
    push(&storage, "alice", client(1), vec![mutation(1, "create_list", json!({"id": "l1", "title": "a"}))]).await;
    let copy = mutation(1, "create_list", json!({"id": "l2", "title": "from the copy"}));
    let refused = push(&storage, "alice", client(1), vec![copy.clone()]).await;
    match refused.stopped {
        Some(Error::MutationOutOfOrder { last_mutation_id: 1, got: 1 }) => {}
        other => panic!("expected the sequence to be named, got {other:?}"),
    }
    assert!(refused.response.results.is_empty());
    assert_eq!(rows(&db, "SELECT 1 FROM lists WHERE id = 'l2'").await, 0, "nothing applied");

    // Numbered on from there, it applies; the original mutation 1 still answers as itself.
    let renumbered = push(&storage, "alice", client(1), vec![MutationRequest { mutation_id: 2, ..copy }]).await;
    assert_eq!(renumbered.response.results[0].status, MutationStatus::Applied);
    assert_eq!(rows(&db, "SELECT 1 FROM lists").await, 2);
}

#[tokio::test]
async fn a_transient_failure_records_nothing_and_the_retry_applies_once() {
    if postgres_only("a row lock held by another session and a lock timeout are Postgres'") {
        return;
    }
    let db = TestDb::new().await;
    let storage = store(&db).await;
    seed(&storage).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("ALTER DATABASE {} SET lock_timeout = '200ms'", db.name)))
        .execute(db.pg())
        .await
        .unwrap();
    // A fresh pool picks the setting up; another session holds the note's row lock.
    let impatient: Arc<dyn Storage> = Arc::new(PostgresStorage::new(
        sqlx::PgPool::connect(&crate::support::db::database_url(&db.name)).await.unwrap(),
        Arc::new(raw::app()),
    ));
    let mut holder = db.pg().begin().await.unwrap();
    sqlx::query("SELECT 1 FROM notes WHERE id = 'an1' FOR UPDATE").execute(&mut *holder).await.unwrap();
    let before = last_mutation_id(&impatient, "alice", client(1)).await;
    let m = mutation(before + 1, "update_note", json!({"id": "an1", "title": "oat milk"}));
    let failed = push(&impatient, "alice", client(1), vec![m.clone()]).await;
    let stopped = failed.stopped.expect("the push stops");
    assert!(stopped.is_transient(), "{stopped:?}");
    assert_eq!(stopped.problem().status, 503);
    assert_eq!(last_mutation_id(&impatient, "alice", client(1)).await, before, "nothing recorded");
    assert_eq!(
        rows(&db, &format!("SELECT 1 FROM _engine_mutations WHERE client_mutation_id = '{}'", m.client_mutation_id))
            .await,
        0
    );
    holder.rollback().await.unwrap();
    let retried = push(&impatient, "alice", client(1), vec![m.clone()]).await;
    assert_eq!(retried.response.results[0].status, MutationStatus::Applied);
    let again = push(&impatient, "alice", client(1), vec![m]).await;
    assert_eq!(again.response.results[0].status, MutationStatus::Duplicate);
    let title: String =
        sqlx::query_scalar("SELECT title FROM notes WHERE id = 'an1'").fetch_one(&db.pool).await.unwrap();
    assert_eq!(title, "oat milk");
}

#[tokio::test]
async fn another_user_reusing_a_client_id_has_its_own_sequence() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let alice = push(
        &storage,
        "alice",
        client(9),
        vec![mutation(1, "create_list", json!({"title": "a"})), mutation(2, "create_list", json!({"title": "b"}))],
    )
    .await;
    assert_eq!(alice.response.last_mutation_id, 2);
    let bob = push(&storage, "bob", client(9), vec![mutation(1, "create_list", json!({"title": "bob's"}))]).await;
    assert_eq!(
        bob.response.results[0].status,
        MutationStatus::Applied,
        "bob's mutation 1 is bob's, not a replay of alice's"
    );
    assert_eq!(bob.response.last_mutation_id, 1);
    assert_eq!(last_mutation_id(&storage, "alice", client(9)).await, 2, "bob cannot advance alice's sequence");
    assert_eq!(last_mutation_id(&storage, "bob", client(9)).await, 1, "nor read it");
}

#[tokio::test]
async fn a_forbidden_last_write_leaves_no_trace_of_the_mutation() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    seed(&storage).await;
    let result = one(&storage, "bob", "three_writes", json!({"list_id": "c1"})).await;
    assert_eq!(code(&result), Some(ErrorCode::Forbidden), "{result:?}");
    assert_eq!(rows(&db, "SELECT 1 FROM lists WHERE id = 'three-list'").await, 0);
    assert_eq!(rows(&db, "SELECT 1 FROM list_members WHERE list_id = 'three-list'").await, 0);
    assert_eq!(rows(&db, "SELECT 1 FROM notes WHERE id = 'three-note'").await, 0);
    let allowed = one(&storage, "bob", "three_writes", json!({"list_id": "three-list"})).await;
    assert_eq!(allowed.status, MutationStatus::Applied, "the same writes into the new list are fine: {allowed:?}");
}

#[tokio::test]
async fn a_viewer_reads_but_writes_nothing_and_only_the_owner_changes_the_list() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    seed(&storage).await;
    let shared =
        one(&storage, "alice", "share_list", json!({"list_id": "a1", "user_id": "vic", "role": "viewer"})).await;
    assert_eq!(shared.status, MutationStatus::Applied, "{shared:?}");
    assert_eq!(one(&storage, "vic", "accept_list", json!({"list_id": "a1"})).await.status, MutationStatus::Applied);
    let update = engine::crdt::update_to_base64(CrdtText::new().insert(0, "x").unwrap().as_bytes());
    let attempts = [
        ("add_note", json!({"list_id": "a1", "title": "sneaky"})),
        ("update_note", json!({"id": "an1", "title": "changed"})),
        ("edit_note_body", json!({"id": "an1", "update": update})),
        ("delete_note", json!({"id": "an1"})),
        ("purge_note", json!({"id": "an1"})),
        ("inject_note", json!({"list_id": "a1"})),
    ];
    for (name, args) in attempts {
        let result = one(&storage, "vic", name, args.clone()).await;
        assert_eq!(code(&result), Some(ErrorCode::Forbidden), "{name} {args}: {result:?}");
        let detail = &result.error.as_ref().unwrap().detail;
        assert!(!detail.contains("a1") || args.to_string().contains("a1"), "{detail}");
    }
    assert_eq!(rows(&db, "SELECT 1 FROM notes WHERE id = 'an1' AND title = 'milk' AND deleted_at IS NULL").await, 1);
    // An editor writes notes but not the list or its memberships.
    let edited = one(&storage, "bob", "update_note", json!({"id": "an1", "title": "oat milk"})).await;
    assert_eq!(edited.status, MutationStatus::Applied, "{edited:?}");
    let rename = one(&storage, "bob", "force_rename", json!({"list_id": "a1"})).await;
    assert_eq!(code(&rename), Some(ErrorCode::Forbidden), "{rename:?}");
    let promote = one(&storage, "bob", "promote_self", json!({"list_id": "a1"})).await;
    assert_eq!(code(&promote), Some(ErrorCode::Forbidden), "{promote:?}");
    assert_eq!(rows(&db, "SELECT 1 FROM list_members WHERE user_id = 'bob' AND role = 'editor'").await, 1);
    // The owner does all of it.
    let rename = one(&storage, "alice", "force_rename", json!({"list_id": "a1"})).await;
    assert_eq!(rename.status, MutationStatus::Applied, "{rename:?}");
}

/// A member leaves a list over HTTP: the rules' `leave` lets it delete its own membership row
/// (even through a mutator that checks nothing), never another's, and never raise its role. The
/// owner cannot leave its own list.
#[tokio::test]
async fn a_member_leaves_a_list_but_removes_no_one_else_nor_raises_its_role() {
    use crate::support::TestServer;
    use crate::support::actors::{applied, forbidden, has, pulled, push};

    let db = TestDb::new().await;
    let server = TestServer::start(&db, |b| b.app(raw::app())).await;
    applied(&push(&server, "alice", 1, "create_list", json!({"id": "a1", "title": "alice"})).await);
    for (i, (user, role)) in [("bob", "editor"), ("vic", "viewer")].into_iter().enumerate() {
        let share = json!({"list_id": "a1", "user_id": user, "role": role});
        applied(&push(&server, "alice", 2 + i as u64, "share_list", share).await);
        crate::support::notes::accept(&server.url(""), user, "a1").await;
    }
    forbidden(&push(&server, "vic", 1, "drop_member", json!({"list_id": "a1", "user_id": "bob"})).await, &[]);
    forbidden(&push(&server, "vic", 2, "drop_member", json!({"list_id": "a1", "user_id": "alice"})).await, &[]);
    forbidden(&push(&server, "vic", 3, "promote_self", json!({"list_id": "a1"})).await, &[]);
    forbidden(&push(&server, "bob", 1, "unshare_list", json!({"list_id": "a1", "user_id": "vic"})).await, &[]);
    let owner_leaves = push(&server, "alice", 4, "leave_list", json!({"list_id": "a1"})).await;
    assert_eq!(owner_leaves["error"]["code"], "mutator_failed", "{owner_leaves}");
    assert_eq!(rows(&db, "SELECT 1 FROM list_members WHERE list_id = 'a1'").await, 3);
    assert_eq!(rows(&db, "SELECT 1 FROM list_members WHERE user_id = 'vic' AND role = 'viewer'").await, 1);

    applied(&push(&server, "vic", 4, "leave_list", json!({"list_id": "a1"})).await);
    applied(&push(&server, "bob", 2, "drop_member", json!({"list_id": "a1", "user_id": "bob"})).await);
    let members: Vec<String> =
        sqlx::query_scalar("SELECT user_id FROM list_members WHERE list_id = 'a1'").fetch_all(&db.pool).await.unwrap();
    assert_eq!(members, ["alice"]);
    assert!(!has(&pulled(&server, "vic").await, "lists", "a1"));
    assert!(!has(&pulled(&server, "bob").await, "lists", "a1"));
    let alice = pulled(&server, "alice").await;
    let left: Vec<_> =
        alice.iter().filter(|(table, _)| table == "list_members").map(|(_, row)| &row["user_id"]).collect();
    assert_eq!(left, ["alice"], "the owner's replica no longer lists them");
}

#[tokio::test]
async fn forged_grants_and_injections_are_refused_and_reach_no_one() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    seed(&storage).await;
    let attempts = [
        // bob sees alice's list (he is an editor of it) but does not own it.
        ("share_list", json!({"list_id": "a1", "user_id": "bob", "role": "viewer"}), ErrorCode::Forbidden),
        ("share_list", json!({"list_id": "a1", "user_id": "eve", "role": "editor"}), ErrorCode::Forbidden),
        // carol's list is not even visible to bob.
        ("share_list", json!({"list_id": "c1", "user_id": "bob", "role": "editor"}), ErrorCode::MutatorFailed),
        ("unshare_list", json!({"list_id": "a1", "user_id": "alice"}), ErrorCode::Forbidden),
        ("join_list", json!({"list_id": "c1"}), ErrorCode::Forbidden),
        ("join_list", json!({"list_id": "c1", "owner_id": "carol"}), ErrorCode::Forbidden),
        ("inject_note", json!({"list_id": "c1"}), ErrorCode::Forbidden),
        ("add_note", json!({"list_id": "c1", "title": "sneaky"}), ErrorCode::MutatorFailed),
        ("force_move", json!({"list_id": "c1", "note_id": "an1"}), ErrorCode::Forbidden),
        ("move_note", json!({"id": "an1", "list_id": "c1"}), ErrorCode::MutatorFailed),
        ("force_move", json!({"list_id": "a1", "note_id": "nonexistent"}), ErrorCode::MutatorFailed),
    ];
    for (name, args, expected) in attempts {
        let result = one(&storage, "bob", name, args.clone()).await;
        assert_eq!(code(&result), Some(expected), "{name} {args}: {result:?}");
    }
    let pulled = storage
        .pull(
            &actor("carol"),
            &PullRequest { client_id: client(3), cursor: None, buckets: None, limit: None, ..Default::default() },
        )
        .await
        .unwrap()
        .response()
        .unwrap();
    let bob_in_carols_world = pulled
        .changes
        .iter()
        .any(|c| c.row.values().any(|v| v == "bob") || c.row.get("title") == Some(&json!("injected")));
    assert!(!bob_in_carols_world, "nothing of it reaches carol: {:?}", pulled.changes);
    assert_eq!(rows(&db, "SELECT 1 FROM list_members WHERE user_id = 'bob'").await, 1, "only alice's share");
    // Members edit shared rows; a first-time user creates lists.
    let edit = one(&storage, "bob", "update_note", json!({"id": "an1", "done": true})).await;
    assert_eq!(edit.status, MutationStatus::Applied, "{edit:?}");
    assert_eq!(one(&storage, "dave", "create_list", json!({"title": "first"})).await.status, MutationStatus::Applied);
}

#[tokio::test]
async fn field_merge_takes_each_column_from_the_newer_clock() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    seed(&storage).await;
    // Newer than the stamps the seed's writes got, and within the server's bound of a second.
    let base = engine::hlc::wall_clock_ms();
    let at = |ms: u64, node: &str| format!("{:013}-0000-{node}", base + ms);
    // Two offline clients, interleaved: A's title is older than B's, A's done newer than B's.
    let a = vec![
        MutationRequest {
            hlc: Some(at(100, "a")),
            ..mutation(1, "update_note", json!({"id": "an1", "title": "from a"}))
        },
        MutationRequest { hlc: Some(at(300, "a")), ..mutation(2, "update_note", json!({"id": "an1", "done": true})) },
    ];
    let b = vec![
        MutationRequest {
            hlc: Some(at(200, "b")),
            ..mutation(1, "update_note", json!({"id": "an1", "title": "from b"}))
        },
        MutationRequest { hlc: Some(at(150, "b")), ..mutation(2, "update_note", json!({"id": "an1", "done": false})) },
    ];
    assert!(
        push(&storage, "alice", client(10), a)
            .await
            .response
            .results
            .iter()
            .all(|r| r.status == MutationStatus::Applied)
    );
    let before_b = storage
        .pull(
            &actor("bob"),
            &PullRequest { client_id: client(2), cursor: None, buckets: None, limit: None, ..Default::default() },
        )
        .await
        .unwrap()
        .response()
        .unwrap();
    assert!(
        push(&storage, "bob", client(11), b).await.response.results.iter().all(|r| r.status == MutationStatus::Applied)
    );
    let (title, done, _) = note(&db, "an1").await;
    assert_eq!((title.as_str(), done), ("from b", true));
    db.settle(&*storage).await;
    let after_b = storage
        .pull(
            &actor("bob"),
            &PullRequest {
                client_id: client(2),
                cursor: Some(before_b.cursor),
                buckets: None,
                limit: None,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .response()
        .unwrap();
    let note = after_b.changes.iter().find(|c| c.row["id"] == "an1").expect("a write that loses still bumps the row");
    assert_eq!((note.row["title"].clone(), note.row["done"].clone()), (json!("from b"), json!(true)));

    // A clock far ahead is pulled back to the server's bound, not refused.
    let fast = MutationRequest {
        hlc: Some("4102444800000-0000-fast".into()),
        ..mutation(1, "update_note", json!({"id": "an1", "title": "from the future"}))
    };
    let result = push(&storage, "alice", client(12), vec![fast]).await;
    assert_eq!(result.response.results[0].status, MutationStatus::Applied);
    let stamp: String = sqlx::query_scalar("SELECT _engine_hlc->>'title' FROM notes WHERE id = 'an1'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    let physical: u64 = stamp[..13].parse().unwrap();
    assert!(physical <= engine::hlc::wall_clock_ms() + engine::server::storage::postgres::MAX_CLOCK_LEAD_MS, "{stamp}");
    let bad = MutationRequest {
        hlc: Some("yesterday".into()),
        ..mutation(2, "update_note", json!({"id": "an1", "title": "x"}))
    };
    assert_eq!(
        code(&push(&storage, "alice", client(12), vec![bad]).await.response.results[0]),
        Some(ErrorCode::ValidationFailed)
    );
}

#[tokio::test]
async fn concurrent_text_edits_from_several_clients_converge() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    seed(&storage).await;
    let start = CrdtText::from_text("shared base");
    let init = engine::crdt::update_to_base64(start.state());
    assert_eq!(
        one(&storage, "alice", "edit_note_body", json!({"id": "an1", "update": init})).await.status,
        MutationStatus::Applied
    );
    let mut replicas = vec![start.clone(), start.clone(), start.clone()];
    let edits = [(0, "[alice] "), (6, "-bob-"), (11, " (carol)")];
    let mut updates = Vec::new();
    for (replica, (at, text)) in replicas.iter_mut().zip(edits) {
        updates.push(replica.insert(at, text).unwrap());
    }
    for (i, update) in updates.iter().enumerate().rev() {
        let who = ["alice", "bob", "alice"][i];
        let args = json!({"id": "an1", "update": engine::crdt::update_to_base64(update)});
        assert_eq!(one(&storage, who, "edit_note_body", args).await.status, MutationStatus::Applied);
    }
    let stored = db.note_body("an1").await;
    let server = CrdtText::from_state(stored).unwrap();
    let text = server.text().unwrap();
    for (_, inserted) in edits {
        assert!(text.contains(inserted), "{text:?} keeps {inserted:?}");
    }
    for replica in &mut replicas {
        replica.merge(server.state()).unwrap();
        assert_eq!(replica.text().unwrap(), text, "every replica converges on the server's text");
    }
    let bomb = engine::crdt::update_to_base64(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    let refused = one(&storage, "alice", "edit_note_body", json!({"id": "an1", "update": bomb})).await;
    assert_eq!(code(&refused), Some(ErrorCode::ValidationFailed), "{refused:?}");
}

#[tokio::test]
async fn an_empty_id_is_chosen_by_the_server_and_reconciled() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    seed(&storage).await;
    let m = mutation(10, "add_note", json!({"id": "", "list_id": "a1", "title": "server picks"}));
    let pushed = push(&storage, "alice", client(20), vec![MutationRequest { mutation_id: 1, ..m.clone() }]).await;
    let result = &pushed.response.results[0];
    let server_id = result.server_id.clone().expect("a server id");
    assert!(uuid::Uuid::parse_str(&server_id).is_ok(), "a UUID: {server_id}");
    assert_eq!(result.reconciliation.as_ref().unwrap().get(""), Some(&server_id));
    let replay = push(&storage, "alice", client(20), vec![MutationRequest { mutation_id: 1, ..m }]).await;
    assert_eq!(replay.response.results[0].server_id.as_ref(), Some(&server_id));
    assert_eq!(replay.response.results[0].reconciliation, result.reconciliation);
    assert_eq!(rows(&db, &format!("SELECT 1 FROM notes WHERE id = '{server_id}'")).await, 1);
    let buckets: Vec<String> = pushed.affected.iter().map(ToString::to_string).collect();
    assert_eq!(buckets, ["shared/a1"], "the pings to publish after commit");

    // With the client's clock, the id is the one the client's own run of the mutation chose.
    let hlc = engine::Hlc::new(engine::hlc::wall_clock_ms(), 0, client(20).to_string()).unwrap();
    let m = MutationRequest {
        mutation_id: 2,
        hlc: Some(hlc.to_string()),
        ..mutation(2, "add_note", json!({"list_id": "a1", "title": "same id everywhere"}))
    };
    let expected = engine::mutators::derived_id(m.client_mutation_id, hlc.physical_ms(), 0);
    let pushed = push(&storage, "alice", client(20), vec![m]).await;
    assert_eq!(pushed.response.results[0].server_id.as_deref(), Some(expected.as_str()));
}

#[tokio::test]
async fn a_bucket_parameter_past_its_bound_is_rejected_before_authorization_sees_it() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let long = "l".repeat(600);
    let result = one(&storage, "alice", "inject_note", json!({"list_id": long, "owner_id": "alice"})).await;
    assert_eq!(result.status, MutationStatus::Rejected);
    let error = result.error.unwrap();
    assert_eq!(error.code, ErrorCode::ValidationFailed);
    assert!(error.detail.contains("`notes.list_id`") && error.detail.contains("at most 512"), "{}", error.detail);
    assert!(!error.detail.contains(&long), "the value is not echoed");
}

/// A reading of a clock `offset_ms` off the wall clock, on `node`.
fn reading(offset_ms: i64, node: &str) -> String {
    let ms = engine::hlc::wall_clock_ms().saturating_add_signed(offset_ms);
    format!("{ms:013}-0000-{node}")
}

async fn note(db: &TestDb, id: &str) -> (String, bool, bool) {
    let (title, done, deleted): (String, i64, i64) = sqlx::query_as(
        "SELECT title, CAST(CASE WHEN done THEN 1 ELSE 0 END AS BIGINT),
                CAST(CASE WHEN deleted_at IS NULL THEN 0 ELSE 1 END AS BIGINT) FROM notes WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&db.pool)
    .await
    .unwrap();
    (title, done != 0, deleted != 0)
}

#[tokio::test]
async fn causality_wins_over_clocks_a_minute_ahead_or_ten_minutes_behind() {
    let db = TestDb::new().await;
    let storage = store(&db).await;
    seed(&storage).await;
    one(&storage, "alice", "add_note", json!({"id": "an2", "list_id": "a1", "title": "bread"})).await;
    // A client whose clock is 59 s ahead writes both notes: its reading is pulled back to a
    // second past the server's.
    let ahead = reading(59_000, "fast");
    let fast = vec![
        MutationRequest {
            hlc: Some(ahead.clone()),
            ..mutation(1, "update_note", json!({"id": "an1", "title": "fast"}))
        },
        MutationRequest {
            hlc: Some(ahead.clone()),
            ..mutation(2, "update_note", json!({"id": "an2", "title": "fast"}))
        },
    ];
    let pushed = push(&storage, "alice", client(20), fast).await;
    assert!(pushed.response.results.iter().all(|r| r.status == MutationStatus::Applied && !r.superseded));

    // Another instance (on SQLite, the next server process on the file), which never saw that
    // clock, deletes a note with its own reading; it serves the rest of the test.
    drop(storage);
    let other = store(&db).await;
    let deleted = push(&other, "alice", client(21), vec![mutation(1, "delete_note", json!({"id": "an1"}))]).await;
    let result = &deleted.response.results[0];
    assert!(result.status == MutationStatus::Applied && !result.superseded, "{result:?}");
    assert!(note(&db, "an1").await.2, "the delete issued after the fast write wins");
    let storage = other;

    // A client ten minutes behind, after pulling: its clock observes the pull's reading.
    db.settle(&*storage).await;
    let pulled = storage
        .pull(
            &actor("bob"),
            &PullRequest { client_id: client(22), cursor: None, buckets: None, limit: None, ..Default::default() },
        )
        .await
        .unwrap()
        .response()
        .unwrap();
    let server = pulled.server_hlc.expect("a pull carries the server's clock");
    let stamp: String = sqlx::query_scalar("SELECT _engine_hlc->>'title' FROM notes WHERE id = 'an2'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert!(stamp.ends_with("-ffff-fast") && stamp < ahead, "the fast stamp {stamp} was pulled back from {ahead}");
    assert!(server.to_string() > stamp, "{server} reads past the fast stamp {stamp}");
    let mut slow = engine::hlc::HlcClock::new("slow");
    slow.observe(&server);
    let after_pull = slow.tick(engine::hlc::wall_clock_ms() - 600_000).to_string();
    let late = MutationRequest {
        hlc: Some(after_pull),
        ..mutation(1, "update_note", json!({"id": "an2", "title": "after pulling"}))
    };
    let result = push(&storage, "bob", client(22), vec![late]).await.response.results.remove(0);
    assert!(result.status == MutationStatus::Applied && !result.superseded, "{result:?}");
    assert_eq!(note(&db, "an2").await.0, "after pulling");

    // The same slow clock without the pull: concurrent with the fast write, and older, it loses
    // every merge and says so.
    let blind = MutationRequest {
        hlc: Some(reading(-600_000, "blind")),
        ..mutation(1, "update_note", json!({"id": "an2", "title": "blind"}))
    };
    let result = push(&storage, "bob", client(23), vec![blind.clone()]).await.response.results.remove(0);
    assert!(result.status == MutationStatus::Applied && result.superseded, "{result:?}");
    assert_eq!(note(&db, "an2").await.0, "after pulling");
    let replay = push(&storage, "bob", client(23), vec![blind]).await.response.results.remove(0);
    assert!(replay.status == MutationStatus::Duplicate && replay.superseded, "a replay says it again");
}

/// The push that advances a client's sequence notes its `updated_at` to the minute: within the
/// minute the value stays, so the update changes no indexed column (Postgres then keeps it on the
/// row's page without an index entry); a client idle for longer is noted afresh.
#[tokio::test]
async fn a_push_notes_its_client_to_the_minute() {
    if postgres_only("an update that changes no indexed column stays on its page in Postgres") {
        return;
    }
    let db = TestDb::new().await;
    let storage = store(&db).await;
    let noted = || async {
        sqlx::query_scalar::<_, String>("SELECT updated_at::text FROM _engine_clients WHERE user_id = 'alice'")
            .fetch_one(&db.pool)
            .await
            .unwrap()
    };
    one(&storage, "alice", "create_list", json!({"id": "a1", "title": "alice"})).await;
    let first = noted().await;
    one(&storage, "alice", "add_note", json!({"id": "n1", "list_id": "a1", "title": "milk"})).await;
    assert_eq!(noted().await, first, "within the minute the client's row keeps its note");
    sqlx::query("UPDATE _engine_clients SET updated_at = now() - interval '2 minutes'")
        .execute(&db.pool)
        .await
        .unwrap();
    one(&storage, "alice", "add_note", json!({"id": "n2", "list_id": "a1", "title": "eggs"})).await;
    let fresh =
        rows(&db, "SELECT 1 FROM _engine_clients WHERE user_id = 'alice' AND updated_at > now() - interval '1 minute'");
    assert_eq!(fresh.await, 1, "an idle client is noted afresh");
    assert_eq!(last_mutation_id(&storage, "alice", client(1)).await, 3, "every push advanced the sequence");
}

/// POST `request` to `/sync/push` as `user`: the status and the body, or none when the request
/// got no answer.
async fn push_over_http(server: &TestServer, user: &str, request: &PushRequest) -> Option<(u16, Value)> {
    let sent = server
        .http
        .post(server.url("/sync/push"))
        .bearer_auth(TestServer::token(user))
        .json(request)
        .send()
        .await
        .ok()?;
    let status = sent.status().as_u16();
    Some((status, sent.json().await.unwrap_or(Value::Null)))
}

/// The error code of a problem answer.
fn problem_code(body: &Value) -> Value {
    body["code"].clone()
}

/// Two pushes of the lists `{user}-1` and `{user}-2` as `user`'s new client.
fn two_lists(user: &str) -> PushRequest {
    PushRequest {
        client_id: uuid::Uuid::new_v4(),
        mutations: vec![
            mutation(1, "create_list", json!({"id": format!("{user}-1"), "title": "one"})),
            mutation(2, "create_list", json!({"id": format!("{user}-2"), "title": "two"})),
        ],
    }
}

/// The list `{user}-1`, then a mutator that writes and panics, as `user`'s new client.
fn panicking(user: &str) -> PushRequest {
    PushRequest {
        client_id: uuid::Uuid::new_v4(),
        mutations: vec![
            mutation(1, "create_list", json!({"id": format!("{user}-1"), "title": "one"})),
            mutation(2, "write_then_panic", json!({"list_id": format!("{user}-half")})),
        ],
    }
}

/// Assert that `answer` is the panicking push's: `internal`.
fn internal(answer: Option<(u16, Value)>) {
    let (status, body) = answer.expect("the panicking push is answered");
    assert_eq!((status, problem_code(&body)), (500, json!(ErrorCode::Internal)), "{body}");
}

/// One round of `a_panicking_mutator_undoes_its_pushes_and_the_server_goes_on`: eight pushes
/// and a panicking one at once, each other push retried while it is answered `retry_later`.
/// How many were retried.
async fn panic_among_pushes(server: &Arc<TestServer>, round: usize) -> usize {
    let others: Vec<(String, PushRequest)> =
        (0..8).map(|i| format!("r{round}u{i}")).map(|user| (user.clone(), two_lists(&user))).collect();
    let mut tasks = Vec::new();
    for (user, request) in &others {
        let (server, user, request) = (server.clone(), user.clone(), request.clone());
        tasks.push(tokio::spawn(async move { push_over_http(&server, &user, &request).await }));
    }
    let crash = {
        let (server, user) = (server.clone(), format!("r{round}x"));
        tokio::spawn(async move { push_over_http(&server, &user, &panicking(&user)).await })
    };
    internal(crash.await.unwrap());
    let mut retried = 0;
    for ((user, request), task) in others.iter().zip(tasks) {
        let mut answer = task.await.unwrap().expect("each push is answered");
        for _ in 0..5 {
            if answer.0 != 503 {
                break;
            }
            assert_eq!(problem_code(&answer.1), json!(ErrorCode::RetryLater), "{}", answer.1);
            retried += 1;
            answer = push_over_http(server, user, request).await.expect("each push is answered");
        }
        let (status, body) = answer;
        assert_eq!(status, 200, "{body}");
        let results = body["results"].as_array().unwrap();
        let statuses: Vec<&str> = results.iter().map(|r| r["status"].as_str().unwrap()).collect();
        assert_eq!(statuses, ["applied", "applied"], "{body}");
    }
    retried
}

/// A mutator that panics (a bug in app code) among concurrent pushes: on SQLite the pushes that
/// wait for the writer together are one transaction (a group commit, `docs/design.md` §11),
/// which the panic undoes whole. The panicking push is answered `internal`; each other push is
/// applied, or answered `retry_later` when it shared the group, and applied when retried (rounds
/// run until one did, on SQLite). Nothing of an undone push is kept: not its rows, its records
/// nor its client's sequence. A lone panic leaves the file to other programs' writes at once (no
/// transaction left open on the writer), and later pushes apply.
#[tokio::test]
async fn a_panicking_mutator_undoes_its_pushes_and_the_server_goes_on() {
    let db = TestDb::new().await;
    // Places for the nine pushes of a round at once, so that they meet in groups.
    let store = db.store(engine::server::storage::StoreLimits::default()).readers(12);
    let server = Arc::new(TestServer::start(&db, |b| b.app(raw::app()).storage(store)).await);
    let mut rounds = 0;
    let mut retried = 0;
    while rounds < 20 && retried == 0 {
        retried += panic_among_pushes(&server, rounds).await;
        rounds += 1;
        if backend() == Backend::Postgres {
            break;
        }
    }
    eprintln!("{retried} pushes retried after sharing a panicking group, in {rounds} rounds");
    if backend() == Backend::Sqlite {
        assert!(retried > 0, "in {rounds} rounds no push shared the panicking one's group");
    }
    let kept = |sql: &'static str| rows(&db, sql);
    assert_eq!(
        kept("SELECT id FROM lists WHERE id LIKE 'r%u%'").await,
        16 * rounds as i64,
        "every other push applied, once"
    );
    assert_eq!(kept("SELECT id FROM lists WHERE id LIKE '%-half'").await, 0, "nothing of the panicking mutation");
    // On Postgres each mutation commits alone: the one before the panic is applied, recorded and
    // its client's sequence advanced (a retry is answered as its replay). On SQLite the push's
    // mutations are in its group's transaction, undone whole.
    let before_panic = match backend() {
        Backend::Postgres => rounds as i64,
        Backend::Sqlite => 0,
    };
    assert_eq!(kept("SELECT id FROM lists WHERE owner_id LIKE 'r%x'").await, before_panic);
    assert_eq!(kept("SELECT 1 FROM _engine_mutations WHERE user_id LIKE 'r%x'").await, before_panic);
    assert_eq!(kept("SELECT 1 FROM _engine_clients WHERE user_id LIKE 'r%x'").await, before_panic);

    // A lone panic: another program writes to the database at once, and the server goes on.
    internal(push_over_http(&server, "y", &panicking("y")).await);
    sqlx::query("UPDATE _engine_meta SET value = value WHERE key = 'schema_version'")
        .execute(&db.pool)
        .await
        .expect("no transaction is left open on the writer");
    assert_eq!(kept("SELECT id FROM lists WHERE owner_id = 'y'").await, before_panic.min(1));
    let (status, body) = push_over_http(&server, "z", &two_lists("z")).await.expect("answered");
    assert_eq!(status, 200, "{body}");
    assert_eq!(kept("SELECT id FROM lists WHERE owner_id = 'z'").await, 2, "a later push applies");
}
