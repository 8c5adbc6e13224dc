//! The LISTEN/NOTIFY adapter: several server instances on one Postgres share signals and
//! presence. Publishing is a `NOTIFY` (delivered after the publishing statement commits); one
//! dedicated session per instance `LISTEN`s and fans signals out locally. When that session is
//! lost, or stops answering, another listens in its place, and every local socket is told to
//! resync, so nothing is missed silently. Every statement has [`ListenNotify::lost_after`] to be
//! answered, and a session that did not answer is closed (`pg/deadline.rs`).
//!
//! Presence lives in two unlogged tables: each instance's presences, and each instance's last
//! heartbeat. An instance that stops heartbeating (killed, cut off) has its presences removed
//! by the others after the heartbeat timeout, and their leaves published.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use engine_kernel::{BoxFuture, BucketKey};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};
use tokio::sync::broadcast;

use super::payload::{decode, encode};
use super::{OpenRealtime, Presence, PresenceState, Realtime, Signal, add_meta};
use crate::error::{Error, Result};
use crate::pg::deadline;
use crate::pg::listener::{self, Heard};

/// The channel every instance listens on.
pub const CHANNEL: &str = "engine_signals";
/// The `application_name` of the listening session.
pub const LISTENER_APPLICATION_NAME: &str = "engine-listener";

/// How long Postgres has, by default, to answer a statement of realtime before its session is
/// taken for lost; also how long the listening session may stay silent before it is checked.
pub const DEFAULT_REALTIME_LOST_AFTER: Duration = Duration::from_secs(10);

/// The shortest [`ListenNotify::lost_after`]: below it, a busy Postgres would be taken for a lost
/// one and the listening session replaced over and over.
pub(crate) const MIN_LOST_AFTER: Duration = Duration::from_secs(1);

/// Realtime across instances through the Postgres at `database_url`.
pub fn listen_notify(database_url: impl Into<String>) -> ListenNotify {
    ListenNotify { url: database_url.into(), lost_after: DEFAULT_REALTIME_LOST_AFTER }
}

/// Realtime across instances. Build with [`listen_notify`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ListenNotify {
    url: String,
    lost_after: Duration,
}

impl ListenNotify {
    /// How long Postgres has to answer a statement (a notification, a presence) before its
    /// session is taken for lost and closed, and how long the listening session may hear nothing
    /// before it is asked whether it still answers (default
    /// [`DEFAULT_REALTIME_LOST_AFTER`]; 1 s at least).
    pub fn lost_after(mut self, deadline: Duration) -> Self {
        self.lost_after = deadline.max(MIN_LOST_AFTER);
        self
    }
}

impl OpenRealtime for ListenNotify {
    fn needs(&self) -> Option<&'static str> {
        Some("postgres")
    }

    fn open(self: Box<Self>, heartbeat_timeout: Duration) -> BoxFuture<'static, Result<Arc<dyn Realtime>>> {
        Box::pin(async move {
            Ok(Arc::new(Shared::open(&self.url, heartbeat_timeout, self.lost_after).await?) as Arc<dyn Realtime>)
        })
    }
}

struct Shared {
    pool: PgPool,
    /// How long Postgres has to answer a statement.
    lost_after: Duration,
    instance: uuid::Uuid,
    sender: broadcast::Sender<Signal>,
    /// This instance's presences, to announce again if the others took it for dead.
    local: Arc<Mutex<HashMap<String, Presence>>>,
    tasks: Vec<tokio::task::AbortHandle>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

const SCHEMA: &str = "
    CREATE UNLOGGED TABLE IF NOT EXISTS _engine_instances (instance uuid PRIMARY KEY, seen_at timestamptz NOT NULL);
    CREATE UNLOGGED TABLE IF NOT EXISTS _engine_presence (
        presence_ref text PRIMARY KEY,
        instance uuid NOT NULL,
        bucket text NOT NULL,
        key text NOT NULL,
        meta jsonb NOT NULL);
    CREATE INDEX IF NOT EXISTS _engine_presence_bucket ON _engine_presence (bucket);";

impl Shared {
    async fn open(url: &str, timeout: Duration, lost_after: Duration) -> Result<Self> {
        let options: PgConnectOptions = url.parse().map_err(|e| Error::config_from("not a Postgres URL", e))?;
        // A session is checked as the pool lends it, as sqlx does by default, but the check has a
        // quarter of the deadline: a session cut while idle is closed, and the pool opens a new
        // one, within the deadline of the statement that asked for one.
        let check = lost_after / 4;
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .test_before_acquire(false)
            .before_acquire(move |conn, _| Box::pin(async move { Ok(deadline::answers(conn, check).await) }))
            .connect_with(options.clone())
            .await
            .map_err(|e| Error::config_from("cannot connect to Postgres for realtime", e))?;
        // Serialize the creation of the tables with other instances starting at the same time.
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(7368754935)").execute(&mut *tx).await?;
        sqlx::raw_sql(SCHEMA).execute(&mut *tx).await?;
        tx.commit().await?;
        let instance = uuid::Uuid::now_v7();
        sqlx::query("INSERT INTO _engine_instances (instance, seen_at) VALUES ($1, now())")
            .bind(instance)
            .execute(&pool)
            .await?;
        let (sender, _) = broadcast::channel(super::in_process::CHANNEL_CAPACITY);
        let local = Arc::default();
        let listening =
            Self::listen(options.application_name(LISTENER_APPLICATION_NAME), sender.clone(), lost_after).await?;
        let beating = Beat { pool: pool.clone(), instance, timeout, lost_after };
        let heartbeat = tokio::spawn(heartbeat(beating, Arc::clone(&local))).abort_handle();
        Ok(Shared { pool, lost_after, instance, sender, local, tasks: vec![listening, heartbeat] })
    }

    /// Listen, and fan every notification out locally; resync after a lost connection.
    async fn listen(
        options: PgConnectOptions,
        sender: broadcast::Sender<Signal>,
        lost_after: Duration,
    ) -> Result<tokio::task::AbortHandle> {
        listener::listen(options, CHANNEL, lost_after, move |heard| {
            let signal = match heard {
                Heard::Notification(payload) => decode(payload),
                // What came meanwhile is gone.
                Heard::Missed => Some(Signal::Resync),
            };
            if let Some(signal) = signal {
                let _ = sender.send(signal);
            }
        })
        .await
    }

    async fn notify(&self, payload: &Value) -> Result<()> {
        let notify = sqlx::query("SELECT pg_notify($1, $2)").bind(CHANNEL).bind(payload.to_string());
        deadline::on_pool(&self.pool, self.lost_after, async |conn| notify.execute(conn).await).await?;
        Ok(())
    }
}

/// What the heartbeat needs.
struct Beat {
    pool: PgPool,
    instance: uuid::Uuid,
    /// The heartbeat timeout.
    timeout: Duration,
    /// How long Postgres has to answer a statement.
    lost_after: Duration,
}

/// Keep this instance alive; remove the presences of instances that are not, publishing their
/// leaves.
async fn heartbeat(beat: Beat, local: Arc<Mutex<HashMap<String, Presence>>>) {
    let Beat { pool, instance, timeout, lost_after } = beat;
    let mut every = tokio::time::interval((timeout / 3).max(Duration::from_millis(100)));
    let timeout_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
    loop {
        every.tick().await;
        let beating = sqlx::query(
            "INSERT INTO _engine_instances (instance, seen_at) VALUES ($1, now())
             ON CONFLICT (instance) DO UPDATE SET seen_at = now() RETURNING (xmax = 0)",
        )
        .bind(instance);
        let beat = deadline::on_pool(&pool, lost_after, async |conn| beating.fetch_all(conn).await)
            .await
            .and_then(|rows| rows.first().map(|row| row.try_get::<bool, _>(0)).transpose().map_err(Error::Database));
        match beat {
            Ok(Some(true)) => {
                // The others took this instance for dead and removed its presences: announce them
                // again.
                let presences: Vec<Presence> =
                    local.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
                for presence in presences {
                    if let Err(err) = store(&pool, lost_after, instance, &presence).await {
                        tracing::warn!(error = ?crate::error::Chain(&err), "re-announcing a presence failed");
                    }
                }
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = ?crate::error::Chain(&err), "realtime heartbeat failed"),
        }
        let reaping = sqlx::query(
            "WITH dead AS (
                 DELETE FROM _engine_instances WHERE seen_at < now() - make_interval(secs => $1::float8 / 1000) RETURNING instance),
             gone AS (
                 DELETE FROM _engine_presence p
                 WHERE p.instance IN (SELECT instance FROM dead)
                    OR NOT EXISTS (SELECT 1 FROM _engine_instances i WHERE i.instance = p.instance)
                 RETURNING p.bucket, p.key, p.meta)
             SELECT pg_notify($2, json_build_object('k', 'd', 'b', bucket, 'j', '{}'::json,
                                                    'l', json_build_object(key, json_build_array(meta)))::text)
             FROM gone",
        )
        .bind(timeout_ms)
        .bind(CHANNEL);
        if let Err(err) = deadline::on_pool(&pool, lost_after, async |conn| reaping.execute(conn).await).await {
            tracing::warn!(error = ?crate::error::Chain(&err), "removing presences of dead instances failed");
        }
    }
}

/// Store a presence and publish its join; Postgres has `lost_after` to answer.
async fn store(pool: &PgPool, lost_after: Duration, instance: uuid::Uuid, presence: &Presence) -> Result<()> {
    let mut joins = PresenceState::new();
    add_meta(&mut joins, &presence.key, presence.meta.clone());
    let payload = json!({"k": "d", "b": presence.bucket, "j": joins, "l": {}});
    let storing = sqlx::query(
        "WITH stored AS (
             INSERT INTO _engine_presence (presence_ref, instance, bucket, key, meta) VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (presence_ref) DO UPDATE SET meta = EXCLUDED.meta, instance = EXCLUDED.instance)
         SELECT pg_notify($6, $7)",
    )
    .bind(&presence.presence_ref)
    .bind(instance)
    .bind(presence.bucket.as_str())
    .bind(&presence.key)
    .bind(Value::Object(presence.meta.clone()))
    .bind(CHANNEL)
    .bind(payload.to_string());
    deadline::on_pool(pool, lost_after, async |conn| storing.execute(conn).await).await?;
    Ok(())
}

impl Realtime for Shared {
    fn publish(&self, signal: Signal) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            match encode(&signal) {
                Some(payload) => self.notify(&payload).await,
                None => {
                    let _ = self.sender.send(signal);
                    Ok(())
                }
            }
        })
    }

    fn subscribe(&self) -> broadcast::Receiver<Signal> {
        self.sender.subscribe()
    }

    fn track(&self, presence: Presence) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            self.local
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(presence.presence_ref.clone(), presence.clone());
            store(&self.pool, self.lost_after, self.instance, &presence).await
        })
    }

    fn untrack<'a>(&'a self, bucket: &'a BucketKey, presence_ref: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            self.local.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(presence_ref);
            let removing = sqlx::query(
                "WITH gone AS (DELETE FROM _engine_presence WHERE presence_ref = $1 AND bucket = $2 RETURNING bucket, key, meta)
                 SELECT pg_notify($3, json_build_object('k', 'd', 'b', bucket, 'j', '{}'::json,
                                                        'l', json_build_object(key, json_build_array(meta)))::text)
                 FROM gone",
            )
            .bind(presence_ref)
            .bind(bucket.as_str())
            .bind(CHANNEL);
            deadline::on_pool(&self.pool, self.lost_after, async |conn| removing.execute(conn).await).await?;
            Ok(())
        })
    }

    fn presence_state<'a>(
        &'a self,
        buckets: &'a [BucketKey],
    ) -> BoxFuture<'a, Result<BTreeMap<BucketKey, PresenceState>>> {
        Box::pin(async move {
            let keys: Vec<&str> = buckets.iter().map(BucketKey::as_str).collect();
            let reading = sqlx::query(
                "SELECT p.bucket, p.key, p.meta FROM _engine_presence p
                 JOIN _engine_instances i ON i.instance = p.instance
                 WHERE p.bucket = ANY($1) ORDER BY p.presence_ref",
            )
            .bind(&keys);
            let rows =
                deadline::on_pool(&self.pool, self.lost_after, async |conn| reading.fetch_all(conn).await).await?;
            let mut states: BTreeMap<BucketKey, PresenceState> =
                buckets.iter().map(|b| (b.clone(), PresenceState::new())).collect();
            for row in rows {
                let bucket: String = row.try_get(0).map_err(Error::Database)?;
                let key: String = row.try_get(1).map_err(Error::Database)?;
                let meta: Value = row.try_get(2).map_err(Error::Database)?;
                if let (Ok(bucket), Value::Object(meta)) = (BucketKey::parse(&bucket), meta)
                    && let Some(state) = states.get_mut(&bucket)
                {
                    add_meta(state, &key, meta);
                }
            }
            Ok(states)
        })
    }
}
