//! SQLite plumbing under the flows of the SQLite store: the file opened in WAL mode with one
//! writing connection and a pool of readers, the lock that keeps a second server process off
//! the file, and locks by name in the process (`named_locks.rs`). It knows no flow and no rule; values and quoting are `engine_sqlite`'s, shared
//! with the client's store.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, SqliteConnection, SqlitePool};
use tokio::sync::{Mutex, MutexGuard};

pub(crate) use engine_sqlite::ident;
pub(crate) use named_locks::{Held, NamedLocks};

mod named_locks;

use crate::error::{Error, Result};
use crate::row_json::write_json;

/// The path a `sqlite://` URL names (`sqlite://notes.db`, `sqlite:///var/lib/notes.db`,
/// `sqlite:notes.db`), or `None` when `url` is not one.
pub fn sqlite_path(url: &str) -> Option<PathBuf> {
    let rest = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// When a commit is on disk (`PRAGMA synchronous`), with the write-ahead log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// Every commit is synced to disk before it is answered: a mutation answered `applied`
    /// survives the process being killed and the machine losing power (`synchronous = FULL`).
    #[default]
    Full,
    /// A commit is written to the operating system before it is answered, and synced at
    /// checkpoints: it survives the process being killed, not the machine losing power
    /// (`synchronous = NORMAL`).
    Process,
}

/// How long a statement waits for a lock another connection holds (a checkpoint, say).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request waits for its turn at the store by default, as for a Postgres session.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// The readers a store opens by default: one per CPU, between 2 and 8.
pub(crate) fn default_readers() -> u32 {
    u32::try_from(std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)).unwrap_or(2).clamp(2, 8)
}

/// The rows a connection's thread hands over to the task reading them before it waits for the
/// task: a walk step of a page of the default size (1,000 rows) in one go. With sqlx's 50, such
/// a step stopped the thread twenty times, each a wake-up of the task and another of the thread.
const ROW_BUFFER: usize = 1_000;

/// An open SQLite database: one connection writes, the pool reads. SQLite lets one transaction
/// write at a time; the writer's lock queues the store's writes in the process instead of
/// letting them retry on `SQLITE_BUSY`.
#[derive(Debug)]
pub(crate) struct Db {
    writer: Mutex<SqliteConnection>,
    pub(crate) readers: SqlitePool,
    pub(crate) path: PathBuf,
    /// Locks by name, where Postgres takes advisory locks: held without the writer.
    pub(crate) locks: NamedLocks,
    /// Held while the store is open: a second process's store refuses to open the file.
    _lock: std::fs::File,
}

impl Db {
    /// Open (and create when missing) the database at `path`, refusing it when another process
    /// serves it, with `readers` reading connections, each waited for at most `wait`.
    pub(crate) async fn open(path: &Path, durability: Durability, readers: u32, wait: Duration) -> Result<Db> {
        let lock = lock_file(path)?;
        let options = SqliteConnectOptions::from_str("sqlite:")
            .map_err(|e| Error::config_from("SQLite options", e))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Process => SqliteSynchronous::Normal,
            })
            .foreign_keys(false)
            .busy_timeout(BUSY_TIMEOUT)
            .row_buffer_size(ROW_BUFFER);
        let opening = |e| Error::config_from(format!("cannot open the SQLite database {}", path.display()), e);
        let writer = options.clone().connect().await.map_err(opening)?;
        let readers = SqlitePoolOptions::new()
            .max_connections(readers.max(1))
            .acquire_timeout(wait)
            .connect_with(options.read_only(true))
            .await
            .map_err(opening)?;
        Ok(Db { writer: Mutex::new(writer), readers, path: path.to_owned(), locks: NamedLocks::default(), _lock: lock })
    }

    /// The writing connection, once the writes queued before are done.
    pub(crate) async fn writer(&self) -> MutexGuard<'_, SqliteConnection> {
        self.writer.lock().await
    }
}

/// The file `path` locked for this process (an advisory lock on the database file itself,
/// which SQLite's own locks do not touch), created when missing.
fn lock_file(path: &Path) -> Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| Error::config_from(format!("cannot open the SQLite database {}", path.display()), e))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::config(format!(
            "another server process serves the SQLite database {}: one process serves a SQLite \
             file (run several instances on Postgres)",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(Error::config_from(format!("cannot lock the SQLite database {}", path.display()), e))
        }
    }
}

/// Run statements that bind nothing (DDL), unprepared.
pub(crate) async fn exec(conn: &mut SqliteConnection, sql: &str) -> Result<()> {
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned())).execute(&mut *conn).await?;
    Ok(())
}

/// The wall clock in milliseconds since the epoch: how the SQLite store keeps times.
pub(crate) fn now_ms() -> i64 {
    i64::try_from(engine_kernel::hlc::wall_clock_ms()).unwrap_or(i64::MAX)
}

/// Write to `out` the JSON object of a row of `table` whose columns but its floats SQLite wrote
/// as `written` (the walk's statement does), its floats after them, read from `row` where `at`
/// says (given a column's index in the table). A float JSON has no form for travels as null,
/// as in the column's JSON value.
pub(crate) fn write_row(
    table: &engine_kernel::TableMeta,
    written: &str,
    row: &sqlx::sqlite::SqliteRow,
    at: impl Fn(usize) -> usize,
    out: &mut Vec<u8>,
) -> Result<()> {
    use sqlx::Row as _;
    let head = written.strip_suffix('}').ok_or_else(|| Error::internal("SQLite wrote a row that is no object"))?;
    out.extend_from_slice(head.as_bytes());
    let mut first = head == "{";
    for (i, column) in table.columns.iter().enumerate() {
        if !engine_sqlite::values::is_float(column.sql_type) {
            continue;
        }
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        write_json(out, column.name)?;
        out.push(b':');
        write_json(out, &row.try_get::<Option<f64>, _>(at(i))?.filter(|f| f.is_finite()))?;
    }
    out.push(b'}');
    Ok(())
}

/// A row of `table` read from the first columns of `row`, in column order.
pub(crate) fn decode_row(
    table: &engine_kernel::TableMeta,
    row: &sqlx::sqlite::SqliteRow,
) -> Result<engine_kernel::Row> {
    let mut out = engine_kernel::Row::new();
    for (i, column) in table.columns.iter().enumerate() {
        out.insert(column.name.to_owned(), engine_sqlite::values::decode(row, i, column)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
