//! The next path's assumed write permissions, on the notes app: the record statement confirms
//! them in its snapshot, and a refusal there undoes the mutation, which the checked path then
//! answers.

use std::sync::Arc;

use engine_kernel::wire::{MutationRequest, MutationStatus, PushRequest};
use engine_kernel::{Actor, Error as KernelError};
use serde_json::{Value, json};

use super::{Settled, execute};
use crate::mutation::{ASK_INSTEAD, Conn, UNCONFIRMED};
use crate::pg::test_db::TestDb;
use crate::storage::Storage;
use crate::storage::postgres::PostgresStorage;

fn block_on<F: std::future::Future>(test: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(test)
}

fn mutation(id: u64, name: &str, args: Value) -> MutationRequest {
    MutationRequest { mutation_id: id, client_mutation_id: uuid::Uuid::new_v4(), name: name.into(), args, hlc: None }
}

/// Alice's list `l`, shared with bob as a viewer and with carol as an editor.
async fn shared_list() -> (TestDb, PostgresStorage) {
    let db = TestDb::new().await;
    let storage = PostgresStorage::new(db.pool.clone(), Arc::new(example_notes::app()));
    storage.provision().await.unwrap();
    let mutations = vec![
        mutation(1, "create_list", json!({"id": "l", "title": "shared"})),
        mutation(2, "share_list", json!({"list_id": "l", "user_id": "bob", "role": "viewer"})),
        mutation(3, "share_list", json!({"list_id": "l", "user_id": "carol", "role": "editor"})),
    ];
    let pushed =
        storage.push(&Actor::new("alice", "alice"), &PushRequest { client_id: uuid::Uuid::new_v4(), mutations }).await;
    let pushed = pushed.unwrap();
    assert!(pushed.response.results.iter().all(|r| r.status == MutationStatus::Applied), "{:?}", pushed.response);
    // A share is an invitation: each member accepts it, from a device of its own.
    for member in ["bob", "carol"] {
        let mutations = vec![mutation(1, "accept_list", json!({"list_id": "l"}))];
        let request = PushRequest { client_id: uuid::Uuid::new_v4(), mutations };
        let accepted = storage.push(&Actor::new(member, member), &request).await.unwrap();
        assert_eq!(accepted.response.results[0].status, MutationStatus::Applied, "{:?}", accepted.response);
    }
    (db, storage)
}

/// A new client of `user`, its sequence at 0 (as the checked path leaves a first push).
async fn sequence(db: &TestDb, user: &str) -> uuid::Uuid {
    let client = uuid::Uuid::new_v4();
    sqlx::query("INSERT INTO _engine_clients (user_id, client_id) VALUES ($1, $2)")
        .bind(user)
        .bind(client)
        .execute(&db.pool)
        .await
        .unwrap();
    client
}

/// The next path's mutation transaction for `actor`, at clock reading `ms`.
fn next_path<'t>(
    conn: &'t mut sqlx::PgConnection,
    storage: &'t PostgresStorage,
    actor: &Actor,
    ms: u64,
) -> super::ServerTx<'t> {
    let hlc = engine_kernel::Hlc::new(ms, 0, actor.user_id.clone()).unwrap();
    super::ServerTx::new(Conn::Deferred(conn), storage.core(), actor.clone(), hlc, uuid::Uuid::new_v4())
        .assuming_write_permissions()
}

/// Carol's note `id` in list `l`.
fn carols_note(id: &str) -> example_notes::Note {
    example_notes::Note {
        id: id.into(),
        owner_id: "carol".into(),
        list_id: "l".into(),
        title: "t".into(),
        done: false,
        position: 1,
        body: engine_kernel::CrdtText::new(),
        image: None,
        deleted_at: None,
    }
}

/// Record the next path's mutation `tx` as mutation `id` of `client`, with what it carries;
/// with how many permissions it assumed and rows it required.
async fn record_next_path(
    tx: &mut super::ServerTx<'_>,
    actor: &Actor,
    client: uuid::Uuid,
    id: u64,
) -> (usize, usize, crate::error::Result<u64>) {
    let (assumed, required, pending) = (tx.take_assumed(), tx.take_required(), tx.take_pending());
    let carried = super::Carried { pending: pending.as_ref(), assumed: &assumed, required: &required };
    let add = mutation(id, "add_note", json!({}));
    let recorded = super::record(tx.conn().unwrap(), actor, client, &add, "applied", &json!({}), carried).await;
    (assumed.len(), required.len(), recorded)
}

/// Whether a record failed as one that found what the mutation assumed or required missing.
fn unconfirmed(recorded: crate::error::Result<u64>) -> bool {
    let err = recorded.expect_err("the record refuses");
    matches!(crate::mutation::to_kernel(err), KernelError::Forbidden(m) if m == UNCONFIRMED)
}

async fn notes(db: &TestDb) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM notes").fetch_one(&db.pool).await.unwrap()
}

#[test]
fn the_record_confirms_a_write_permission_the_next_path_assumed() {
    block_on(async {
        let (db, storage) = shared_list().await;
        let mut conn = storage.pool().acquire().await.unwrap();
        let add = |id| mutation(id, "add_note", json!({"list_id": "l", "title": "hello"}));

        // An editor's note: assumed, confirmed, applied by the next path's two statements.
        let carol = Actor::new("carol", "carol");
        let client = sequence(&db, "carol").await;
        let step = execute(storage.core(), Conn::Deferred(&mut conn), &carol, client, &add(1), true).await;
        assert!(matches!(step, Ok(Settled::Applied { .. })), "{:?}", step.err());
        assert_eq!(notes(&db).await, 1);

        // A viewer's: assumed too, and refused by the record, which undoes the insert with it.
        let bob = Actor::new("bob", "bob");
        let client = sequence(&db, "bob").await;
        let refused = execute(storage.core(), Conn::Deferred(&mut conn), &bob, client, &add(1), true).await;
        match refused {
            Err(KernelError::Forbidden(message)) => assert_eq!(message, UNCONFIRMED),
            other => panic!("the record refuses the viewer's note: {:?}", other.map(|_| ())),
        }
        assert_eq!(notes(&db).await, 1, "nothing of the refused mutation stays");
        let last: i64 = sqlx::query_scalar("SELECT last_mutation_id FROM _engine_clients WHERE client_id = $1")
            .bind(client)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(last, 0, "the refused record advanced no sequence");

        // A new list: the permission assumed for the list's row does not hold before the owner's
        // membership is written (the bucket is new), so the next path asks on its second try.
        let create = mutation(1, "create_list", json!({"id": "m", "title": "new"}));
        let fresh = sequence(&db, "carol").await;
        let first = execute(storage.core(), Conn::Deferred(&mut conn), &carol, fresh, &create, true).await;
        assert!(matches!(&first, Err(KernelError::Forbidden(m)) if m == ASK_INSTEAD), "{:?}", first.err());
        let second = execute(storage.core(), Conn::Deferred(&mut conn), &carol, fresh, &create, false).await;
        assert!(matches!(second, Ok(Settled::Applied { .. })), "{:?}", second.err());

        // Pushed, the checked path answers it: forbidden, in the rule's words.
        let pushed = storage.push(&bob, &PushRequest { client_id: client, mutations: vec![add(1)] }).await.unwrap();
        let result = &pushed.response.results[0];
        assert_eq!(result.status, MutationStatus::Rejected, "{result:?}");
        let error = result.error.as_ref().unwrap();
        assert!(error.detail.contains("`shared`") && error.detail.contains("notes"), "{error:?}");
        assert_eq!(notes(&db).await, 1);
        drop(conn);
        db.drop().await;
    });
}

#[test]
fn a_revocation_committed_before_the_record_refuses_the_write() {
    block_on(async {
        let (db, storage) = shared_list().await;
        // Carol is an editor when her mutation writes (the permission assumed), and a viewer
        // when its record runs: the record's snapshot decides.
        let carol = Actor::new("carol", "carol");
        let mut conn = storage.pool().acquire().await.unwrap();
        let mut tx = next_path(&mut conn, &storage, &carol, 1);
        let note = carols_note("n1");
        engine_kernel::MutatorCtx::new(&mut tx).insert(&note).await.unwrap();
        sqlx::query("UPDATE list_members SET role = 'viewer' WHERE user_id = 'carol'").execute(&db.pool).await.unwrap();
        let client = sequence(&db, "carol").await;
        let (assumed, _, recorded) = record_next_path(&mut tx, &carol, client, 1).await;
        assert_eq!(assumed, 1, "the note's permission was assumed, not asked");
        assert!(unconfirmed(recorded));
        assert_eq!(notes(&db).await, 0);
        drop(tx);

        // Now a viewer, she inserts and then reads: the read confirms the assumed permission
        // first, so the mutator learns nothing past the write it may not make; the next path
        // then asks instead.
        let mut tx = next_path(&mut conn, &storage, &carol, 2);
        let mut ctx = engine_kernel::MutatorCtx::new(&mut tx);
        ctx.insert(&note).await.unwrap();
        match ctx.get::<example_notes::List>(&"l".to_owned()).await {
            Err(KernelError::Forbidden(message)) => assert_eq!(message, ASK_INSTEAD),
            other => panic!("the read after the write is refused: {other:?}"),
        }
        drop(tx);
        assert_eq!(notes(&db).await, 0);
        drop(conn);
        db.drop().await;
    });
}

/// Another push has recorded `recorded` as mutation 2 of carol's client (after mutation 1) and
/// holds the client's sequence, uncommitted; `arriving` reaches the checked path meanwhile, waits
/// for the sequence's lock, and is answered once the other push commits.
async fn behind_a_push_that_recorded(recorded: &MutationRequest, arriving: &MutationRequest) -> (TestDb, Settled) {
    let (db, storage) = shared_list().await;
    let carol = Actor::new("carol", "carol");
    let client = uuid::Uuid::new_v4();
    let first = mutation(1, "add_note", json!({"list_id": "l", "title": "first"}));
    storage.push(&carol, &PushRequest { client_id: client, mutations: vec![first] }).await.unwrap();
    let mut other = db.pool.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO _engine_mutations (user_id, client_id, mutation_id, client_mutation_id, name, status, result)
         VALUES ('carol', $1, 2, $2, 'add_note', 'applied', '{\"serverId\": \"n-other\"}')",
    )
    .bind(client)
    .bind(recorded.client_mutation_id)
    .execute(&mut *other)
    .await
    .unwrap();
    sqlx::query("UPDATE _engine_clients SET last_mutation_id = 2 WHERE user_id = 'carol' AND client_id = $1")
        .bind(client)
        .execute(&mut *other)
        .await
        .unwrap();

    let checked = tokio::spawn({
        let (storage, carol, arriving) = (storage.clone(), carol.clone(), arriving.clone());
        async move {
            let mut conn = storage.pool().acquire().await.unwrap();
            super::apply_checked(storage.core(), &mut conn, &carol, client, &arriving).await
        }
    });
    loop {
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        // A task that ended without waiting fails in the caller.
        if waiting || checked.is_finished() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    other.commit().await.unwrap();
    let step = checked.await.unwrap().unwrap_or_else(|err| panic!("{err}"));
    (db, step)
}

/// Mutation 2 arriving as `arriving_id` behind the push that recorded it as 2 is answered from
/// that record and not applied again.
async fn answered_from_the_record(arriving_id: u64) {
    let add = mutation(2, "add_note", json!({"list_id": "l", "title": "once"}));
    let mut arriving = add.clone();
    arriving.mutation_id = arriving_id;
    let (db, step) = behind_a_push_that_recorded(&add, &arriving).await;
    match step {
        Settled::Answered { result, sequence } => {
            assert_eq!(sequence, arriving_id);
            assert_eq!(result.status, MutationStatus::Duplicate);
            assert_eq!(result.server_id.as_deref(), Some("n-other"), "answered from the record");
        }
        Settled::OutOfOrder { last_mutation_id } => panic!("told out of order at {last_mutation_id}: applied once"),
        _ => panic!("the mutation is answered as the recorded one"),
    }
    assert_eq!(notes(&db).await, 1, "not applied a second time");
    db.drop().await;
}

#[test]
fn the_checked_path_reads_the_records_after_the_lock_it_waited_for() {
    block_on(answered_from_the_record(2));
}

/// The same mutation under the next sequence number (a client that numbered it again) while the
/// push that recorded it holds the lock.
#[test]
fn a_mutation_renumbered_behind_the_push_that_recorded_it_is_answered_from_its_record() {
    block_on(answered_from_the_record(3));
}

/// A store of its own, of `sessions` sessions, in which carol has pushed note 1 from `client`;
/// with the moment the push ended.
async fn a_store_carol_pushed_to(
    db: &TestDb,
    sessions: u32,
    client: uuid::Uuid,
) -> (PostgresStorage, std::time::Instant) {
    let storage = crate::storage::postgres::postgres(db.url.clone())
        .max_connections(sessions)
        .connect(Arc::new(example_notes::app()))
        .await
        .unwrap();
    let first = carol_adds(&storage, client, 1).await.unwrap();
    assert_eq!(first.response.results[0].status, MutationStatus::Applied);
    (storage, std::time::Instant::now())
}

/// Carol pushes note `id` into list `l` from `client`.
async fn carol_adds(
    storage: &PostgresStorage,
    client: uuid::Uuid,
    id: u64,
) -> crate::error::Result<crate::push::Pushed> {
    carol_pushes(storage, client, vec![mutation(id, "add_note", json!({"list_id": "l", "title": "t"}))]).await
}

/// Carol pushes `mutations` from `client`.
async fn carol_pushes(
    storage: &PostgresStorage,
    client: uuid::Uuid,
    mutations: Vec<MutationRequest>,
) -> crate::error::Result<crate::push::Pushed> {
    storage.push(&Actor::new("carol", "carol"), &PushRequest { client_id: client, mutations }).await
}

/// With the session used at `used` lost, pushing note `id` fails as a request to retry, nothing
/// of it applied (unless a slow machine left the session idle long enough to be checked first,
/// and replaced); retried, it applies once, on a new session, the store then holding `id` notes.
async fn a_lost_session_fails_one_push(
    db: &TestDb,
    storage: &PostgresStorage,
    client: uuid::Uuid,
    used: std::time::Instant,
    id: u64,
) {
    let add = mutation(id, "add_note", json!({"list_id": "l", "title": "t"}));
    let checked = used.elapsed() > crate::pg::connect::CHECK_AFTER_IDLE;
    let carol = Actor::new("carol", "carol");
    let lost = storage.push(&carol, &PushRequest { client_id: client, mutations: vec![add.clone()] }).await;
    let failed = match lost {
        Err(err) => Some(err),
        Ok(pushed) => pushed.stopped,
    };
    match failed {
        Some(err) => assert_eq!(err.problem().status, 503, "{err}"),
        None => assert!(checked, "a session used a moment ago is lent unchecked, and its loss fails the push"),
    }
    if !checked {
        assert_eq!(notes(db).await, i64::try_from(id).unwrap() - 1);
    }
    let retried = storage.push(&carol, &PushRequest { client_id: client, mutations: vec![add] }).await.unwrap();
    let status = retried.response.results[0].status;
    assert!(matches!(status, MutationStatus::Applied | MutationStatus::Duplicate), "{:?}", retried.stopped);
    assert_eq!(notes(db).await, i64::try_from(id).unwrap());
}

#[test]
fn a_session_lost_while_pooled_fails_one_push_as_retryable_and_is_not_lent_again() {
    block_on(async {
        let (db, _) = shared_list().await;
        // The store's own pool, of one session (too few to keep one between pushes), lends it
        // unchecked when it was used a moment ago.
        let client = uuid::Uuid::new_v4();
        let (storage, used) = a_store_carol_pushed_to(&db, 1, client).await;

        // Its backend is cut while it waits in the pool.
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(storage.pool()).await.unwrap();
        // Back in the pool first (sqlx checks it as it takes it back, in a task of its own).
        while storage.pool().num_idle() == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        sqlx::query("SELECT pg_terminate_backend($1)").bind(pid).execute(&db.pool).await.unwrap();
        loop {
            let gone: bool = sqlx::query_scalar("SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)")
                .bind(pid)
                .fetch_one(&db.pool)
                .await
                .unwrap();
            if gone {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        a_lost_session_fails_one_push(&db, &storage, client, used, 2).await;
        storage.pool().close().await;
        db.drop().await;
    });
}

/// A client's records grow old in the order of their ids, whenever their transactions began, so
/// collection never keeps a record while removing a later one of the same client: a replay of
/// the later one would be told its id was another mutation's, and apply a second time.
#[test]
fn a_record_made_by_a_transaction_begun_earlier_is_no_older_than_its_predecessor() {
    block_on(async {
        let (db, storage) = shared_list().await;
        let carol = Actor::new("carol", "carol");
        let client = uuid::Uuid::new_v4();
        let add = |id| mutation(id, "add_note", json!({"list_id": "l", "title": "t"}));
        let (first, second) = (add(1), add(2));

        // The transaction that records mutation 2 begins first (as the checked path's does before
        // it waits for the sequence's lock); mutation 1 is applied and recorded meanwhile.
        let mut late = db.pool.begin().await.unwrap();
        let began: chrono::DateTime<chrono::Utc> =
            sqlx::query_scalar("SELECT now()").fetch_one(&mut *late).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let pushed = storage.push(&carol, &PushRequest { client_id: client, mutations: vec![first.clone()] }).await;
        assert_eq!(pushed.unwrap().response.results[0].status, MutationStatus::Applied);
        super::record(&mut late, &carol, client, &second, "applied", &json!({"serverId": "n2"}), Default::default())
            .await
            .unwrap();
        late.commit().await.unwrap();

        let stamps: Vec<chrono::DateTime<chrono::Utc>> =
            sqlx::query_scalar("SELECT applied_at FROM _engine_mutations WHERE client_id = $1 ORDER BY mutation_id")
                .bind(client)
                .fetch_all(&db.pool)
                .await
                .unwrap();
        assert!(stamps[0] > began, "{stamps:?} after {began}");
        assert!(stamps[1] >= stamps[0], "record 2 is no older than record 1: {stamps:?}");

        // Collection with its cutoff between the second transaction's start and the first
        // record leaves both records.
        let cutoff = began + (stamps[0] - began) / 2;
        let keep = (chrono::Utc::now() - cutoff).to_std().unwrap();
        let retention = crate::storage::Retention::default().mutations(keep);
        storage.collect_garbage(&retention).await.unwrap();
        let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM _engine_mutations WHERE client_id = $1")
            .bind(client)
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(kept, 2, "neither record is older than the cutoff");

        // Replayed, mutation 2 is answered from its record, not applied again.
        let replay = storage.push(&carol, &PushRequest { client_id: client, mutations: vec![second] }).await.unwrap();
        assert!(replay.stopped.is_none(), "{:?}", replay.stopped);
        assert_eq!(replay.response.results[0].status, MutationStatus::Duplicate);
        assert_eq!(replay.response.results[0].server_id.as_deref(), Some("n2"));
        db.drop().await;
    });
}

/// A push hands its session on to the next one without giving it back to the pool (no round
/// trip to check it); a session lost meanwhile fails one push as retryable and is given back to
/// the pool, which drops it; closing the pool empties the lane.
#[test]
fn a_session_lost_in_the_push_lane_fails_one_push_as_retryable_and_is_not_lent_again() {
    block_on(async {
        let (db, _) = shared_list().await;
        let client = uuid::Uuid::new_v4();
        let (storage, _) = a_store_carol_pushed_to(&db, 4, client).await;
        // Given back, the pool would hold it idle by now (its check runs in a task of its own).
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert_eq!((storage.pool().size(), storage.pool().num_idle()), (1, 0), "the session is kept in the lane");
        let again = carol_adds(&storage, client, 2).await.unwrap();
        assert_eq!(again.response.results[0].status, MutationStatus::Applied);
        let used = std::time::Instant::now();
        assert_eq!(storage.pool().size(), 1, "the next push took the kept session");

        // Its backend is cut while it waits in the lane.
        let cut: i64 = sqlx::query_scalar(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
        )
        .fetch_one(&db.pool)
        .await
        .unwrap();
        assert!(cut >= 1);
        a_lost_session_fails_one_push(&db, &storage, client, used, 3).await;

        // Closing the pool waits for every session; the lane gives its own back.
        tokio::time::timeout(std::time::Duration::from_secs(60), storage.pool().close())
            .await
            .expect("closing the pool is not held up by the lane");
        db.drop().await;
    });
}

/// A row a mutation requires is not read on the next path but confirmed by its record: a list
/// gone by then undoes the note, and the checked path answers the mutation as reading it would.
#[test]
fn a_required_row_is_confirmed_by_the_record_and_answered_by_the_checked_path_when_missing() {
    block_on(async {
        let (db, storage) = shared_list().await;
        let carol = Actor::new("carol", "carol");
        let mut conn = storage.pool().acquire().await.unwrap();
        let missing = || KernelError::mutator_failed("no list");

        // Required and not read: the list vanishes before the record, which refuses the note.
        let client = sequence(&db, "carol").await;
        let mut gone = db.pool.begin().await.unwrap();
        sqlx::query("DELETE FROM lists WHERE id = 'l'").execute(&mut *gone).await.unwrap();
        for (id, note) in [(1, "n1"), (2, "n2")] {
            let mut tx = next_path(&mut conn, &storage, &carol, id);
            let mut ctx = engine_kernel::MutatorCtx::new(&mut tx);
            ctx.require::<example_notes::List>(&"l".to_owned(), missing()).await.unwrap();
            ctx.insert(&carols_note(note)).await.unwrap();
            let (_, required, recorded) = record_next_path(&mut tx, &carol, client, id).await;
            assert_eq!(required, 1, "the list was required without reading it");
            if id == 1 {
                assert!(recorded.is_ok(), "the deletion is not committed yet: the list is there");
                drop(tx);
                gone = {
                    gone.commit().await.unwrap();
                    db.pool.begin().await.unwrap()
                };
            } else {
                assert!(unconfirmed(recorded), "the record refuses: the list is gone");
            }
        }
        drop(gone);
        assert_eq!(notes(&db).await, 1, "only the note recorded while the list was there");
        drop(conn);

        // Pushed: into a missing list, and by a user who cannot read the list, the mutator's own
        // refusal, from the checked path; nothing written.
        let dave = Actor::new("dave", "dave");
        for (actor, list) in [(&carol, "l"), (&dave, "l"), (&carol, "nowhere")] {
            let add = mutation(1, "add_note", json!({"list_id": list, "title": "t"}));
            let pushed = storage
                .push(actor, &PushRequest { client_id: uuid::Uuid::new_v4(), mutations: vec![add] })
                .await
                .unwrap();
            let result = &pushed.response.results[0];
            assert_eq!(result.status, MutationStatus::Rejected, "{result:?}");
            assert_eq!(result.error.as_ref().unwrap().detail, format!("no list `{list}`"));
        }
        assert_eq!(notes(&db).await, 1);
        db.drop().await;
    });
}

/// A mutation that requires a row and then writes is asked again before the write: its own
/// write could otherwise be what the record finds.
#[test]
fn a_required_row_is_confirmed_before_the_mutation_writes() {
    block_on(async {
        let (db, storage) = shared_list().await;
        let alice = Actor::new("alice", "alice");
        let mut conn = storage.pool().acquire().await.unwrap();
        let mut tx = next_path(&mut conn, &storage, &alice, 1);
        let mut ctx = engine_kernel::MutatorCtx::new(&mut tx);
        // Erin's membership, which is not there, is required, then made, then another write is
        // sent: the membership goes first, and the record would find it.
        let erin = ("l".to_owned(), "erin".to_owned());
        let missing = KernelError::mutator_failed("no membership");
        ctx.require::<example_notes::ListMember>(&erin, missing).await.unwrap();
        let member = example_notes::ListMember {
            list_id: "l".into(),
            user_id: "erin".into(),
            owner_id: "alice".into(),
            role: "viewer".into(),
            accepted: false,
            invited_by: "alice".into(),
            title: "l".into(),
        };
        // Asked at the membership's insert (an invitation's count is read before it is written)
        // or at the next write, never past it.
        let asked = match ctx.insert(&member).await {
            Ok(()) => {
                let renamed = example_notes::List::title.set("renamed".to_owned());
                ctx.update::<example_notes::List>(&"l".to_owned(), [renamed]).await.map(|_| ())
            }
            refused => refused,
        };
        match asked {
            Err(KernelError::Forbidden(message)) => assert_eq!(message, ASK_INSTEAD),
            other => panic!("the required membership is asked for before the mutation's writes: {other:?}"),
        }
        drop(tx);
        let members: i64 = sqlx::query_scalar("SELECT count(*) FROM list_members WHERE user_id = 'erin'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
        assert_eq!(members, 0);
        drop(conn);
        db.drop().await;
    });
}

/// A mutation sent again under the next number (answered from its record) moves its record to
/// that number: retention, which removes a client's oldest records first, never removes it
/// while keeping the records numbered between, and a replay under the new number is answered.
#[test]
fn a_renumbered_mutation_keeps_its_record_through_retention() {
    block_on(async {
        let (db, storage) = shared_list().await;
        let client = uuid::Uuid::new_v4();
        let push = async |mutations| carol_pushes(&storage, client, mutations).await.unwrap();
        let add = |id| mutation(id, "add_note", json!({"list_id": "l", "title": "t"}));
        let (first, second) = (add(1), add(2));
        push(vec![first.clone(), second]).await;
        let mut again = first.clone();
        again.mutation_id = 3;
        let answered = push(vec![again.clone()]).await;
        assert_eq!(answered.response.results[0].status, MutationStatus::Duplicate);
        assert_eq!(answered.response.last_mutation_id, 3);

        // Number 1 is free of records now, yet not collected: another mutation under it (a
        // copied client store) is told it is behind, not that it was applied.
        let copied = push(vec![add(1)]).await;
        assert!(
            matches!(copied.stopped, Some(crate::error::Error::MutationOutOfOrder { last_mutation_id: 3, got: 1 })),
            "{:?}",
            copied.stopped
        );
        assert!(copied.response.results.is_empty());

        // Mutation 1's record, wherever it is, grows old; 2's is kept.
        sqlx::query("UPDATE _engine_mutations SET applied_at = now() - interval '2 days' WHERE client_id = $1 AND mutation_id = 1")
            .bind(client)
            .execute(&db.pool)
            .await
            .unwrap();
        let day = std::time::Duration::from_secs(24 * 3600);
        storage.collect_garbage(&crate::storage::Retention::default().mutations(day)).await.unwrap();

        let replay = push(vec![again]).await;
        assert!(replay.stopped.is_none(), "answered, not told out of order: {:?}", replay.stopped);
        assert_eq!(replay.response.results[0].status, MutationStatus::Duplicate);
        assert!(replay.response.results[0].server_id.is_some(), "from its record");
        assert_eq!(notes(&db).await, 2, "applied once");
        db.drop().await;
    });
}

/// A client from before collection noted how far it went (`collected_to` null) is judged by its
/// first kept record: a replay below it was collected, a number at or above it with another
/// mutation's record is another mutation's.
#[test]
fn a_client_without_a_collection_mark_is_judged_by_its_first_kept_record() {
    block_on(async {
        let (db, storage) = shared_list().await;
        let client = uuid::Uuid::new_v4();
        let add = |id| mutation(id, "add_note", json!({"list_id": "l", "title": "t"}));
        let (first, second) = (add(1), add(2));
        let pushed = carol_pushes(&storage, client, vec![first.clone(), second]).await.unwrap();
        assert_eq!(pushed.response.last_mutation_id, 2);
        for statement in [
            "UPDATE _engine_clients SET collected_to = NULL WHERE client_id = $1",
            "DELETE FROM _engine_mutations WHERE client_id = $1 AND mutation_id = 1",
        ] {
            sqlx::query(statement).bind(client).execute(&db.pool).await.unwrap();
        }

        let replay = carol_pushes(&storage, client, vec![first]).await.unwrap();
        assert!(replay.stopped.is_none(), "{:?}", replay.stopped);
        let result = &replay.response.results[0];
        assert_eq!((result.status, result.server_id.as_ref()), (MutationStatus::Duplicate, None), "collected");

        let copied = carol_pushes(&storage, client, vec![add(2)]).await.unwrap();
        assert!(
            matches!(copied.stopped, Some(crate::error::Error::MutationOutOfOrder { last_mutation_id: 2, got: 2 })),
            "{:?}",
            copied.stopped
        );
        assert_eq!(notes(&db).await, 2);
        db.drop().await;
    });
}
