//! Push on SQLite (`docs/design.md` §11): each mutation in one `BEGIN IMMEDIATE` transaction of
//! the writer, which writes alone, so the client's sequence needs no lock and a mutation no
//! next path: the sequence is read and decided by `sequence.rs` as on Postgres' checked path,
//! the mutator runs on the same authorized transaction ([`ServerTx`] on SQLite), and its record,
//! sent in one batch of statements with the mutation's last insert, advances the sequence. A
//! deterministic failure is recorded in a transaction of its own and advances the sequence; a
//! transient one records nothing and stops the push.

use engine_kernel::wire::{MutationRequest, PushRequest};
use engine_kernel::{Actor, Error as KernelError};
use engine_sqlite::Sql;
use serde_json::{Value, json};
use sqlx::{Connection, SqliteConnection};

use super::sequence::{CollectedRecords, Decision, Sequence};
use super::{
    Pushed, Settled, collected_duplicate, log_rejection, recorded_name, rejection, run, stopping, stored_result,
    to_i64, to_u64,
};
use crate::core::Shared;
use crate::error::{Error, Result};
use crate::mutation::{Conn, PendingInsert, to_kernel};
use crate::sqlite::{Db, now_ms};

/// Apply the request's mutations in order, each in its own transaction.
pub(crate) async fn push(db: &Db, core: &Shared, actor: &Actor, request: &PushRequest) -> Result<Pushed> {
    if request.mutations.len() > core.limits.mutations_per_push {
        return Err(Error::TooManyMutations { limit: core.limits.mutations_per_push });
    }
    let mut pushed = Pushed::default();
    let mut last = None;
    for mutation in &request.mutations {
        let mut writer = db.writer().await;
        match apply(core, &mut writer, actor, request.client_id, mutation).await {
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
                pushed.stopped = Some(err);
                break;
            }
        }
    }
    pushed.response.last_mutation_id = match last {
        Some(last) => last,
        None => read_sequence(&mut *db.writer().await, &actor.user_id, request.client_id).await?.map_or(0, |s| s.0),
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

/// The client's sequence (created at 0 on its first push), with whether mutation `cmid` was
/// recorded: one statement, whose `DO UPDATE` writes nothing new but makes an existing row
/// answer `RETURNING` too.
async fn read_or_start(
    conn: &mut SqliteConnection,
    user: &str,
    client: uuid::Uuid,
    cmid: uuid::Uuid,
) -> Result<Sequence> {
    let now = now_ms();
    let client = client.to_string();
    let (last, collected, seen): (i64, Option<i64>, bool) = sqlx::query_as(
        "INSERT INTO _engine_clients (user_id, client_id, created_at, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (user_id, client_id) DO UPDATE SET user_id = excluded.user_id
         RETURNING last_mutation_id, collected_to, EXISTS (
           SELECT 1 FROM _engine_mutations WHERE user_id = ? AND client_id = ? AND client_mutation_id = ?)",
    )
    .bind(user)
    .bind(&client)
    .bind(now)
    .bind(now)
    .bind(user)
    .bind(&client)
    .bind(cmid.to_string())
    .fetch_one(&mut *conn)
    .await?;
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

/// Record a mutation's outcome and advance the client's sequence to it, after the mutation's
/// insert still waiting (`pending`), in one batch of statements: each of them a round trip to
/// the connection's thread otherwise. The counter after it.
async fn record(
    conn: &mut SqliteConnection,
    user: &str,
    client: uuid::Uuid,
    mutation: &MutationRequest,
    status: &str,
    result: &Value,
    pending: Option<&PendingInsert>,
) -> Result<u64> {
    let (id, now, client) = (to_i64(mutation.mutation_id)?, now_ms(), client.to_string());
    let mut sql = Sql::new("");
    if let Some(pending) = pending {
        pending.push_on_sqlite(&mut sql)?;
        sql.push("; ");
    }
    // The counter is read after the insert's stamp advanced it. A record is stamped no earlier
    // than its predecessor, so records grow old in id order.
    sql.push("UPDATE _engine_clients SET last_mutation_id = ").push_bind(id);
    sql.push(", last_seq = (SELECT seq FROM _engine_seq WHERE id = 1), recorded_at = max(").push_bind(now);
    sql.push(", recorded_at), updated_at = ").push_bind(now);
    sql.push(" WHERE user_id = ").push_bind(user).push(" AND client_id = ").push_bind(client.clone());
    sql.push(
        "; INSERT INTO _engine_mutations (user_id, client_id, mutation_id, client_mutation_id, name, status, result, seq, applied_at)
         SELECT user_id, client_id, last_mutation_id, ",
    );
    sql.push_bind(mutation.client_mutation_id.to_string()).push(", ").push_bind(recorded_name(&mutation.name));
    sql.push(", ").push_bind(status).push(", ").push_bind(result.to_string());
    sql.push(", last_seq, recorded_at FROM _engine_clients WHERE user_id = ").push_bind(user);
    sql.push(" AND client_id = ").push_bind(client).push(" RETURNING seq");
    // Every statement of the batch runs only when every row is asked for (`fetch_one` would
    // stop the batch at its first row).
    let rows = sql.build_query_scalar::<i64>().fetch_all(&mut *conn).await?;
    let counter = rows.last().ok_or_else(|| Error::internal("the mutation's record was not written"))?;
    Ok(to_u64(*counter))
}

async fn apply(
    core: &Shared,
    conn: &mut SqliteConnection,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
) -> Result<Settled> {
    let user = actor.user_id.as_str();
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    let sequence = read_or_start(&mut tx, user, client, mutation.client_mutation_id).await?;
    let last = sequence.last;
    match sequence.decide(mutation.mutation_id) {
        Decision::CollectedDuplicate => {
            tx.commit().await?;
            return Ok(Settled::Answered { result: collected_duplicate(mutation), sequence: last });
        }
        Decision::OutOfOrder => {
            tx.rollback().await?;
            return Ok(Settled::OutOfOrder { last_mutation_id: last });
        }
        Decision::Replay => {
            let answer = recorded(&mut tx, user, client, mutation).await?;
            tx.commit().await?;
            return Ok(Settled::Answered {
                result: answer.unwrap_or_else(|| collected_duplicate(mutation)),
                sequence: last,
            });
        }
        Decision::Renumber => {
            let result =
                recorded(&mut tx, user, client, mutation).await?.unwrap_or_else(|| collected_duplicate(mutation));
            renumber(&mut tx, user, client, mutation, &sequence).await?;
            tx.commit().await?;
            return Ok(Settled::Answered { result, sequence: mutation.mutation_id });
        }
        Decision::Apply => {}
    }
    match execute(core, &mut tx, actor, client, mutation).await {
        Ok(settled) => {
            tx.commit().await?;
            Ok(settled)
        }
        Err(err) if err.is_deterministic() => {
            tx.rollback().await?;
            let result = rejection(mutation, &err);
            let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
            // The client's first push made its sequence in the transaction undone.
            read_or_start(&mut tx, user, client, mutation.client_mutation_id).await?;
            record(&mut tx, user, client, mutation, "rejected", &json!({ "error": result.error }), None).await?;
            tx.commit().await?;
            log_rejection(user, client, mutation, &err);
            Ok(Settled::Answered { result, sequence: mutation.mutation_id })
        }
        Err(err) => {
            tx.rollback().await?;
            Err(stopping(err))
        }
    }
}

/// Run the mutator and record it applied, in the transaction `conn`.
async fn execute(
    core: &Shared,
    conn: &mut SqliteConnection,
    actor: &Actor,
    client: uuid::Uuid,
    mutation: &MutationRequest,
) -> std::result::Result<Settled, KernelError> {
    let (mut tx, outcome) = run(core, Conn::Sqlite(&mut *conn), actor, mutation, false).await?;
    let pending = tx.take_pending();
    let superseded = tx.superseded();
    let affected = std::mem::take(&mut tx.affected);
    let membership_changes = std::mem::take(&mut tx.membership_changes);
    drop(tx);
    let stored =
        json!({ "serverId": outcome.server_id, "reconciliation": outcome.reconciliation, "superseded": superseded });
    // The mutation's last insert goes with the record: its failure is the mutation's.
    let commit_xid = record(conn, &actor.user_id, client, mutation, "applied", &stored, pending.as_ref())
        .await
        .map_err(to_kernel)?;
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
