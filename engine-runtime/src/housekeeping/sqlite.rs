//! Housekeeping on SQLite: the same retention and counts as on Postgres. One process serves the
//! file, so collection takes no lock beyond the writer's, one step of at most
//! `Retention::batch` rows at a time, and the counts read a snapshot of a reader.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use engine_kernel::BucketKey;
use engine_kernel::rules::buckets::param_text;
use engine_sqlite::Sql;
use engine_sqlite::values::decode;
use sqlx::{Connection, SqliteConnection};

use super::{Collected, Retention, Stats};
use crate::core::Shared;
use crate::error::Result;
use crate::jobs::queue::sqlite::counts;
use crate::rules::selection;
use crate::sqlite::{Db, now_ms};

/// Counts of what the file holds.
pub(crate) async fn stats(conn: &mut SqliteConnection, shared: &Shared) -> Result<Stats> {
    let mut tx = conn.begin().await?;
    let (clients, applied, rejected, tombstones): (i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM _engine_clients),
                (SELECT count(*) FROM _engine_mutations WHERE status = 'applied'),
                (SELECT count(*) FROM _engine_mutations WHERE status = 'rejected'),
                (SELECT count(*) FROM _engine_tombstones)",
    )
    .fetch_one(&mut *tx)
    .await?;
    // The buckets that hold a live row: the distinct scopes of each selection's rows.
    let mut buckets: BTreeSet<BucketKey> = BTreeSet::new();
    for table in shared.rules.synced_tables() {
        for selection in shared.rules.selections(table.name) {
            let scope = selection.scope_columns();
            let mut sql = Sql::new("");
            selection::sqlite::push_any_bucket(&mut sql, table, selection);
            for row in sql.build().fetch_all(&mut *tx).await? {
                let mut params = Vec::with_capacity(scope.len());
                for (i, name) in scope.iter().enumerate() {
                    params.extend(param_text(&decode(&row, i, table.column(name).expect("scope columns exist"))?));
                }
                buckets.insert(BucketKey::new(selection.rule.name, &params));
            }
        }
    }
    let jobs = counts(&mut tx).await?;
    tx.commit().await?;
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(Stats {
        buckets: count(i64::try_from(buckets.len()).unwrap_or(i64::MAX)),
        clients: count(clients),
        applied_mutations: count(applied),
        rejected_mutations: count(rejected),
        tombstones: count(tombstones),
        jobs,
        horizon_lag_ms: 0,
        horizon_blocker_pid: None,
    })
}

/// Delete what is older than its retention, in steps of at most `retention.batch` rows.
pub(crate) async fn collect(db: &Db, retention: &Retention) -> Result<Collected> {
    let mut collected = Collected::default();
    let now = now_ms();
    let before = |kept: Duration| now.saturating_sub(i64::try_from(kept.as_millis()).unwrap_or(i64::MAX));
    let batch = i64::try_from(retention.batch.max(1)).unwrap_or(i64::MAX);
    // Tombstones: the collected position is recorded with each step, so a cursor behind it is
    // reset.
    // Every step counts, the last that finds nothing too (as on Postgres).
    loop {
        collected.steps += 1;
        let mut writer = db.writer().await;
        let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
        let last: Option<i64> = sqlx::query_scalar(
            "SELECT max(seq) FROM (SELECT seq FROM _engine_tombstones WHERE created_at < ? ORDER BY seq LIMIT ?)",
        )
        .bind(before(retention.tombstones))
        .bind(batch)
        .fetch_one(&mut *tx)
        .await?;
        let Some(last) = last else { break };
        sqlx::query(
            "UPDATE _engine_meta SET value = CAST(max(CAST(value AS INTEGER), ?) AS TEXT) WHERE key = 'tombstone_horizon'",
        )
        .bind(last + 1)
        .execute(&mut *tx)
        .await?;
        let deleted = sqlx::query("DELETE FROM _engine_tombstones WHERE seq <= ?").bind(last).execute(&mut *tx).await?;
        tx.commit().await?;
        collected.tombstones += deleted.rows_affected();
    }
    // Mutation records, oldest first; each client notes how far its records went.
    loop {
        collected.steps += 1;
        let mut writer = db.writer().await;
        let mut tx = writer.begin_with("BEGIN IMMEDIATE").await?;
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT user_id, client_id, mutation_id FROM _engine_mutations WHERE applied_at < ?
             ORDER BY applied_at, mutation_id LIMIT ?",
        )
        .bind(before(retention.mutations))
        .bind(batch)
        .fetch_all(&mut *tx)
        .await?;
        if rows.is_empty() {
            break;
        }
        let mut upto: BTreeMap<(String, String), i64> = BTreeMap::new();
        for (user, client, id) in &rows {
            let at = upto.entry((user.clone(), client.clone())).or_default();
            *at = (*at).max(*id);
        }
        for ((user, client), id) in upto {
            sqlx::query(
                "UPDATE _engine_clients SET collected_to = max(coalesce(collected_to, 0), ?1) WHERE user_id = ?2 AND client_id = ?3",
            )
            .bind(id)
            .bind(&user)
            .bind(&client)
            .execute(&mut *tx)
            .await?;
            let deleted = sqlx::query(
                "DELETE FROM _engine_mutations WHERE user_id = ? AND client_id = ? AND mutation_id <= ? AND applied_at < ?",
            )
            .bind(&user)
            .bind(&client)
            .bind(id)
            .bind(before(retention.mutations))
            .execute(&mut *tx)
            .await?;
            collected.mutations += deleted.rows_affected();
        }
        tx.commit().await?;
    }
    // Idle clients with no record left; finished jobs; bucket sets no cursor named lately.
    // What each step counts: clients (0), jobs (1), bucket sets (2).
    let mut counts = [0u64; 3];
    let steps: [(&str, i64, usize); 4] = [
        (
            "DELETE FROM _engine_clients WHERE rowid IN (SELECT c.rowid FROM _engine_clients c WHERE c.updated_at < ?1
               AND NOT EXISTS (SELECT 1 FROM _engine_mutations m WHERE m.user_id = c.user_id AND m.client_id = c.client_id) LIMIT ?2)",
            before(retention.mutations),
            0,
        ),
        (
            "DELETE FROM _engine_jobs WHERE id IN (SELECT id FROM _engine_jobs WHERE state = 'done' AND finished_at < ?1 LIMIT ?2)",
            before(retention.jobs),
            1,
        ),
        (
            "DELETE FROM _engine_bucket_sets WHERE digest IN (SELECT digest FROM _engine_bucket_sets WHERE used_at < ?1 LIMIT ?2)",
            before(retention.tombstones),
            2,
        ),
        (
            "DELETE FROM _engine_jobs WHERE id IN (SELECT id FROM _engine_jobs WHERE state = 'dead' AND finished_at < ?1 LIMIT ?2)",
            before(retention.dead_jobs),
            1,
        ),
    ];
    let mut steps_taken = 0;
    for (sql, cutoff, count) in steps {
        loop {
            let deleted = sqlx::query(sql).bind(cutoff).bind(batch).execute(&mut *db.writer().await).await?;
            steps_taken += 1;
            if deleted.rows_affected() == 0 {
                break;
            }
            counts[count] += deleted.rows_affected();
        }
    }
    collected.steps += steps_taken;
    [collected.clients, collected.jobs, collected.bucket_sets] = counts;
    Ok(collected)
}
