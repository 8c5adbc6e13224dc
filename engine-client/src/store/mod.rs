//! The local store: SQLite (a file, or memory), holding the view the app reads, the confirmed
//! base, the outbox and the quarantine. Every operation is one SQLite transaction.

mod apply;
mod blobs;
mod holdings;
mod outbox;
mod schema;
mod sql;
mod tx;
mod values;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::wire::{MutationResult, PullResponse};
use engine_kernel::{Actor, App, HlcClock, MutatorCtx, Outcome, Row, TableMeta};
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{SqliteConnection, SqlitePool};

pub(crate) use apply::Applied;
pub use blobs::{BlobState, QueuedBlob};
pub(crate) use outbox::Entry;
pub use outbox::Quarantined;

use crate::error::{Error, Result};

/// Where the local store lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file, created when missing: survives restarts.
    File(PathBuf),
    /// Memory only: gone when the client is dropped.
    Memory,
}

/// A mutation queued by [`crate::Client::mutate`].
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    /// Its place in the client's sequence.
    pub mutation_id: u64,
    /// Its id, the same on every retry.
    pub client_mutation_id: uuid::Uuid,
    /// What its local run reported (the server's run reports the same for a deterministic
    /// mutator; its ids are the same).
    pub outcome: Outcome,
}

/// The names of the tables with a local copy.
pub(crate) fn local_table_names(app: &App) -> Vec<&'static str> {
    schema::local_tables(app).into_iter().map(|t| t.name).collect()
}

pub(crate) fn now_ms() -> i64 {
    i64::try_from(engine_kernel::hlc::wall_clock_ms()).unwrap_or(i64::MAX)
}

/// The local store of one client.
#[derive(Debug)]
pub(crate) struct Store {
    pool: SqlitePool,
    app: Arc<App>,
    /// The app's sync rules indexed by table, for the write rules evaluated offline.
    rules: RuleIndex,
    actor: Actor,
    client_id: uuid::Uuid,
    clock: Mutex<HlcClock>,
}

impl Store {
    /// Open (creating or migrating) the store at `location` for `app` and `actor`.
    pub(crate) async fn open(location: &StoreLocation, app: Arc<App>, actor: Actor) -> Result<Store> {
        let options = match location {
            StoreLocation::File(path) => SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                // A mutation is durable when `mutate` returns.
                .synchronous(SqliteSynchronous::Full),
            StoreLocation::Memory => SqliteConnectOptions::new().in_memory(true),
        }
        .busy_timeout(Duration::from_secs(10));
        // One connection: SQLite writes one transaction at a time anyway, and an in-memory
        // database lives exactly as long as its connection.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options)
            .await?;
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        let resync = schema::migrate(&mut tx, &app).await?;
        match schema::meta(&mut tx, "user_id").await? {
            Some(user) if user != actor.user_id => {
                return Err(Error::StoreMismatch(format!(
                    "the store holds the data of user `{user}`, not of `{}`",
                    actor.user_id
                )));
            }
            Some(_) => {}
            None => schema::set_meta(&mut tx, "user_id", &actor.user_id).await?,
        }
        let client_id = match schema::meta(&mut tx, "client_id").await?.and_then(|c| uuid::Uuid::parse_str(&c).ok()) {
            Some(id) => id,
            None => {
                let id = uuid::Uuid::now_v7();
                schema::set_meta(&mut tx, "client_id", &id.to_string()).await?;
                id
            }
        };
        if resync {
            sqlx::query("DELETE FROM _engine_meta WHERE key = 'cursor'").execute(&mut *tx).await?;
            sqlx::query("DELETE FROM _engine_row_buckets").execute(&mut *tx).await?;
            schema::set_meta(&mut tx, "sweep", "1").await?;
            apply::rebase(&mut tx, &app, &actor).await?;
        }
        // The clock goes on from its last reading: after a restart (or with the wall clock set
        // back) its writes still order after what it wrote and pulled before.
        let mut clock = HlcClock::new(client_id.to_string());
        if let Some(last) = schema::meta(&mut tx, "clock").await?.and_then(|c| c.parse::<engine_kernel::Hlc>().ok()) {
            clock.observe(&last);
        }
        tx.commit().await?;
        let clock = Mutex::new(clock);
        let rules = app.rule_index();
        Ok(Store { pool, app, rules, actor, client_id, clock })
    }

    pub(crate) fn client_id(&self) -> uuid::Uuid {
        self.client_id
    }

    pub(crate) fn app(&self) -> &App {
        &self.app
    }

    async fn write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Run mutator `name` on the view and queue it, in one transaction. A mutation its local run
    /// refuses is not queued, nor is one with a write the server would certainly refuse
    /// (`forbidden`, whatever the mutator made of it).
    pub(crate) async fn mutate(&self, name: &str, args: Value) -> Result<Queued> {
        let mut tx = self.write().await?;
        let queued = self.queue(&mut tx, name, args).await?;
        tx.commit().await?;
        Ok(queued)
    }

    /// Run and queue a mutation in the caller's transaction.
    async fn queue(&self, conn: &mut SqliteConnection, name: &str, args: Value) -> Result<Queued> {
        let def = *self.app.mutator(name).ok_or_else(|| engine_kernel::Error::UnknownMutator(name.to_owned()))?;
        let hlc = self.clock.lock().unwrap_or_else(std::sync::PoisonError::into_inner).now();
        schema::set_meta(conn, "clock", &hlc.to_string()).await?;
        let client_mutation_id = uuid::Uuid::now_v7();
        let (outcome, refusal) = {
            let mut local = tx::LocalTx::new(conn, &self.app, self.actor.clone(), hlc.clone(), client_mutation_id)
                .checked(&self.rules, &self.actor);
            let outcome = def.run(&mut MutatorCtx::new(&mut local), args.clone()).await;
            (outcome, local.refusal())
        };
        if let Some(refused) = refusal {
            return Err(refused.into());
        }
        let outcome = outcome?;
        let mutation_id = outbox::take_mutation_id(conn).await?;
        let entry = Entry {
            mutation_id,
            client_mutation_id: client_mutation_id.to_string(),
            name: name.to_owned(),
            args: args.to_string(),
            hlc: hlc.to_string(),
        };
        outbox::append(conn, &entry, now_ms()).await?;
        Ok(Queued { mutation_id: u64::try_from(mutation_id).unwrap_or(0), client_mutation_id, outcome })
    }

    /// Up to `limit` mutations to push, in order.
    pub(crate) async fn unpushed(&self, limit: u32) -> Result<Vec<Entry>> {
        let mut conn = self.pool.acquire().await?;
        outbox::unpushed(&mut conn, limit).await
    }

    /// The server's mutation id up to which a pull has shown every mutation.
    pub(crate) async fn synced(&self) -> Result<i64> {
        let mut conn = self.pool.acquire().await?;
        outbox::synced(&mut conn).await
    }

    /// How many mutations wait for a pull to show them.
    pub(crate) async fn pending_count(&self) -> Result<u64> {
        let mut conn = self.pool.acquire().await?;
        outbox::pending_count(&mut conn).await
    }

    /// Record a push's results; a rejection goes to the quarantine and the view is rebased
    /// without it. Returns the tables whose view changed.
    pub(crate) async fn record_results(&self, results: &[MutationResult]) -> Result<BTreeSet<&'static str>> {
        let mut tx = self.write().await?;
        let quarantined = outbox::record(&mut tx, results, now_ms()).await?;
        let tables =
            if quarantined > 0 { apply::rebase(&mut tx, &self.app, &self.actor).await? } else { BTreeSet::new() };
        tx.commit().await?;
        Ok(tables)
    }

    /// Number the outbox on from the server's `last` mutation id.
    pub(crate) async fn renumber(&self, last: u64) -> Result<()> {
        let mut tx = self.write().await?;
        outbox::renumber(&mut tx, last).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The cursor of the last page applied.
    pub(crate) async fn cursor(&self) -> Result<Option<String>> {
        let mut conn = self.pool.acquire().await?;
        schema::meta(&mut conn, "cursor").await
    }

    /// Apply a pull page atomically.
    pub(crate) async fn apply_page(&self, page: &PullResponse, bucket_ttl: Duration) -> Result<Applied> {
        let ttl = i64::try_from(bucket_ttl.as_millis()).unwrap_or(i64::MAX);
        let mut tx = self.write().await?;
        let applied = apply::apply_page(&mut tx, &self.app, &self.actor, page, now_ms(), ttl).await?;
        if let Some(server) = &page.server_hlc {
            // Writes issued after this page order after every write it delivered.
            let last = {
                let mut clock = self.clock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                clock.observe(server);
                clock.now()
            };
            schema::set_meta(&mut tx, "clock", &last.to_string()).await?;
        }
        tx.commit().await?;
        Ok(applied)
    }

    /// The buckets the store holds rows of for the actor (not those it left).
    pub(crate) async fn buckets(&self) -> Result<Vec<engine_kernel::BucketKey>> {
        let mut conn = self.pool.acquire().await?;
        let keys: Vec<String> =
            sqlx::query_scalar("SELECT bucket FROM _engine_buckets WHERE left_at IS NULL ORDER BY bucket")
                .fetch_all(&mut *conn)
                .await?;
        Ok(keys.iter().filter_map(|k| engine_kernel::BucketKey::parse(k).ok()).collect())
    }

    /// Release the buckets held that `synced` leaves out: they count as left now (their rows go
    /// after the bucket TTL, as a lost bucket's do), since the pulls no longer bring them.
    pub(crate) async fn release(&self, synced: impl Fn(&engine_kernel::BucketKey) -> bool) -> Result<()> {
        let mut tx = self.write().await?;
        let keys: Vec<String> =
            sqlx::query_scalar("SELECT bucket FROM _engine_buckets WHERE left_at IS NULL").fetch_all(&mut *tx).await?;
        for key in keys {
            if engine_kernel::BucketKey::parse(&key).is_ok_and(|b| !synced(&b)) {
                sqlx::query("UPDATE _engine_buckets SET left_at = ? WHERE bucket = ?")
                    .bind(now_ms())
                    .bind(&key)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// The quarantined mutations, oldest first.
    pub(crate) async fn quarantined(&self) -> Result<Vec<Quarantined>> {
        let mut conn = self.pool.acquire().await?;
        outbox::quarantined(&mut conn).await
    }

    /// Queue a quarantined mutation again, as a new mutation, in one transaction: refused by
    /// its local run, it stays in the quarantine. Returns `None` when it is not quarantined.
    pub(crate) async fn retry(&self, client_mutation_id: uuid::Uuid) -> Result<Option<Queued>> {
        let mut tx = self.write().await?;
        let Some((name, args)) = outbox::unquarantine(&mut tx, client_mutation_id).await? else { return Ok(None) };
        let args = serde_json::from_str(&args).unwrap_or(Value::Null);
        let queued = self.queue(&mut tx, &name, args).await?;
        tx.commit().await?;
        Ok(Some(queued))
    }

    /// Drop a quarantined mutation. Returns whether it was there.
    pub(crate) async fn discard(&self, client_mutation_id: uuid::Uuid) -> Result<bool> {
        let mut tx = self.write().await?;
        let found = outbox::unquarantine(&mut tx, client_mutation_id).await?.is_some();
        tx.commit().await?;
        Ok(found)
    }

    /// Whether the actor may update `row` of `table`, as far as the store can tell
    /// ([`crate::authorize`]): `None` when only the server can.
    pub(crate) async fn may_update(&self, table: &'static TableMeta, row: &Row) -> Result<Option<bool>> {
        let mut conn = self.pool.acquire().await?;
        let holdings = holdings::read(&mut conn, &self.rules, &self.actor).await?;
        let verdict = crate::authorize::WriteContext::new(&self.rules, &self.actor, holdings).authorize(
            table,
            Some(row),
            Some(row),
        );
        Ok(match verdict {
            crate::authorize::Verdict::Allowed => Some(true),
            crate::authorize::Verdict::Refused(_) => Some(false),
            crate::authorize::Verdict::Unknown => None,
        })
    }

    /// The live rows of `table`'s view whose columns equal `filter`, in key order.
    pub(crate) async fn rows(
        &self,
        table: &'static TableMeta,
        filter: &[(&'static str, Value)],
        limit: Option<u32>,
    ) -> Result<Vec<Row>> {
        let mut conn = self.pool.acquire().await?;
        rows(&mut conn, table, filter, limit).await
    }
}

async fn rows(
    conn: &mut SqliteConnection,
    table: &'static TableMeta,
    filter: &[(&'static str, Value)],
    limit: Option<u32>,
) -> Result<Vec<Row>> {
    let mut columns = Vec::new();
    for (name, value) in filter {
        columns.push((table.filter_column(name)?, value));
    }
    let found = sql::select_live(table, &columns, limit).build().fetch_all(&mut *conn).await?;
    found.iter().map(|r| values::decode_row(table, r)).collect()
}

#[cfg(test)]
mod tests;
