//! Pull: the rows and tombstones of the actor's buckets since the cursor, below the safe horizon
//! (`docs/design.md` §1–3, `docs/protocol.md#post-syncpull`).
//!
//! One pull is one `REPEATABLE READ` transaction. Its horizon is the snapshot's `xmin`: every
//! transaction below it has finished, so a transaction that commits late is delivered by a later
//! pull instead of being skipped. Each group of buckets in the cursor goes on from its own
//! position: first the tombstones up to the target of its walk, then the walk through its rows
//! (`walk.rs`), so a row is never sent before a tombstone that came before it.
//!
//! - `start.rs`: the pull's first statement; `horizon.rs`: the safe horizon and its floor.
//! - `cursor.rs`: the cursor; `bucket_sets.rs`: the bucket sets cursors name by digest.
//! - `page.rs`: the page as it fills, bounded by entries and bytes; `pulled.rs`: the answer.
//! - `plan.rs`: which groups a pull walks, parks, removes or resyncs (pure, with its table).
//! - `walk.rs`: the walk through a group's rows.
//! - `sqlite.rs`: the pull on SQLite, from the same plan and page (`walk/sqlite.rs`,
//!   `bucket_sets/sqlite.rs` its walk and sets).

mod bucket_sets;
pub(crate) mod cursor;
mod horizon;
mod page;
mod plan;
mod pulled;
pub(crate) mod sqlite;
mod start;
mod walk;

#[cfg(test)]
mod tests;

use std::sync::Mutex;

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::wire::{PullProgress, PullRequest};
use engine_kernel::{Actor, BucketKey};
use serde_json::Value;
use sqlx::{PgConnection, Row as _};

pub(crate) use horizon::next_xid;
pub use pulled::{Pulled, PulledChange};
pub(crate) use start::PullStart;

use crate::core::{Clock, Core, StoreLimits};
use crate::error::{Error, Result};
use crate::pg::sql;
use crate::rules::held;
use bucket_sets::Sets;
use cursor::{Cursor, CursorKey, Group, SetDigest, TombstonePosition, Walk};
use page::Page;

/// The page size when the request names none.
pub const DEFAULT_PULL_LIMIT: u32 = 1_000;
/// The largest page a request may ask for.
pub const MAX_PULL_LIMIT: u32 = 10_000;

/// How often a pull takes a fresh snapshot to include the client's own last mutation.
const OWN_WRITES_RETRIES: u32 = 3;

/// Planner settings of a pull's transaction. A page's plan must not depend on statistics the
/// planner may lack (rows just written are never analyzed): the walk's ordered index range scans
/// are the plan, and these keep the planner off the paths that would read whole buckets. A path
/// they rule out costs 10^10, which would make every such plan worth compiling: no JIT.
pub(super) const PLANNER: &str = "SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off; SET LOCAL max_parallel_workers_per_gather = 0; SET LOCAL jit = off";

/// What pulls keep between requests, in one process: the horizon floor, the key that signs
/// cursors (read from the database once) and the bucket sets cursors name.
#[derive(Debug, Default)]
pub(crate) struct PullState {
    floor: horizon::Floor,
    cursor_key: tokio::sync::OnceCell<CursorKey>,
    bucket_sets: Mutex<bucket_sets::SetCache>,
}

impl PullState {
    /// The key that signs this database's cursors.
    async fn cursor_key(&self, conn: &mut PgConnection) -> Result<CursorKey> {
        self.cursor_key.get_or_try_init(|| bucket_sets::cursor_key(conn)).await.cloned()
    }
}

/// The safe horizon now ([`horizon`]), never below one this process has read.
pub(crate) async fn horizon(core: &Core, pulls: &PullState) -> Result<u64> {
    horizon::horizon(core, &pulls.floor).await
}

/// The most entries the request's page holds.
fn page_limit(request: &PullRequest) -> Result<usize> {
    Ok(match request.limit {
        Some(0) => return Err(Error::MalformedRequest("`limit` is at least 1".into())),
        Some(n) => n.min(MAX_PULL_LIMIT),
        None => DEFAULT_PULL_LIMIT,
    } as usize)
}

pub(crate) async fn pull(core: &Core, pulls: &PullState, actor: &Actor, request: &PullRequest) -> Result<Pulled> {
    let limit = page_limit(request)?;
    core.on_session(async |conn| pull_on(core, pulls, conn, actor, request, limit).await).await
}

/// A page of at most `limit` rows, read on `conn`.
async fn pull_on(
    core: &Core,
    pulls: &PullState,
    conn: &mut PgConnection,
    actor: &Actor,
    request: &PullRequest,
    limit: usize,
) -> Result<Pulled> {
    // Read before the pull's transaction begins: the first reading may write it.
    let key = pulls.cursor_key(conn).await?;
    // Read your writes: when the client's own last mutation is above this snapshot's horizon
    // (a transaction that began before it still runs, or one that cannot be placed in another
    // database has just ended), a fresh snapshot a moment later usually has it.
    let mut attempt = 0;
    let (mut tx, start) = loop {
        let floor = pulls.floor.get();
        // The planner's settings go with `BEGIN`, in one round trip: they take no snapshot.
        let begin = format!("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; {PLANNER}");
        let mut tx = sqlx::Connection::begin_with(&mut *conn, sqlx::AssertSqlSafe(begin)).await?;
        // The first statement that reads fixes the snapshot and reads the horizon from it, with
        // the tombstone horizon and the client's sequence.
        let start = start::read_pull_start(core, &pulls.floor, &mut tx, actor, request.client_id, floor).await?;
        if start.synced_mutation_id >= start.last_mutation_id || attempt == OWN_WRITES_RETRIES {
            break (tx, start);
        }
        tx.rollback().await?;
        attempt += 1;
        tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(attempt))).await;
    };
    let taken = take_page(
        &mut PgSnapshot { core, conn: &mut tx },
        &Reading { rules: &core.rules, limits: &core.limits, clock: &core.clock, key: &key, sets: &pulls.bucket_sets },
        actor,
        request,
        limit,
        &start,
    )
    .await?;
    tx.commit().await?;
    let bound = core.limits.bucket_set_bytes;
    bucket_sets::store(conn, &pulls.bucket_sets, &actor.user_id, &taken.named, taken.new, bound).await?;
    Ok(taken.pulled)
}

/// What a pull reads of its store within its snapshot, one implementation per backend: Postgres
/// here ([`PgSnapshot`]), SQLite in `sqlite.rs`.
trait Snapshot: Send {
    /// `user`'s bucket sets `digests` names, from `cache` or the store; a set not found is
    /// absent.
    fn load_sets(
        &mut self,
        cache: &Mutex<bucket_sets::SetCache>,
        user: &str,
        digests: Vec<SetDigest>,
    ) -> impl Future<Output = Result<Sets>> + Send;
    /// Take the tombstones of `group` below `to` into `page`; whether all were taken.
    fn tombstones(
        &mut self,
        group: &mut Group,
        to: u64,
        page: &mut Page<'_>,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Walk `group` from where its walk stands until the walk is done (`true`) or the page is
    /// full (`false`).
    fn walk(&mut self, group: &mut Group, page: &mut Page<'_>) -> impl Future<Output = Result<bool>> + Send;
}

/// What a pull reads besides its snapshot: the rules, the bounds, the clock, the cursor key and
/// the bucket sets known.
struct Reading<'a> {
    pub(crate) rules: &'a RuleIndex,
    pub(crate) limits: &'a StoreLimits,
    pub(crate) clock: &'a Clock,
    pub(crate) key: &'a CursorKey,
    pub(crate) sets: &'a Mutex<bucket_sets::SetCache>,
}

/// A page taken, and the bucket sets its cursor names: those not stored yet are to be stored,
/// and all marked used, before it is answered.
struct Taken {
    pub(crate) pulled: Pulled,
    pub(crate) named: Vec<SetDigest>,
    pub(crate) new: Vec<(SetDigest, Vec<BucketKey>)>,
}

/// The page of a pull whose snapshot `snapshot` began with `start` (`docs/design.md` §3): the
/// cursor opened, the plan made, each walked group scanned while the page has room, and the
/// next cursor sealed.
async fn take_page<S: Snapshot>(
    snapshot: &mut S,
    reading: &Reading<'_>,
    actor: &Actor,
    request: &PullRequest,
    limit: usize,
    start: &PullStart,
) -> Result<Taken> {
    let (horizon, gc_horizon) = (start.horizon, start.tombstone_horizon);
    // Past the bucket bound an actor still syncs (`docs/protocol.md#the-bucket-bound`): a
    // subset pull of at most the bound is served it, a full pull the part `within_bound` picks.
    let bound = reading.limits.buckets_per_actor;
    let subset = plan::subset(request, &start.held);
    if let Some(subset) = subset.as_ref().filter(|subset| subset.len() > bound) {
        return Err(Error::TooManyBuckets { asked: subset.len(), limit: bound });
    }
    let bounded = subset.is_none().then(|| held::within_bound(&start.held, &start.since, bound)).flatten();
    let held = bounded.as_ref().map_or(&start.held, |(served, _)| served);
    let (mut cursor, mut sets, mut reset) = match request.cursor.as_deref() {
        None => (Cursor::default(), Sets::new(), false),
        Some(text) => match open_cursor(snapshot, reading, &actor.user_id, text).await? {
            Some((cursor, sets)) => (cursor, sets, false),
            None => (Cursor::default(), Sets::new(), true),
        },
    };
    if plan::needs_reset(&cursor, gc_horizon) {
        // Tombstones this client still needs were collected: start its buckets afresh.
        cursor = Cursor::default();
        sets.clear();
        reset = true;
    }
    let rules = reading.rules;
    if let Some(restart) = &request.restart {
        plan::restart(&mut cursor, restart, subset.as_deref());
    }
    let mut plan = plan::plan(cursor, held, &start.since, subset.as_deref(), |rule| rules.version(rule), horizon)?;

    let asked = std::mem::take(&mut plan.asked);
    let mut page = Page::new(rules, &asked, limit, reading.limits.page_bytes);
    for group in &mut plan.walked {
        if page.is_full() {
            break;
        }
        scan_group(snapshot, group, horizon, &mut page).await?;
    }
    let has_more = plan::has_more(&plan, horizon);
    let progress = has_more.then(|| {
        let (done, total) =
            plan.walked.iter().map(|g| walk::progress(rules, g, horizon)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        PullProgress { done, total }
    });
    let removed_buckets = std::mem::take(&mut plan.removed);
    let groups = plan::next_groups(plan);

    let versions = groups
        .iter()
        .flat_map(|g| g.buckets.iter().map(|b| b.rule()))
        .filter_map(|rule| Some((rule.to_owned(), rules.version(rule)?.to_owned())))
        .collect();
    let sealed = Cursor::new(groups, versions).seal(reading.key, &actor.user_id, &sets);

    // The server's clock reads past every stamp this page delivers, so the client's next
    // writes order after them, whichever instance stamped them.
    let server_hlc = reading.clock.tick_after(page.newest().as_ref());
    let mut pulled = page.finish();
    pulled.removed_buckets = removed_buckets;
    pulled.cursor = sealed.text;
    pulled.has_more = has_more;
    pulled.reset = reset;
    pulled.last_mutation_id = start.last_mutation_id;
    pulled.synced_mutation_id = Some(start.synced_mutation_id);
    pulled.server_hlc = Some(server_hlc);
    pulled.progress = progress;
    pulled.bounded = bounded.map(|(_, bounded)| bounded);
    Ok(Taken { pulled, named: sealed.named, new: sealed.new })
}

/// The cursor `text`, opened, with the stored bucket sets it names; `None` when it is not a
/// cursor of this database for this user, or names a set that is gone.
async fn open_cursor<S: Snapshot>(
    snapshot: &mut S,
    reading: &Reading<'_>,
    user: &str,
    text: &str,
) -> Result<Option<(Cursor, Sets)>> {
    let Ok(opened) = Cursor::open(text, reading.key, user) else { return Ok(None) };
    let digests: Vec<SetDigest> = opened.stored_sets().cloned().collect();
    let sets = if digests.is_empty() { Sets::new() } else { snapshot.load_sets(reading.sets, user, digests).await? };
    let cursor = opened.resolve(|digest| sets.get(digest).map(|set| set.as_ref().clone())).ok();
    Ok(cursor.map(|cursor| (cursor, sets)))
}

/// Take what `group` has below `horizon` into `page`, as far as it has room: tombstones up to
/// the walk's target, then the walk; a finished walk starts the next, up to `horizon`.
async fn scan_group<S: Snapshot>(snapshot: &mut S, group: &mut Group, horizon: u64, page: &mut Page<'_>) -> Result<()> {
    while !page.is_full() && !group.is_caught_up(horizon) && plan::is_ready(group, horizon) {
        let to = group.walk.get_or_insert(Walk { to: horizon.max(group.rows), selection: None, point: None }).to;
        if group.tombstones < TombstonePosition::at(to) && !snapshot.tombstones(group, to, page).await? {
            return Ok(());
        }
        if to > group.rows && !snapshot.walk(group, page).await? {
            return Ok(());
        }
        group.rows = to;
        group.walk = None;
    }
    Ok(())
}

/// A pull's snapshot on Postgres: its `REPEATABLE READ` transaction.
struct PgSnapshot<'c> {
    core: &'c Core,
    conn: &'c mut PgConnection,
}

impl Snapshot for PgSnapshot<'_> {
    async fn load_sets(
        &mut self,
        cache: &Mutex<bucket_sets::SetCache>,
        user: &str,
        digests: Vec<SetDigest>,
    ) -> Result<Sets> {
        bucket_sets::load(self.conn, cache, user, digests).await
    }

    async fn tombstones(&mut self, group: &mut Group, to: u64, page: &mut Page<'_>) -> Result<bool> {
        scan_tombstones(self.conn, group, to, page).await
    }

    async fn walk(&mut self, group: &mut Group, page: &mut Page<'_>) -> Result<bool> {
        walk::walk(self.core, self.conn, group, page).await
    }
}

/// Take the tombstones of `group` below `to` into `page`; whether all were taken.
async fn scan_tombstones(conn: &mut PgConnection, group: &mut Group, to: u64, page: &mut Page<'_>) -> Result<bool> {
    let limit = page.entries_left();
    if limit == 0 {
        return Ok(false);
    }
    let keys: Vec<&str> = group.buckets.iter().map(BucketKey::as_str).collect();
    let rows = sqlx::query(
        // Ordered by the column, not by the text the select list names `xid` as: text would sort
        // transaction 100 before 99, and a page cut there would skip tombstones.
        "SELECT t.id, t.xid::text, t.table_name, t.key, t.buckets FROM _engine_tombstones AS t
         WHERE (t.xid, t.id) > ($1::text::xid8, $2) AND t.xid < $3::text::xid8 AND t.buckets && $4::text[]
         ORDER BY t.xid, t.id LIMIT $5",
    )
    .bind(group.tombstones.xid.to_string())
    .bind(group.tombstones.id)
    .bind(to.to_string())
    .bind(&keys)
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .fetch_all(&mut *conn)
    .await?;
    let taken = rows.len();
    for row in rows {
        let id: i64 = row.try_get(0).map_err(Error::Database)?;
        let xid: String = row.try_get(1).map_err(Error::Database)?;
        let table: String = row.try_get(2).map_err(Error::Database)?;
        let key: Value = row.try_get(3).map_err(Error::Database)?;
        let buckets: Vec<String> = row.try_get(4).map_err(Error::Database)?;
        let buckets =
            buckets.iter().filter_map(|b| BucketKey::parse(b).ok()).filter(|b| group.buckets.contains(b)).collect();
        let xid = sql::xid(&xid)?;
        group.tombstones = TombstonePosition { xid, id };
        if let Value::Object(key) = key {
            page.add_tombstone(table, key, buckets);
        }
    }
    if taken == limit {
        return Ok(false);
    }
    group.tombstones = group.tombstones.max(TombstonePosition::at(to));
    Ok(true)
}
