//! Push on SQLite (`docs/design.md` §11). The pushes waiting for the writer are applied by one
//! task in one `BEGIN IMMEDIATE` transaction, a *group commit*, and answered once it has
//! committed: a commit's fsync is shared by the group, and a push answered `applied` is on disk.
//! Each mutation is its own savepoint in it (`SAVEPOINT mutation`, sent with the first statement
//! of the mutation, released by the next mutation's first batch or by the commit), so a
//! mutation that fails is undone alone. The group's first batch begins the transaction too: a
//! push alone costs three hand-overs to the connection's thread, not four.
//!
//! The writer writes alone, so the client's sequence needs no lock: it is read and decided by
//! `sequence.rs` as on Postgres' checked path. The mutator runs on the same authorized
//! transaction ([`ServerTx`] on SQLite), first with write permissions assumed (as on Postgres'
//! next path); its record, sent in one batch of statements with the mutation's last insert and
//! the confirmation of what it assumed, advances the sequence. A deterministic failure is
//! recorded in its savepoint once the mutation is undone, and advances the sequence; a transient
//! one records nothing and stops the push. A failure that may have ended the group's transaction
//! (an undo that finds no savepoint, the commit's own) answers every push of the group as
//! transient: none of it is on disk.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use engine_kernel::wire::{MutationRequest, PushRequest};
use engine_kernel::{Actor, App, Error as KernelError};
use engine_sqlite::Sql;
use futures_util::FutureExt;
use serde_json::{Value, json};
use sqlx::SqliteConnection;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::sequence::{CollectedRecords, Decision, Sequence};
use super::{
    Pushed, Settled, collected_duplicate, log_rejection, recorded_name, rejection, run, stopping, stored_result,
    to_i64, to_u64,
};
use crate::core::Shared;
use crate::error::{Error, RETRY_AFTER, Result};
use crate::limits::FairShare;
use crate::mutation::merge::MERGE_GATE;
use crate::mutation::{ASK_INSTEAD, Assumed, Conn, PendingInsert, Required, to_kernel};
use crate::sqlite::{Db, now_ms};

/// The pushes one group takes at most: the rest wait for the next, so that the writer's lock
/// is given up between groups (to a job's claim, say) however many pushes keep coming.
const GROUP: usize = 64;

/// The pushes of a server that may wait for the writer at once, each holding a place of its own
/// beside the readers' (`Storage::sharing`): a group gathers up to this many, and a push whose
/// turn comes waits for one such group, not for every push queued.
pub(crate) const QUEUED: usize = 16;

/// The pushes waiting for the writer, and whether a task is applying them.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    waiting: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    pushes: Vec<Queued>,
    /// A task applies the waiting pushes: a push that finds it so only waits for its answer.
    writing: bool,
}

struct Queued {
    actor: Actor,
    request: PushRequest,
    answer: oneshot::Sender<Result<Pushed>>,
    /// The request's span: what the group's task logs of the push carries its fields.
    span: tracing::Span,
    /// The request's merge gate and actor ([`MERGE_GATE`]), which the group's task lends the
    /// push's mutators.
    gate: Option<(Arc<FairShare>, String)>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gated = self.gate.is_some();
        f.debug_struct("Queued")
            .field("actor", &self.actor)
            .field("request", &self.request)
            .field("gated", &gated)
            .finish()
    }
}

impl Queue {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Apply the request's mutations in order, each in its own savepoint of the group's transaction;
/// answered once that has committed.
pub(crate) async fn push(
    db: &Arc<Db>,
    core: &Arc<Shared>,
    queue: &Arc<Queue>,
    actor: &Actor,
    request: &PushRequest,
) -> Result<Pushed> {
    if request.mutations.len() > core.limits.mutations_per_push {
        return Err(Error::TooManyMutations { limit: core.limits.mutations_per_push });
    }
    let (answer, answered) = oneshot::channel();
    let start = {
        let mut waiting = queue.waiting();
        let (span, gate) = (tracing::Span::current(), MERGE_GATE.try_with(Clone::clone).ok());
        waiting.pushes.push(Queued { actor: actor.clone(), request: request.clone(), answer, span, gate });
        !std::mem::replace(&mut waiting.writing, true)
    };
    // A task of its own: a request given up does not stop a group that holds other pushes.
    if start {
        tokio::spawn(write_groups(db.clone(), core.clone(), queue.clone()));
    }
    answered.await.unwrap_or_else(|_| Err(Error::internal("the push's group ended without an answer")))
}

/// Apply the waiting pushes, a group at a time, until none waits.
async fn write_groups(db: Arc<Db>, core: Arc<Shared>, queue: Arc<Queue>) {
    let _writing = Writing(&queue);
    loop {
        let mut writer = db.writer().await;
        // Taken once the writer is ours: the pushes that came while it was busy are one group.
        let group: Vec<Queued> = {
            let mut waiting = queue.waiting();
            if waiting.pushes.is_empty() {
                waiting.writing = false;
                return;
            }
            let taken = waiting.pushes.len().min(GROUP);
            waiting.pushes.drain(..taken).collect()
        };
        let answers = write_group(&core, &mut writer, &group).await;
        drop(writer);
        for (queued, answer) in group.into_iter().zip(answers) {
            // A push whose request was given up is answered to no one.
            let _ = queued.answer.send(answer);
        }
    }
}

/// Marks the queue as without a task when the task ends by a panic, and drops the pushes that
/// wait (each is answered by an error) rather than leaving them to a task that is gone.
struct Writing<'a>(&'a Queue);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut waiting = self.0.waiting();
            waiting.pushes.clear();
            waiting.writing = false;
        }
    }
}

/// The group's transaction can no longer be trusted to hold its pushes: every push of the group
/// is answered with `cause`, as transient.
struct Broken(Error);

/// The push a mutator of which panicked (its index in the group): the group is undone, that
/// push answered an internal error and the others `retry_later`.
struct Panicked(usize);

/// Where the group's transaction stands when a mutation's first batch is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stand {
    /// Not begun: the batch begins it.
    Unbegun,
    /// Begun, with no savepoint open.
    Begun,
    /// A savepoint of a mutation left to be released by the next batch, or by the commit.
    Open,
}

impl Stand {
    /// How the mutation's first batch opens its savepoint.
    fn opening(self) -> Opening {
        match self {
            Stand::Unbegun => Opening::BeginAndOpen,
            Stand::Begun => Opening::Open,
            Stand::Open => Opening::ReleaseAndOpen,
        }
    }
}

/// The answers to the pushes of `group`, applied in one transaction on `conn` and committed.
async fn write_group(core: &Shared, conn: &mut SqliteConnection, group: &[Queued]) -> Vec<Result<Pushed>> {
    let applied = async {
        let mut answers = Vec::with_capacity(group.len());
        let mut stand = Stand::Unbegun;
        for (i, queued) in group.iter().enumerate() {
            let pushed =
                push_one(core, conn, &mut stand, &queued.actor, &queued.request).instrument(queued.span.clone());
            let pushed = match queued.gate.clone() {
                Some(gate) => AssertUnwindSafe(MERGE_GATE.scope(gate, pushed)).catch_unwind().await,
                None => AssertUnwindSafe(pushed).catch_unwind().await,
            };
            answers.push(Ok(pushed.map_err(|_| Err(Panicked(i)))?.map_err(Ok)?));
        }
        // Pushes of no mutation alone begin nothing.
        if stand != Stand::Unbegun {
            run_sql(conn, "COMMIT").await.map_err(|cause| Ok(Broken(cause)))?;
        }
        Ok(answers)
    };
    match applied.await {
        Ok(answers) => answers,
        Err(Err(Panicked(index))) => {
            // App code panicked inside the group's transaction: what it left there is undone
            // with the rest, and the writer is given back with no transaction open.
            let _ = run_sql(conn, "ROLLBACK").await;
            tracing::error!(pushes = group.len(), "a mutator panicked; its group of pushes was undone");
            let detail = "another push of the same group failed; nothing of this one was committed".to_owned();
            (0..group.len())
                .map(|i| match i == index {
                    true => Err(Error::internal("a mutator panicked")),
                    false => Err(Error::RetryLater { retry_after: RETRY_AFTER, detail: detail.clone() }),
                })
                .collect()
        }
        Err(Ok(Broken(cause))) => {
            // Nothing of the group is committed; the transaction may be gone already.
            let _ = run_sql(conn, "ROLLBACK").await;
            tracing::warn!(error = ?crate::error::Chain(&cause), pushes = group.len(), "a group of pushes was undone");
            let detail = format!("the group of pushes was undone: {cause}");
            group.iter().map(|_| Err(Error::RetryLater { retry_after: RETRY_AFTER, detail: detail.clone() })).collect()
        }
    }
}

/// Begin the group's transaction alone, after the first batch, which begins it, failed. A
/// transaction left open (by a task that panicked, or by the failed batch) is undone first.
/// Nothing of the group was written before that batch.
async fn begin_again(conn: &mut SqliteConnection) -> Result<()> {
    let _ = run_sql(conn, "ROLLBACK").await;
    run_sql(conn, "BEGIN IMMEDIATE").await
}

/// Run `sql` (no binds), prepared and kept by the connection.
async fn run_sql(conn: &mut SqliteConnection, sql: &'static str) -> Result<()> {
    sqlx::query(sql).execute(&mut *conn).await?;
    Ok(())
}

/// Undo the mutation's savepoint and end it. Failing, the group's transaction is gone (SQLite
/// ends it at some failures, `SQLITE_FULL` and `SQLITE_IOERR` among them).
async fn undo(conn: &mut SqliteConnection) -> std::result::Result<(), Broken> {
    run_sql(conn, "ROLLBACK TO mutation; RELEASE mutation").await.map_err(Broken)
}

/// Apply one push's mutations in order, in the group's transaction.
async fn push_one(
    core: &Shared,
    conn: &mut SqliteConnection,
    stand: &mut Stand,
    actor: &Actor,
    request: &PushRequest,
) -> std::result::Result<Pushed, Broken> {
    let mut pushed = Pushed::default();
    let mut last = None;
    for mutation in &request.mutations {
        let mut applied = apply(core, conn, stand, actor, request.client_id, mutation).await;
        if applied.is_err() && *stand == Stand::Unbegun {
            // The batch beginning the group's transaction failed before the mutation ran.
            begin_again(conn).await.map_err(Broken)?;
            *stand = Stand::Begun;
            applied = apply(core, conn, stand, actor, request.client_id, mutation).await;
        }
        match applied {
            Ok(Settled::Applied { result, affected, membership_changes, sequence, commit_xid }) => {
                last = Some(sequence);
                pushed.commit_xid = pushed.commit_xid.max(commit_xid);
                pushed.affected.extend(affected);
                pushed.membership_changes.extend(membership_changes);
                pushed.response.results.push(result);
            }
            Ok(Settled::Answered { result, sequence }) => {
                last = Some(sequence);
                pushed.response.results.push(result);
            }
            Ok(Settled::OutOfOrder { last_mutation_id }) => {
                last = Some(last_mutation_id);
                pushed.stopped = Some(Error::MutationOutOfOrder { last_mutation_id, got: mutation.mutation_id });
                break;
            }
            Err(err) => {
                undo(conn).await?;
                pushed.stopped = Some(err);
                break;
            }
        }
    }
    pushed.response.last_mutation_id = match last {
        Some(last) => last,
        None => read_sequence(conn, &actor.user_id, request.client_id).await.map_err(Broken)?.map_or(0, |s| s.0),
    };
    Ok(pushed)
}

/// The client's last mutation id and how far its records were collected, when it has pushed.
async fn read_sequence(conn: &mut SqliteConnection, user: &str, client: uuid::Uuid) -> Result<Option<(u64, u64)>> {
    let row: Option<(i64, Option<i64>)> = sqlx::query_as(
        "SELECT last_mutation_id, collected_to FROM _engine_clients WHERE user_id = ? AND client_id = ?",
    )
    .bind(user)
    .bind(client.to_string())
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|(last, collected)| (to_u64(last), collected.map_or(0, to_u64))))
}

/// How a mutation's first batch stands to its savepoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Opening {
    /// Within the mutation's savepoint, begun before.
    Within,
    /// Begin the group's transaction, then the mutation's savepoint.
    BeginAndOpen,
    /// Begin the mutation's savepoint.
    Open,
    /// End the savepoint an earlier mutation left open, then begin the mutation's.
    ReleaseAndOpen,
}

/// The client's sequence (created at 0 on its first push), with whether mutation `cmid` was
/// recorded: one statement, whose `DO UPDATE` writes nothing new but makes an existing row
/// answer `RETURNING` too. The mutation's savepoint is begun in the same batch, as `opening`
/// says.
async fn read_or_start(
    conn: &mut SqliteConnection,
    user: &str,
    client: uuid::Uuid,
    cmid: uuid::Uuid,
    opening: Opening,
) -> Result<Sequence> {
    macro_rules! read_or_start {
        () => {
            "INSERT INTO _engine_clients (user_id, client_id, created_at, updated_at) VALUES (?, ?, ?, ?)
             ON CONFLICT (user_id, client_id) DO UPDATE SET user_id = excluded.user_id
             RETURNING last_mutation_id, collected_to, EXISTS (
               SELECT 1 FROM _engine_mutations WHERE user_id = ? AND client_id = ? AND client_mutation_id = ?)"
        };
    }
    let sql = match opening {
        Opening::Within => read_or_start!(),
        Opening::BeginAndOpen => concat!("BEGIN IMMEDIATE; SAVEPOINT mutation; ", read_or_start!()),
        Opening::Open => concat!("SAVEPOINT mutation; ", read_or_start!()),
        Opening::ReleaseAndOpen => concat!("RELEASE mutation; SAVEPOINT mutation; ", read_or_start!()),
    };
    let now = now_ms();
    let client = client.to_string();
    // Every statement of the batch runs only when every row is asked for.
    let rows: Vec<(i64, Option<i64>, bool)> = sqlx::query_as(sql)
        .bind(user)
        .bind(&client)
        .bind(now)
        .bind(now)
        .bind(user)
        .bind(&client)
        .bind(cmid.to_string())
        .fetch_all(&mut *conn)
        .await?;
    let (last, collected, seen) = *rows.last().ok_or_else(|| Error::internal("the client's sequence was not read"))?;
    Ok(Sequence { last: to_u64(last), seen, collected: CollectedRecords::UpTo(collected.map_or(0, to_u64)) })
}

/// The recorded outcome of this mutation (by sequence number, or by its client id under another
/// number), as a replay answers it.
async fn recorded(
    conn: &mut SqliteConnection,
    user: &str,
    client: uuid::Uuid,
    mutation: &MutationRequest,
) -> Result<Option<super::MutationResult>> {
    let cmid = mutation.client_mutation_id.to_string();
    let row: Option<(String, String, String)> = sqlx::query_as(
        "SELECT client_mutation_id, status, result FROM _engine_mutations
         WHERE user_id = ? AND client_id = ? AND (mutation_id = ? OR client_mutation_id = ?)
         ORDER BY (client_mutation_id = ?) DESC LIMIT 1",
    )
    .bind(user)
    .bind(client.to_string())
    .bind(to_i64(mutation.mutation_id)?)
    .bind(&cmid)
    .bind(&cmid)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|(recorded_cmid, status, result)| {
        if recorded_cmid == cmid {
            stored_result(mutation, &status, &serde_json::from_str(&result).unwrap_or(Value::Null))
        } else {
            // The sequence number was used by another mutation: this one was never applied.
            rejection(
                mutation,
                &KernelError::validation(format!(
                    "mutation id {} was already used by mutation {recorded_cmid}",
                    mutation.mutation_id
                )),
            )
        }
    }))
}

/// What a mutation's record carries beside the record: its last insert, if one still waits,
/// and the write permissions it assumed and the rows it required without reading them.
#[derive(Default)]
struct Carried<'a> {
    pending: Option<&'a PendingInsert>,
    assumed: &'a [Assumed],
    required: &'a [Required],
}

/// Record a mutation's outcome and advance the client's sequence to it, after the mutation's
/// insert still waiting, in one batch of statements: each of them a round trip to the
/// connection's thread otherwise. The mutation's savepoint is left open: ended in the batch, it
/// would be ended too where the record is not made and the mutation is to be undone. The counter after it. The assumed
/// permissions and required rows are the condition of the insert and of the sequence's advance;
/// where they do not hold, neither is made and nothing is recorded: the mutation is to be
/// undone and asked again ([`ASK_INSTEAD`]). Asked before the insert, the condition cannot see
/// it; asked again by the advance, it sees the same rows when the insert was not made.
async fn record(
    conn: &mut SqliteConnection,
    app: &App,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    (status, result): (&str, &Value),
    carried: Carried<'_>,
) -> Result<u64> {
    let user = actor.user_id.as_str();
    let (id, now, client) = (to_i64(mutation.mutation_id)?, now_ms(), client.to_string());
    let assuming = !carried.assumed.is_empty() || !carried.required.is_empty();
    let confirm = |sql: &mut Sql| -> Result<()> {
        Assumed::push_all_on_sqlite(carried.assumed, sql, app, actor)?;
        sql.push(" AND ");
        Required::push_all_on_sqlite(carried.required, sql, app, actor)
    };
    let condition = assuming.then_some(&confirm as &dyn Fn(&mut Sql) -> Result<()>);
    let mut sql = Sql::new("");
    if let Some(pending) = carried.pending {
        pending.push_on_sqlite(&mut sql, condition)?;
        sql.push("; ");
    }
    // The counter is read after the insert's stamp advanced it. A record is stamped no earlier
    // than its predecessor, so records grow old in id order.
    sql.push("UPDATE _engine_clients SET last_mutation_id = ").push_bind(id);
    sql.push(", last_seq = (SELECT seq FROM _engine_seq WHERE id = 1), recorded_at = max(").push_bind(now);
    sql.push(", recorded_at), updated_at = ").push_bind(now);
    sql.push(" WHERE user_id = ").push_bind(user).push(" AND client_id = ").push_bind(client.clone());
    if let Some(condition) = condition {
        sql.push(" AND ");
        condition(&mut sql)?;
    }
    sql.push(
        "; INSERT INTO _engine_mutations (user_id, client_id, mutation_id, client_mutation_id, name, status, result, seq, applied_at)
         SELECT user_id, client_id, last_mutation_id, ",
    );
    sql.push_bind(mutation.client_mutation_id.to_string()).push(", ").push_bind(recorded_name(&mutation.name));
    sql.push(", ").push_bind(status).push(", ").push_bind(result.to_string());
    sql.push(", last_seq, recorded_at FROM _engine_clients WHERE user_id = ").push_bind(user);
    sql.push(" AND client_id = ").push_bind(client).push(" AND last_mutation_id = ").push_bind(id);
    sql.push(" RETURNING seq");
    // Every statement of the batch runs only when every row is asked for (`fetch_one` would
    // stop the batch at its first row).
    let rows = sql.build_query_scalar::<i64>().fetch_all(&mut *conn).await?;
    match rows.last() {
        Some(counter) => Ok(to_u64(*counter)),
        None if assuming => Err(KernelError::forbidden(ASK_INSTEAD).into()),
        None => Err(Error::internal("the mutation's record was not written")),
    }
}

/// Apply `mutation` in a savepoint of its own, which the first batch begins (ending the one an
/// earlier mutation left open, or beginning the group's transaction, as `stand` says). A
/// recorded mutation leaves its savepoint open; one that failed transiently is left for the
/// caller to undo. Where the first batch fails, `stand` is left as it was.
async fn apply(
    core: &Shared,
    conn: &mut SqliteConnection,
    stand: &mut Stand,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
) -> Result<Settled> {
    let user = actor.user_id.as_str();
    let sequence = read_or_start(conn, user, client, mutation.client_mutation_id, stand.opening()).await;
    if *stand != Stand::Unbegun || sequence.is_ok() {
        *stand = Stand::Begun;
    }
    let sequence = sequence?;
    let last = sequence.last;
    match sequence.decide(mutation.mutation_id) {
        Decision::CollectedDuplicate => {
            run_sql(conn, "RELEASE mutation").await?;
            return Ok(Settled::Answered { result: collected_duplicate(mutation), sequence: last });
        }
        Decision::OutOfOrder => {
            run_sql(conn, "ROLLBACK TO mutation; RELEASE mutation").await?;
            return Ok(Settled::OutOfOrder { last_mutation_id: last });
        }
        Decision::Replay => {
            let answer = recorded(conn, user, client, mutation).await?;
            run_sql(conn, "RELEASE mutation").await?;
            return Ok(Settled::Answered {
                result: answer.unwrap_or_else(|| collected_duplicate(mutation)),
                sequence: last,
            });
        }
        Decision::Renumber => {
            let result = recorded(conn, user, client, mutation).await?.unwrap_or_else(|| collected_duplicate(mutation));
            renumber(conn, user, client, mutation, &sequence).await?;
            run_sql(conn, "RELEASE mutation").await?;
            return Ok(Settled::Answered { result, sequence: mutation.mutation_id });
        }
        Decision::Apply => {}
    }
    // Write permissions assumed first, as on Postgres' next path; a mutation that fails so,
    // for whatever reason, is undone and runs again, asking.
    let executed = match execute(core, conn, actor, client, mutation, true).await {
        Ok(settled) => Ok(settled),
        Err(err) => {
            tracing::debug!(mutation = %mutation.name, error = ?crate::error::Chain(&err), "asking instead");
            run_sql(conn, "ROLLBACK TO mutation").await?;
            // The client's first push made its sequence in the savepoint undone.
            read_or_start(conn, user, client, mutation.client_mutation_id, Opening::Within).await?;
            execute(core, conn, actor, client, mutation, false).await
        }
    };
    match executed {
        Ok(settled) => {
            *stand = Stand::Open;
            Ok(settled)
        }
        Err(err) if err.is_deterministic() => {
            // Undone, the savepoint kept for the rejection's record.
            run_sql(conn, "ROLLBACK TO mutation").await?;
            let result = rejection(mutation, &err);
            // The client's first push made its sequence in the savepoint undone.
            read_or_start(conn, user, client, mutation.client_mutation_id, Opening::Within).await?;
            let stored = json!({ "error": result.error });
            record(conn, &core.app, actor, client, mutation, ("rejected", &stored), Carried::default()).await?;
            *stand = Stand::Open;
            log_rejection(user, client, mutation, &err);
            Ok(Settled::Answered { result, sequence: mutation.mutation_id })
        }
        Err(err) => Err(stopping(err)),
    }
}

/// Run the mutator and record it applied, in the mutation's savepoint on `conn`. With
/// `assume`, write permissions are assumed and rows required without reading them, for the
/// record's batch to confirm.
async fn execute(
    core: &Shared,
    conn: &mut SqliteConnection,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    assume: bool,
) -> std::result::Result<Settled, KernelError> {
    let (mut tx, outcome) = run(core, Conn::Sqlite(&mut *conn), actor, mutation, assume).await?;
    let pending = tx.take_pending();
    let assumed = tx.take_assumed();
    let required = tx.take_required();
    let superseded = tx.superseded();
    let affected = std::mem::take(&mut tx.affected);
    let membership_changes = std::mem::take(&mut tx.membership_changes);
    drop(tx);
    let stored =
        json!({ "serverId": outcome.server_id, "reconciliation": outcome.reconciliation, "superseded": superseded });
    // The mutation's last insert goes with the record: its failure is the mutation's.
    let carried = Carried { pending: pending.as_ref(), assumed: &assumed, required: &required };
    let commit_xid =
        record(conn, &core.app, actor, client, mutation, ("applied", &stored), carried).await.map_err(to_kernel)?;
    let mut affected = affected;
    affected.extend(outcome.affected_buckets.iter().cloned());
    Ok(Settled::Applied {
        result: super::applied(mutation, outcome, superseded),
        affected,
        membership_changes,
        sequence: mutation.mutation_id,
        commit_xid,
    })
}

/// The same mutation again under the next id: its record moves to the new number, stamped as
/// the newest, and the sequence moves on.
async fn renumber(
    conn: &mut SqliteConnection,
    user: &str,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    sequence: &Sequence,
) -> Result<()> {
    let (id, now) = (to_i64(mutation.mutation_id)?, now_ms());
    let moved = sqlx::query(
        "UPDATE _engine_mutations SET mutation_id = ?, applied_at = max(?, (
           SELECT c.recorded_at FROM _engine_clients c WHERE c.user_id = ? AND c.client_id = ?))
         WHERE user_id = ? AND client_id = ? AND client_mutation_id = ?",
    )
    .bind(id)
    .bind(now)
    .bind(user)
    .bind(client.to_string())
    .bind(user)
    .bind(client.to_string())
    .bind(mutation.client_mutation_id.to_string())
    .execute(&mut *conn)
    .await?
    .rows_affected();
    let collected = to_i64(sequence.collected_up_to())?;
    let collected = if moved > 0 { collected } else { collected.max(id) };
    sqlx::query(
        "UPDATE _engine_clients SET last_mutation_id = ?, recorded_at = max(?, recorded_at), updated_at = ?, collected_to = ?
         WHERE user_id = ? AND client_id = ?",
    )
    .bind(id)
    .bind(now)
    .bind(now)
    .bind(collected)
    .bind(user)
    .bind(client.to_string())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Opening, Stand};

    /// A group's first batch begins its transaction: a push alone hands three batches to the
    /// connection's thread (the sequence, the record, the commit), not four.
    #[test]
    fn the_first_batch_of_a_group_begins_its_transaction() {
        let table = [
            (Stand::Unbegun, Opening::BeginAndOpen),
            (Stand::Begun, Opening::Open),
            (Stand::Open, Opening::ReleaseAndOpen),
        ];
        for (stand, opening) in table {
            assert_eq!(stand.opening(), opening, "{stand:?}");
        }
    }
}
