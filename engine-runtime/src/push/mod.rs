//! Push: each mutation in its own transaction, applied once in the client's order
//! (`docs/design.md` §4–7, `docs/protocol.md#post-syncpush`).
//!
//! The *next* path runs a mutation the push takes to be next at once, its record statement
//! advancing the client's sequence only from the mutation's predecessor; anything else undoes
//! the attempt and leaves the mutation to the *checked* path, which locks the sequence and
//! decides by `sequence.rs`. Deterministic failures are recorded and advance the sequence;
//! transient ones record nothing and stop the batch.
//!
//! - `sequence.rs`: the checked path's decision (pure, with its table).
//! - `lane.rs`: sessions a push hands on to the next push.
//! - `sqlite.rs`: the push on SQLite: the checked path only, the waiting pushes committed as a
//!   group by the writer.

mod lane;
mod sequence;
pub(crate) mod sqlite;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use engine_kernel::wire::{MutationRequest, MutationResult, MutationStatus, Problem, PushRequest, PushResponse};
use engine_kernel::{Actor, BucketKey, Error as KernelError, ErrorCode, MutatorCtx, Outcome};
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

pub(crate) use lane::Lane;

use crate::core::{Core, Shared};
use crate::error::{Error, Result};
use crate::mutation::{ASK_INSTEAD, Assumed, Conn, PendingInsert, Required, ServerTx, depth, to_kernel};
use crate::pg::sql;
use crate::pg::sql::Sql;
use sequence::{CollectedRecords, Decision, Sequence};

/// What a push did. Mutations before a stop are committed even when the push stopped, so their
/// buckets are to be pinged either way.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Pushed {
    /// The results of the mutations that were answered, and the client's sequence after them.
    pub response: PushResponse,
    /// Why the push stopped before its end: a transient failure (nothing of that mutation was
    /// recorded, unless Postgres did not answer: [`Error::Unanswered`]) or a sequence gap.
    pub stopped: Option<Error>,
    /// Every bucket whose rows the committed mutations changed.
    pub affected: BTreeSet<BucketKey>,
    /// Claim values (`user_id=carol`) whose membership rows changed: their holders' bucket sets
    /// may have changed.
    pub membership_changes: BTreeSet<String>,
    /// The highest transaction id among the committed mutations (0 when none): pulls see them
    /// once the horizon has passed it.
    pub commit_xid: u64,
}

/// What became of one mutation, and the client's sequence after it.
enum Settled {
    /// Applied now, by the transaction `commit_xid`.
    Applied {
        result: MutationResult,
        affected: BTreeSet<BucketKey>,
        membership_changes: BTreeSet<String>,
        sequence: u64,
        commit_xid: u64,
    },
    /// Rejected now, or replayed: nothing changed but the record.
    Answered { result: MutationResult, sequence: u64 },
    /// The mutation skips ahead of the sequence.
    OutOfOrder { last_mutation_id: u64 },
}

pub(crate) async fn push(core: &Core, lane: &Arc<Lane>, actor: &Actor, request: &PushRequest) -> Result<Pushed> {
    if request.mutations.len() > core.limits.mutations_per_push {
        return Err(Error::TooManyMutations { limit: core.limits.mutations_per_push });
    }
    let mut conn = lane.lend().await?;
    let mut pushed = Pushed::default();
    // The client's sequence as the steps saw it; read afresh only when no step saw it.
    let mut last: Option<u64> = None;
    for mutation in &request.mutations {
        let next = sequence::is_next(last, mutation.mutation_id);
        let step = match core.within(apply(core, &mut conn, actor, request.client_id, mutation, next)).await {
            Ok(Ok(step)) => step,
            Ok(Err(err)) => {
                pushed.stopped = Some(err);
                break;
            }
            // The session is closed as the push ends: what became of the mutation, its next
            // try finds out from the client's sequence.
            Err(lost) => {
                pushed.stopped = Some(lost.into());
                pushed.response.last_mutation_id = last.unwrap_or(0);
                return Ok(pushed);
            }
        };
        match step {
            Settled::Applied { result, affected, membership_changes, sequence, commit_xid } => {
                last = Some(sequence);
                pushed.commit_xid = pushed.commit_xid.max(commit_xid);
                pushed.affected.extend(affected);
                pushed.membership_changes.extend(membership_changes);
                pushed.response.results.push(result);
            }
            Settled::Answered { result, sequence } => {
                last = Some(sequence);
                pushed.response.results.push(result);
            }
            Settled::OutOfOrder { last_mutation_id } => {
                last = Some(last_mutation_id);
                pushed.stopped = Some(Error::MutationOutOfOrder { last_mutation_id, got: mutation.mutation_id });
                break;
            }
        }
    }
    pushed.response.last_mutation_id = match last {
        Some(last) => last,
        None => core.within(last_mutation_id(&mut conn, &actor.user_id, request.client_id)).await??,
    };
    if matches!(pushed.stopped, None | Some(Error::MutationOutOfOrder { .. })) {
        conn.keep();
    } else {
        conn.give_back();
    }
    Ok(pushed)
}

async fn last_mutation_id(conn: &mut PgConnection, user: &str, client: uuid::Uuid) -> Result<u64> {
    let last: Option<i64> =
        sqlx::query_scalar("SELECT last_mutation_id FROM _engine_clients WHERE user_id = $1 AND client_id = $2")
            .bind(user)
            .bind(client)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(last.map_or(0, to_u64))
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn to_i64(n: u64) -> Result<i64> {
    i64::try_from(n).map_err(|_| Error::MalformedRequest(format!("mutation id {n} is out of range")))
}

/// Lock the client's sequence and read it (creating it at 0 on the client's first push), with
/// what its records say of mutation `cmid`. Locking writes nothing: the record that advances the
/// sequence is the row's only write per mutation.
///
/// The records are read by a statement begun once the lock is held: a statement that waited for
/// the lock reads the locked row as the push it waited for left it, but every other row in the
/// snapshot it began with, before that push committed its records.
async fn lock_sequence(conn: &mut PgConnection, user: &str, client: uuid::Uuid, cmid: uuid::Uuid) -> Result<Sequence> {
    const RECORDS: &str = "SELECT EXISTS (
             SELECT 1 FROM _engine_mutations m WHERE m.user_id = $1 AND m.client_id = $2 AND m.client_mutation_id = $3),
           (SELECT c.collected_to FROM _engine_clients c WHERE c.user_id = $1 AND c.client_id = $2),
           (SELECT min(m.mutation_id) FROM _engine_mutations m WHERE m.user_id = $1 AND m.client_id = $2)";
    let last = lock_last(conn, user, client).await?;
    let (seen, collected_to, kept_from): (bool, Option<i64>, Option<i64>) =
        sqlx::query_as(RECORDS).bind(user).bind(client).bind(cmid).fetch_one(&mut *conn).await?;
    let collected = match collected_to {
        Some(collected) => CollectedRecords::UpTo(to_u64(collected)),
        None => CollectedRecords::Before(kept_from.map(to_u64)),
    };
    Ok(Sequence { last, seen, collected })
}

/// Lock the client's sequence and read its last mutation id (creating it at 0 on the client's
/// first push).
async fn lock_last(conn: &mut PgConnection, user: &str, client: uuid::Uuid) -> Result<u64> {
    const LOCK: &str = "SELECT last_mutation_id FROM _engine_clients WHERE user_id = $1 AND client_id = $2 FOR UPDATE";
    for _ in 0..2 {
        let last: Option<i64> = sqlx::query_scalar(LOCK).bind(user).bind(client).fetch_optional(&mut *conn).await?;
        if let Some(last) = last {
            return Ok(to_u64(last));
        }
        sqlx::query("INSERT INTO _engine_clients (user_id, client_id) VALUES ($1, $2) ON CONFLICT DO NOTHING")
            .bind(user)
            .bind(client)
            .execute(&mut *conn)
            .await?;
    }
    Err(Error::internal("the client's sequence row vanished"))
}

/// The client's `updated_at` after a push: noted to the minute. Within the minute the value stays
/// as it was, so the update of the sequence changes no indexed column and Postgres keeps it on
/// the row's page without touching an index (a heap-only tuple); only idle clients are collected
/// by it, after days.
const TOUCHED: &str = "CASE WHEN updated_at < now() - interval '1 minute' THEN now() ELSE updated_at END";

/// The recorded outcome of this mutation (by sequence number, or by its client id under another
/// sequence number), as a replay answers it.
async fn recorded(
    conn: &mut PgConnection,
    user: &str,
    client: uuid::Uuid,
    mutation: &MutationRequest,
) -> Result<Option<(u64, MutationResult)>> {
    let row: Option<(i64, uuid::Uuid, String, Value)> = sqlx::query_as(
        "SELECT mutation_id, client_mutation_id, status, result FROM _engine_mutations
         WHERE user_id = $1 AND client_id = $2 AND (mutation_id = $3 OR client_mutation_id = $4)
         ORDER BY (client_mutation_id = $4) DESC LIMIT 1",
    )
    .bind(user)
    .bind(client)
    .bind(to_i64(mutation.mutation_id)?)
    .bind(mutation.client_mutation_id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|(id, cmid, status, result)| {
        let replay = if cmid != mutation.client_mutation_id {
            // The sequence number was used by another mutation: this one was never applied.
            rejection(
                mutation,
                &KernelError::validation(format!(
                    "mutation id {} was already used by mutation {cmid}",
                    mutation.mutation_id
                )),
            )
        } else {
            stored_result(mutation, &status, &result)
        };
        (to_u64(id), replay)
    }))
}

fn stored_result(mutation: &MutationRequest, status: &str, result: &Value) -> MutationResult {
    let error = result.get("error").and_then(|e| serde_json::from_value::<Problem>(e.clone()).ok());
    MutationResult {
        client_mutation_id: mutation.client_mutation_id,
        mutation_id: mutation.mutation_id,
        status: if status == "rejected" { MutationStatus::Rejected } else { MutationStatus::Duplicate },
        server_id: result.get("serverId").and_then(Value::as_str).map(str::to_owned),
        reconciliation: result
            .get("reconciliation")
            .and_then(|r| serde_json::from_value::<BTreeMap<String, String>>(r.clone()).ok())
            .filter(|r| !r.is_empty()),
        error,
        superseded: result.get("superseded").and_then(Value::as_bool).unwrap_or(false),
    }
}

/// The answer to a replay whose record was collected: `duplicate`, without the outcome.
fn collected_duplicate(mutation: &MutationRequest) -> MutationResult {
    MutationResult {
        client_mutation_id: mutation.client_mutation_id,
        mutation_id: mutation.mutation_id,
        status: MutationStatus::Duplicate,
        server_id: None,
        reconciliation: None,
        error: None,
        superseded: false,
    }
}

fn rejection(mutation: &MutationRequest, err: &KernelError) -> MutationResult {
    MutationResult {
        client_mutation_id: mutation.client_mutation_id,
        mutation_id: mutation.mutation_id,
        status: MutationStatus::Rejected,
        server_id: None,
        reconciliation: None,
        error: Some(Problem::new(err.code(), err.to_string())),
        superseded: false,
    }
}

/// What a mutation's record statement carries beside the record: its last insert, if one still
/// waits, the write permissions it assumed and the rows it required without reading them.
#[derive(Default)]
struct Carried<'a> {
    pending: Option<&'a PendingInsert>,
    assumed: &'a [Assumed],
    required: &'a [Required],
}

/// Record a mutation's outcome and advance the client's sequence to it from the mutation's
/// predecessor, in one statement with what the mutation `carried`; returns the recording
/// transaction's id. A sequence found elsewhere raises (`_engine_sequence_moved`), and so does an
/// assumed permission the statement's snapshot does not confirm (`_engine_unconfirmed`), undoing
/// the statement and the insert with it.
async fn record(
    conn: &mut PgConnection,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    status: &str,
    result: &Value,
    carried: Carried<'_>,
) -> Result<u64> {
    let user = actor.user_id.as_str();
    let mutation_id = to_i64(mutation.mutation_id)?;
    let mut sql = Sql::new("WITH ");
    if let Some(insert) = carried.pending {
        sql.push("pending AS (");
        insert.push(&mut sql)?;
        sql.push("), ");
    }
    // The record's time is no earlier than its predecessor's (read from the sequence's row as the
    // update finds it, after any push it waited for), whenever its transaction began.
    sql.push("advanced AS (UPDATE _engine_clients SET last_mutation_id = ").push_bind(mutation_id);
    sql.push(", last_xid = pg_current_xact_id(), recorded_at = greatest(now(), recorded_at), updated_at = ");
    sql.push(TOUCHED).push(" WHERE user_id = ").push_bind(user.to_owned());
    sql.push(" AND client_id = ").push_bind(client).push(" AND last_mutation_id = ").push_bind(mutation_id - 1);
    sql.push(" RETURNING recorded_at), ");
    sql.push(
        "recorded AS (INSERT INTO _engine_mutations (user_id, client_id, mutation_id, client_mutation_id, name, status, result, applied_at) SELECT ",
    );
    sql.push_bind(user.to_owned()).push(", ").push_bind(client).push(", ").push_bind(mutation_id).push(", ");
    sql.push_bind(mutation.client_mutation_id).push(", ").push_bind(recorded_name(&mutation.name)).push(", ");
    sql.push_bind(status.to_owned()).push(", ").push_bind(result.clone()).push(", recorded_at FROM advanced) ");
    sql.push("SELECT CASE");
    if !carried.assumed.is_empty() || !carried.required.is_empty() {
        sql.push(" WHEN NOT (");
        Assumed::push_all(carried.assumed, &mut sql, actor)?;
        sql.push(" AND ");
        Required::push_all(carried.required, &mut sql, actor)?;
        sql.push(") THEN _engine_unconfirmed()");
    }
    sql.push(" WHEN EXISTS (SELECT 1 FROM advanced) THEN pg_current_xact_id()::text ");
    sql.push("ELSE _engine_sequence_moved(").push_bind(client).push(", ").push_bind(mutation_id - 1).push(") END");
    let xid: String = sql.build_query_scalar().fetch_one(&mut *conn).await?;
    sql::xid(&xid)
}

async fn apply(
    core: &Core,
    conn: &mut PgConnection,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    next: bool,
) -> Result<Settled> {
    // The next path assumes write permissions on its first try; when one did not hold before a
    // later operation (the bucket is one the mutation creates, say), it tries once more, asking.
    let tries: &[bool] = if next { &[true, false] } else { &[] };
    for &assume in tries {
        match execute(core, Conn::Deferred(&mut *conn), actor, client, mutation, assume).await {
            Ok(step) => return Ok(step),
            Err(KernelError::Forbidden(message)) if assume && message == ASK_INSTEAD => {
                tracing::debug!(mutator = ?mutation.name, "trying the next path again, asking");
            }
            Err(err) => {
                tracing::debug!(mutation = %mutation.name, error = ?crate::error::Chain(&err), "taking the checked path");
                break;
            }
        }
    }
    apply_checked(core, conn, actor, client, mutation).await
}

/// The checked path: the sequence locked and compared first.
async fn apply_checked(
    core: &Core,
    conn: &mut PgConnection,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
) -> Result<Settled> {
    let user = actor.user_id.as_str();
    let mut tx = conn.begin().await?;
    let sequence = lock_sequence(&mut tx, user, client, mutation.client_mutation_id).await?;
    let last = sequence.last;
    match sequence.decide(mutation.mutation_id) {
        Decision::CollectedDuplicate => {
            // A replay from before the retention of mutation records: applied once, its outcome
            // no longer kept (`docs/protocol.md#post-syncpush`).
            tx.commit().await?;
            return Ok(Settled::Answered { result: collected_duplicate(mutation), sequence: last });
        }
        Decision::OutOfOrder => {
            // Ahead of the sequence, or the id is another mutation's (the client's store was
            // copied or restored from a backup): this one never applied; the client numbers it
            // on from `last`.
            tx.rollback().await?;
            return Ok(Settled::OutOfOrder { last_mutation_id: last });
        }
        Decision::Replay => {
            let answer = recorded(&mut tx, user, client, mutation).await?;
            tx.commit().await?;
            // No record: it was collected since the sequence was read.
            let result = answer.map_or_else(|| collected_duplicate(mutation), |(_, result)| result);
            return Ok(Settled::Answered { result, sequence: last });
        }
        Decision::Renumber => return renumber(tx, user, client, mutation, &sequence).await,
        Decision::Apply => {}
    }

    match execute(core, Conn::Within(&mut tx), actor, client, mutation, false).await {
        Ok(step) => {
            tx.commit().await?;
            Ok(step)
        }
        Err(err) if err.is_deterministic() => {
            tx.rollback().await?;
            reject(conn, actor, client, mutation, &err).await
        }
        Err(err) => {
            tx.rollback().await?;
            Err(stopping(err))
        }
    }
}

/// The error that stops a push at a failure that is not recorded: transient ones are retried.
fn stopping(err: KernelError) -> Error {
    match err {
        KernelError::Transient(detail) => Error::RetryLater { retry_after: crate::error::RETRY_AFTER, detail },
        other => Error::Kernel(other),
    }
}

/// The same mutation again under the next id: answer as before, and let the sequence move on.
async fn renumber(
    mut tx: sqlx::Transaction<'_, sqlx::Postgres>,
    user: &str,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    sequence: &Sequence,
) -> Result<Settled> {
    // The same mutation again under a new sequence number: answer as before, and let the
    // sequence move on. No record: retention collected it since `sequence.seen` was read; it applied
    // all the same, and is not run again. The record moves to the new number, stamped as
    // the newest: a replay of that number finds it, retention (which removes a client's
    // oldest records first) never leaves a later one without it, and a pull counts it synced
    // only once this transaction is, after the mutations numbered before it.
    let replay = recorded(&mut tx, user, client, mutation)
        .await?
        .map_or_else(|| collected_duplicate(mutation), |(_, replay)| replay);
    let moved = sqlx::query(
        "UPDATE _engine_mutations SET mutation_id = $3, xid = pg_current_xact_id(), applied_at = greatest(now(), (
           SELECT c.recorded_at FROM _engine_clients c WHERE c.user_id = $1 AND c.client_id = $2))
         WHERE user_id = $1 AND client_id = $2 AND client_mutation_id = $4",
    )
    .bind(user)
    .bind(client)
    .bind(to_i64(mutation.mutation_id)?)
    .bind(mutation.client_mutation_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    // The old number's record is gone without being collected: how far collection went is
    // noted (it was read from the first kept record before), and a record collected
    // meanwhile counts as collected up to the new number.
    let collected = to_i64(sequence.collected_up_to())?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE _engine_clients SET last_mutation_id = $3, last_xid = pg_current_xact_id(),
           recorded_at = greatest(now(), recorded_at), updated_at = {TOUCHED},
           collected_to = CASE WHEN $4 THEN $5 ELSE greatest($5, $3) END
         WHERE user_id = $1 AND client_id = $2"
    )))
    .bind(user)
    .bind(client)
    .bind(to_i64(mutation.mutation_id)?)
    .bind(moved > 0)
    .bind(collected)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Settled::Answered { result: replay, sequence: mutation.mutation_id })
}

/// Run the mutator on the authorized transaction `conn` and record it applied (its last
/// insert with the record); a transaction `conn` began is committed. With `assume`, write
/// permissions are assumed and confirmed later (the next path's first try).
async fn execute(
    core: &Core,
    conn: Conn<'_>,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    assume: bool,
) -> std::result::Result<Settled, KernelError> {
    let (mut tx, outcome) = run(core, conn, actor, mutation, assume).await?;
    let pending = tx.take_pending();
    let assumed = tx.take_assumed();
    let required = tx.take_required();
    let superseded = tx.superseded();
    let stored =
        json!({ "serverId": outcome.server_id, "reconciliation": outcome.reconciliation, "superseded": superseded });
    // The mutation's last insert goes with the record: its failure is the mutation's.
    let carried = Carried { pending: pending.as_ref(), assumed: &assumed, required: &required };
    let commit_xid =
        record(tx.conn()?, actor, client, mutation, "applied", &stored, carried).await.map_err(to_kernel)?;
    let mut affected = std::mem::take(&mut tx.affected);
    let membership_changes = std::mem::take(&mut tx.membership_changes);
    tx.commit().await?;
    affected.extend(outcome.affected_buckets.iter().cloned());
    Ok(Settled::Applied {
        result: applied(mutation, outcome, superseded),
        affected,
        membership_changes,
        sequence: mutation.mutation_id,
        commit_xid,
    })
}

/// Run the mutator of `mutation` for `actor` on `conn`, its writes authorized and merged: the
/// transaction with its writes in, and what the mutator reported. With `assume`, write
/// permissions are assumed and confirmed later (the next path's first try).
async fn run<'t>(
    core: &'t Shared,
    conn: Conn<'t>,
    actor: &Actor,
    mutation: &MutationRequest,
    assume: bool,
) -> std::result::Result<(ServerTx<'t>, Outcome), KernelError> {
    check_mutator_name(&mutation.name)?;
    let hlc = core.clock.mutation_reading(mutation.hlc.as_deref())?;
    let def = core.app.mutator(&mutation.name).ok_or_else(|| KernelError::UnknownMutator(mutation.name.clone()))?;
    let depth = depth(&mutation.args);
    if depth > core.limits.args_depth {
        return Err(KernelError::validation(format!(
            "the arguments nest {depth} levels deep; at most {} are taken",
            core.limits.args_depth
        )));
    }
    let mut tx = ServerTx::new(conn, core, actor.clone(), hlc, mutation.client_mutation_id);
    if assume {
        tx = tx.assuming_write_permissions();
    }
    if mutation.hlc.is_none() {
        tx = tx.stamped_by_server();
    }
    let outcome = {
        let mut ctx = MutatorCtx::new(&mut tx);
        def.run(&mut ctx, mutation.args.clone()).await
    };
    let outcome: Outcome = tx.finish(outcome).await?;
    Ok((tx, outcome))
}

/// The answer to `mutation` applied now with `outcome`.
fn applied(mutation: &MutationRequest, outcome: Outcome, superseded: bool) -> MutationResult {
    MutationResult {
        client_mutation_id: mutation.client_mutation_id,
        mutation_id: mutation.mutation_id,
        status: MutationStatus::Applied,
        server_id: outcome.server_id,
        reconciliation: (!outcome.reconciliation.is_empty()).then_some(outcome.reconciliation),
        error: None,
        superseded,
    }
}

/// The longest mutator name a push may send, in bytes.
pub(crate) const MAX_MUTATOR_NAME_BYTES: usize = 128;

/// A mutator's name has 1 to [`MAX_MUTATOR_NAME_BYTES`] bytes and no control character. Checked
/// before anything else of the mutation. Not `unknown_mutator` for any name no mutator has: that
/// answer echoes the name, and its record stores it, where a NUL is refused by Postgres (the
/// rejection could never be recorded, a `500` on every push of the client) and a newline forges
/// log lines.
fn check_mutator_name(name: &str) -> std::result::Result<(), KernelError> {
    if name.is_empty() || name.len() > MAX_MUTATOR_NAME_BYTES {
        return Err(KernelError::validation(format!(
            "a mutator name has 1 to {MAX_MUTATOR_NAME_BYTES} bytes; this one has {}",
            name.len()
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(KernelError::validation("a mutator name holds no control character; this one does"));
    }
    Ok(())
}

/// `name` as a mutation's record keeps it: control characters written as Rust escapes
/// (`\u{0}`), cut to [`MAX_MUTATOR_NAME_BYTES`] bytes. A well-formed name is kept as sent.
fn recorded_name(name: &str) -> String {
    let mut recorded = String::new();
    for c in name.chars() {
        let escaped: String = if c.is_control() { c.escape_unicode().collect() } else { c.into() };
        if recorded.len() + escaped.len() > MAX_MUTATOR_NAME_BYTES {
            break;
        }
        recorded.push_str(&escaped);
    }
    recorded
}

/// Tell the operator of a rejected mutation: who, which mutator, the code, and what the client
/// was not told (the cause of an internal failure; of a refusal of the database, its SQLSTATE,
/// table and constraint, and its cause). Never the arguments. What the client sent (its user id,
/// the mutator's name, a detail that echoes an argument) and what the database said go in
/// fields, quoted, so a newline in it cannot start a log line of its own.
fn log_rejection(user: &str, client: uuid::Uuid, mutation: &MutationRequest, err: &KernelError) {
    let code = err.code();
    let (mutator, id, detail) = (mutation.name.as_str(), mutation.mutation_id, err.to_string());
    let refusal = match err {
        KernelError::Refused { cause, .. } => cause.downcast_ref::<crate::mutation::DatabaseRefusal>(),
        _ => None,
    };
    match (code, refusal) {
        (ErrorCode::Internal, _) => {
            let cause = std::error::Error::source(err).map(ToString::to_string).unwrap_or_else(|| format!("{err:?}"));
            tracing::error!(?user, %client, ?mutator, mutation_id = id, %code, ?detail, ?cause, "mutation failed");
        }
        (ErrorCode::Forbidden, _) => {
            tracing::warn!(?user, %client, ?mutator, mutation_id = id, %code, ?detail, "mutation forbidden");
        }
        (_, Some(refusal)) => tracing::info!(
            ?user,
            %client,
            ?mutator,
            mutation_id = id,
            %code,
            ?detail,
            sqlstate = ?refusal.sqlstate(),
            table = ?refusal.table().unwrap_or_default(),
            constraint = ?refusal.constraint().unwrap_or_default(),
            cause = ?crate::error::Chain(refusal),
            "mutation rejected"
        ),
        _ => tracing::info!(?user, %client, ?mutator, mutation_id = id, %code, ?detail, "mutation rejected"),
    }
}

/// Record a deterministic failure in its own transaction, and advance the sequence past it.
async fn reject(
    conn: &mut PgConnection,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    err: &KernelError,
) -> Result<Settled> {
    let user = actor.user_id.as_str();
    let mut tx = conn.begin().await?;
    let last = lock_last(&mut tx, user, client).await?;
    if sequence::recorded_meanwhile(last, mutation.mutation_id) {
        // A concurrent push of the same client got here first: answer as it was answered.
        let answer = recorded(&mut tx, user, client, mutation).await?;
        tx.commit().await?;
        let result = answer.map_or_else(|| rejection(mutation, err), |(_, r)| r);
        return Ok(Settled::Answered { result, sequence: last });
    }
    let result = rejection(mutation, err);
    let stored = json!({ "error": result.error });
    record(&mut tx, actor, client, mutation, "rejected", &stored, Carried::default()).await?;
    tx.commit().await?;
    log_rejection(user, client, mutation, err);
    Ok(Settled::Answered { result, sequence: mutation.mutation_id })
}

#[cfg(test)]
mod tests;
