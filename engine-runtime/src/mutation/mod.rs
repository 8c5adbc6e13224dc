//! The mutator transaction, on Postgres or SQLite: the store side of `MutatorCtx`. Every write is
//! authorized (`authorize.rs`) and merged by the table's policy (`merge.rs`), every read is
//! scoped to the actor's buckets, and the buckets the mutation affects are collected for the
//! pings after commit.
//!
//! - `conn.rs`: the connection and transaction a mutation runs on, and the batching of its
//!   last insert with its record.
//! - `authorize.rs`: the authorization rule and the state it keeps.
//! - `merge.rs`: field and collaborative merges.
//! - `statements.rs`: the SQL of reads and writes on one table; `sqlite.rs`: the same on SQLite.
//! - `blob_refs.rs`: who wrote each blob key into a row; `blob_reads.rs`: who may read it.
//! - `errors.rs`: how failures are classified for the push protocol.

mod authorize;
mod blob_reads;
mod blob_refs;
mod bounds;
mod conn;
mod errors;
pub(crate) mod merge;
mod required;
mod sqlite;
mod statements;

use std::collections::BTreeSet;

use engine_kernel::rules::buckets::param_text;
use engine_kernel::rules::{FilterValue, Membership};
use engine_kernel::{Actor, BoxFuture, BucketKey, Hlc, MergePolicy, MutatorTx, Row, TableMeta};
use serde_json::Value;

pub(crate) use authorize::Assumed;
pub(crate) use blob_reads::{can_read_blob, can_read_blob_on_sqlite};
pub(crate) use blob_refs::key_lock;
pub(crate) use bounds::depth;
pub(crate) use conn::{Conn, PendingInsert};
#[cfg(test)]
pub(crate) use errors::UNCONFIRMED;
pub(crate) use errors::{ASK_INSTEAD, DatabaseRefusal, to_kernel};
pub(crate) use required::Required;

use crate::core::Shared;
use crate::pg::values::decode_row;
use authorize::forbidden_change;
use errors::Failure;

type KernelResult<T> = engine_kernel::Result<T>;

/// A mutation's view of the store.
pub(crate) struct ServerTx<'t> {
    conn: Conn<'t>,
    core: &'t Shared,
    actor: Actor,
    hlc: Hlc,
    /// The mutation's `clientMutationId`, which seeds its ids.
    seed: uuid::Uuid,
    /// What the mutation knows of the actor's buckets.
    holdings: authorize::Holdings,
    /// Buckets whose rows the mutation changed.
    pub(crate) affected: BTreeSet<BucketKey>,
    /// Claim values (`user_id=carol`) whose membership rows the mutation wrote.
    pub(crate) membership_changes: BTreeSet<String>,
    /// The first failure of a statement: the transaction is aborted and the mutation fails.
    failure: Option<Failure>,
    /// The last insert, authorized but not yet sent.
    pending: Option<PendingInsert>,
    /// Rows the mutation required without reading them, for its record to confirm.
    required: Vec<Required>,
    /// Whether the mutation's clock is the server's (its client sent none): its writes then
    /// order after every write they meet, on this instance or another.
    server_stamped: bool,
    /// How many writes the mutation made, and how many of them lost every merge.
    writes: usize,
    lost: usize,
}

impl<'t> ServerTx<'t> {
    pub(crate) fn new(conn: Conn<'t>, core: &'t Shared, actor: Actor, hlc: Hlc, seed: uuid::Uuid) -> Self {
        ServerTx {
            conn,
            core,
            actor,
            hlc,
            seed,
            holdings: authorize::Holdings::default(),
            affected: BTreeSet::new(),
            membership_changes: BTreeSet::new(),
            failure: None,
            pending: None,
            required: Vec::new(),
            server_stamped: false,
            writes: 0,
            lost: 0,
        }
    }

    /// This transaction with its write permissions assumed where they can be, for the
    /// mutation's record statement to confirm ([`take_assumed`](Self::take_assumed)): the push's
    /// next path, which a refusal sends to the checked path.
    pub(crate) fn assuming_write_permissions(mut self) -> Self {
        self.holdings = authorize::Holdings::assuming();
        self
    }

    /// This transaction for a mutation whose clock reading is the server's.
    pub(crate) fn stamped_by_server(mut self) -> Self {
        self.server_stamped = true;
        self
    }

    /// Whether the mutation wrote, and every write lost its merge to a newer one.
    pub(crate) fn superseded(&self) -> bool {
        self.writes > 0 && self.lost == self.writes
    }

    /// After the mutator returned `outcome`: a failed statement fails the mutation as that
    /// statement did, whatever the mutator made of it; then the mutator's own failure; then the
    /// checks that need all its writes in.
    pub(crate) async fn finish<T>(&mut self, outcome: KernelResult<T>) -> KernelResult<T> {
        self.check_usable()?;
        let outcome = outcome?;
        self.check_new_buckets().await?;
        Ok(outcome)
    }

    /// Before the mutator reads or writes rows: refuse after a failed statement, confirm the write
    /// permissions assumed so far (the mutator learns nothing past a write it may not make),
    /// and send the insert that waits.
    async fn before_next_operation(&mut self) -> KernelResult<()> {
        self.check_usable()?;
        self.confirm_assumed().await?;
        self.flush().await
    }

    /// A write the rules refused fails the whole mutation (`docs/design.md` §4), whatever the
    /// mutator makes of the error: a mutator that went on past it would be answered `applied`,
    /// and the answer would tell whether the refused row's bucket exists.
    fn refusal_sticks<T>(&mut self, written: KernelResult<T>) -> KernelResult<T> {
        if let Err(refused @ engine_kernel::Error::Forbidden(_)) = &written
            && self.failure.is_none()
        {
            self.failure = Some(Failure::of(refused));
        }
        written
    }

    fn is_synced(&self, table: &TableMeta) -> bool {
        !self.core.rules.selections(table.name).is_empty()
    }

    /// Whether rows of `table` keep per-column HLC stamps: synced tables that merge by field.
    fn by_field(&self, table: &TableMeta) -> bool {
        table.merge == MergePolicy::Field && self.is_synced(table)
    }

    /// Note that a write to `table` may change whose memberships: a raw membership query that
    /// reads it may give anyone other buckets.
    fn note_write(&mut self, table: &TableMeta) {
        if self.core.app.sync_rules().raw_reader(table.name).is_some() {
            self.membership_changes.insert("*".into());
        }
    }

    /// Note the claim values of a row of a membership table, whose holders' bucket sets may change.
    fn note_membership(&mut self, table: &TableMeta, row: &Row) {
        for rule in self.core.app.sync_rules().rules {
            let Some(Membership::Table { table: t, filters }) = rule.membership else { continue };
            if t != table.name {
                continue;
            }
            for filter in filters {
                if let FilterValue::Claim(claim) = filter.value
                    && let Some(value) = row.get(filter.column).and_then(param_text)
                {
                    let name = claim.describe();
                    self.membership_changes.insert(format!("{}={value}", name.trim_start_matches("actor.")));
                }
            }
        }
    }

    /// The row with key `key` of `table` and its HLC stamps; locked for update when asked.
    async fn fetch(
        &mut self,
        table: &'static TableMeta,
        key: &Row,
        lock: bool,
        live_only: bool,
    ) -> KernelResult<Option<(Row, merge::Stamps)>> {
        if key.values().any(bounds::holds_nul) {
            return Ok(None); // no stored row holds a NUL (`bounds.rs`), which Postgres would refuse to compare
        }
        let stamped = self.by_field(table);
        if let Some(conn) = self.conn.sqlite() {
            let fetched = sqlite::fetch(conn, table, key, stamped, live_only).await;
            return fetched.map_err(|e| self.failed_with(e));
        }
        let mut sql = statements::fetch(table, key, stamped, live_only, lock).map_err(to_kernel)?;
        // A row locked for an update or delete is locked in the mutation's transaction.
        let conn = if lock { self.writing().await? } else { self.conn()? };
        let row = match sql.build().fetch_optional(conn).await {
            Ok(row) => row,
            Err(e) => return Err(self.failed(e)),
        };
        let Some(row) = row else { return Ok(None) };
        let decoded = decode_row(table, &row).map_err(to_kernel)?;
        let stamps = match stamped.then(|| sqlx::Row::try_get::<Value, _>(&row, table.columns.len())) {
            Some(Ok(Value::Object(map))) => map,
            _ => merge::Stamps::new(),
        };
        Ok(Some((decoded, stamps)))
    }

    async fn insert_row(&mut self, table: &'static TableMeta, row: Row) -> KernelResult<()> {
        self.before_next_operation().await?;
        self.authorize_table(table)?;
        table.check_insert(&row)?;
        bounds::refuse_nul(table, &row)?;
        let buckets = self.core.rules.row_buckets(table, &row);
        let open = self.authorize_entering(table, &buckets, &buckets, &[&row]).await?;
        let mut values = Vec::with_capacity(table.columns.len());
        for column in table.columns {
            let value = merge::written(column, None, row.get(column.name).unwrap_or(&Value::Null)).await?;
            // Refuse a value of the wrong shape now, not when the insert is sent.
            table.value(column, &value)?;
            values.push(value);
        }
        let inserted: Row = table.columns.iter().map(|c| c.name.to_owned()).zip(values.iter().cloned()).collect();
        self.check_bounds(table, &inserted)?;
        self.check_pending_invitations(table, None, &inserted).await?;
        self.check_accepted_rows(table, &open, &inserted).await?;
        self.freeze_before_writing(table, &[&inserted]).await?;
        self.authorize_granting(table, None, &inserted).await?;
        self.authorize_placing(table, &self.write_buckets(table, &inserted))?;
        let stamps = self.by_field(table).then(|| merge::inserted(table, &self.hlc));
        self.pending = Some(PendingInsert { table, values, stamps });
        self.writes += 1;
        self.note_blob_refs(table, None, &inserted, &table.columns.iter().collect::<Vec<_>>()).await?;
        self.note_write(table);
        self.note_membership(table, &row);
        self.entered(table, &inserted, buckets.iter().cloned());
        self.affected.extend(buckets);
        Ok(())
    }

    async fn update_row(
        &mut self,
        table: &'static TableMeta,
        key: Row,
        changes: Vec<(&'static str, Value)>,
    ) -> KernelResult<bool> {
        self.before_next_operation().await?;
        self.authorize_table(table)?;
        let assigned = table.check_update(&changes)?;
        let premerged = self.merge_before_locking(table, &key, &changes).await?;
        let Some((before, stamps)) = self.fetch(table, &key, true, false).await? else { return Ok(false) };
        let before_buckets = self.core.rules.row_buckets(table, &before);
        if self.is_synced(table) && !self.can_read(&before_buckets).await? {
            return Ok(false); // a row the actor cannot see is not found
        }
        // A soft delete removes the row: its member may be leaving.
        let removes = changes.iter().any(|(column, value)| Some(*column) == table.soft_delete && !value.is_null());
        let written_in = self.write_buckets(table, &before);
        // The actor's own invitation, accepted: the one change of it that is the member's to make.
        let accepting = self.is_accepting_change(table, &before, &changes);
        if !accepting {
            self.authorize_changing(table, &written_in, removes.then_some(&before), &[&before]).await?;
        }
        let by_field = self.by_field(table);
        if by_field
            && self.server_stamped
            && let Some(newest) = merge::newest(&stamps)
        {
            // The server's own reading orders after what the row holds, whoever stamped it.
            self.hlc = self.core.clock.tick_after(Some(&newest));
        }
        let merge::Updated { after, stamps, took_effect } =
            merge::updated(table, by_field, &before, stamps, &changes, &self.hlc, premerged).await?;
        bounds::refuse_nul(table, &after)?;
        self.check_bounds(table, &after)?;
        let images = [&before, &after];
        let after_buckets = self.core.rules.row_buckets(table, &after);
        if accepting {
            // The merge may not have made the change asked: only the exact acceptance passes.
            if !self.core.rules.is_accepting(table, &before, &after, &self.actor) {
                return Err(forbidden_change(self.core.app.sync_rules(), table.name, &written_in));
            }
            self.freeze_before_writing(table, &images).await?;
        } else {
            if self.reads_rows(table, &written_in) {
                // Its write conditions look at the row after the change as well.
                self.authorize_changing(table, &written_in, removes.then_some(&before), &images).await?;
            }
            let leaving = before_buckets.difference(&after_buckets);
            self.authorize_leaving(table, leaving, &before_buckets, removes.then_some(&before), &images).await?;
            let entering = after_buckets.difference(&before_buckets);
            let mut open = self.authorize_entering(table, entering, &after_buckets, &images).await?;
            open.extend(self.open_sources_entered(&before_buckets, &after_buckets).await?);
            self.check_pending_invitations(table, Some(&before), &after).await?;
            self.check_accepted_rows(table, &open, &after).await?;
            self.freeze_before_writing(table, &images).await?;
            self.authorize_granting(table, Some(&before), &after).await?;
            if table.is_live(&after) {
                self.authorize_placing(table, &self.write_buckets(table, &after))?;
            }
        }
        let stamps = by_field.then_some(Value::Object(stamps));
        if self.conn.is_sqlite() {
            // The rows required so far are confirmed before a write could be among what confirms them.
            self.confirm_required().await?;
        }
        if let Some(conn) = self.conn.sqlite() {
            let updated = sqlite::update(conn, table, &key, &assigned, &after, stamps).await;
            updated.map_err(|e| self.failed_with(e))?;
        } else {
            let mut sql =
                statements::update(table, &key, &assigned, &after, stamps, self.is_synced(table)).map_err(to_kernel)?;
            if let Err(e) = sql.build().execute(self.writing().await?).await {
                return Err(self.failed(e));
            }
        }
        self.writes += 1;
        self.lost += usize::from(!took_effect);
        self.note_blob_refs(table, Some(&before), &after, &assigned).await?;
        self.note_write(table);
        self.note_membership(table, &before);
        self.note_membership(table, &after);
        self.entered(table, &after, after_buckets.difference(&before_buckets).cloned());
        self.left(before_buckets.difference(&after_buckets).cloned());
        self.affected.extend(before_buckets);
        self.affected.extend(after_buckets);
        Ok(true)
    }

    /// The collaborative merges of `changes`, made before the row is locked when the mutation
    /// holds no transaction yet (`docs/design.md` §7): locking the row takes a transaction id,
    /// which holds every pull's horizon back for as long as the mutation runs, and a large merge
    /// is CPU work. The row is read unlocked, whether or not the actor may see it: nothing of it
    /// reaches the mutator, and the merge's outcome (a refusal included) is used only after
    /// the locked row was found readable and the write authorized, and only when the locked
    /// row still holds the document merged into. A mutation already in a transaction (the
    /// checked path, or one that wrote before) holds its transaction id anyway, and merges
    /// under the lock.
    async fn merge_before_locking(
        &mut self,
        table: &'static TableMeta,
        key: &Row,
        changes: &[(&'static str, Value)],
    ) -> KernelResult<merge::Premerged> {
        let collaborative = changes.iter().any(|(name, value)| {
            !value.is_null() && table.column(name).is_some_and(|column| column.sql_type.is_crdt())
        });
        if !collaborative || !matches!(self.conn, Conn::Deferred(_)) {
            return Ok(merge::Premerged::default());
        }
        match self.fetch(table, key, false, false).await? {
            Some((row, _)) => merge::Premerged::of(table, &row, changes).await,
            None => Ok(merge::Premerged::default()),
        }
    }

    async fn purge_row(&mut self, table: &'static TableMeta, key: Row) -> KernelResult<bool> {
        self.before_next_operation().await?;
        self.authorize_table(table)?;
        let Some((before, _)) = self.fetch(table, &key, true, false).await? else { return Ok(false) };
        let buckets = self.core.rules.row_buckets(table, &before);
        // A soft-deleted row is in no bucket; the buckets it was in decide who may purge it.
        let live = if table.is_live(&before) { before.clone() } else { table.undeleted(&before) };
        if self.is_synced(table) && !self.can_read(&self.core.rules.row_buckets(table, &live)).await? {
            return Ok(false);
        }
        self.authorize_changing(table, &self.write_buckets(table, &live), Some(&live), &[&live]).await?;
        let live_buckets = self.core.rules.row_buckets(table, &live);
        self.authorize_leaving(table, &live_buckets, &live_buckets, Some(&live), &[&live]).await?;
        self.freeze_before_writing(table, &[&before]).await?;
        if self.conn.is_sqlite() {
            self.confirm_required().await?;
        }
        if let Some(conn) = self.conn.sqlite() {
            let deleted = sqlite::delete(conn, table, &key).await;
            deleted.map_err(|e| self.failed_with(e))?;
        } else {
            let mut sql = statements::delete(table, &key).map_err(to_kernel)?;
            if let Err(e) = sql.build().execute(self.writing().await?).await {
                return Err(self.failed(e));
            }
        }
        self.writes += 1;
        self.note_write(table);
        self.note_membership(table, &before);
        self.left(buckets.iter().cloned());
        self.affected.extend(buckets);
        Ok(true)
    }

    async fn delete_row(&mut self, table: &'static TableMeta, key: Row) -> KernelResult<bool> {
        let Some(deletion) = table.deletion() else { return self.purge_row(table, key).await };
        self.before_next_operation().await?;
        // Deleting a row already deleted finds nothing.
        match self.fetch(table, &key, false, true).await? {
            Some(_) => self.update_row(table, key, vec![deletion]).await,
            None => Ok(false),
        }
    }

    async fn select_rows(
        &mut self,
        table: &'static TableMeta,
        key: Option<Row>,
        filter: Vec<(&'static str, Value)>,
        limit: Option<u32>,
    ) -> KernelResult<Vec<Row>> {
        self.before_next_operation().await?;
        let mut equalities = Vec::new();
        for (name, value) in key.into_iter().flatten().chain(filter.into_iter().map(|(c, v)| (c.to_owned(), v))) {
            equalities.push((table.filter_column(&name)?, value));
        }
        let rows = self.rows_where(table, &equalities).await?;
        let synced = self.is_synced(table);
        let mut out = Vec::new();
        for decoded in rows {
            if synced && !self.can_read(&self.core.rules.row_buckets(table, &decoded)).await? {
                continue;
            }
            out.push(decoded);
            if limit.is_some_and(|l| out.len() >= l as usize) {
                break;
            }
        }
        Ok(out)
    }

    /// The live rows of `table` whose columns equal the given values, whoever may read them:
    /// for the mutation's own checks, never for the mutator.
    async fn rows_where(
        &mut self,
        table: &'static TableMeta,
        equalities: &[(&'static engine_kernel::ColumnMeta, Value)],
    ) -> KernelResult<Vec<Row>> {
        if equalities.iter().any(|(_, value)| bounds::holds_nul(value)) {
            return Ok(Vec::new()); // as in `fetch`
        }
        if let Some(conn) = self.conn.sqlite() {
            let rows = sqlite::select(conn, table, equalities).await;
            return rows.map_err(|e| self.failed_with(e));
        }
        let mut sql = statements::select(table, equalities).map_err(to_kernel)?;
        let rows = match sql.build().fetch_all(self.conn()?).await {
            Ok(rows) => rows,
            Err(e) => return Err(self.failed(e)),
        };
        rows.iter().map(|row| decode_row(table, row)).collect::<crate::error::Result<Vec<Row>>>().map_err(to_kernel)
    }

    async fn enqueue_job(&mut self, job: engine_kernel::JobRequest) -> KernelResult<()> {
        self.check_usable()?;
        let user = self.actor.user_id.clone();
        if self.conn.is_sqlite() {
            self.confirm_required().await?;
        }
        if let Some(conn) = self.conn.sqlite() {
            let enqueued = sqlite::enqueue(conn, &job, Some(&user)).await;
            return enqueued.map_err(|e| self.failed_with(e));
        }
        if let Err(e) = crate::jobs::queue::insert(self.writing().await?, &job, Some(&user)).await {
            return Err(self.failed(e));
        }
        Ok(())
    }
}

impl MutatorTx for ServerTx<'_> {
    fn actor(&self) -> &Actor {
        &self.actor
    }

    fn hlc(&self) -> &Hlc {
        &self.hlc
    }

    fn mutation_seed(&self) -> Option<uuid::Uuid> {
        Some(self.seed)
    }

    fn insert<'a>(&'a mut self, table: &'static TableMeta, row: Row) -> BoxFuture<'a, KernelResult<()>> {
        Box::pin(async move {
            let written = self.insert_row(table, row).await;
            self.refusal_sticks(written)
        })
    }

    fn update<'a>(
        &'a mut self,
        table: &'static TableMeta,
        key: Row,
        changes: Vec<(&'static str, Value)>,
    ) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(async move {
            let written = self.update_row(table, key, changes).await;
            self.refusal_sticks(written)
        })
    }

    fn delete<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(async move {
            let written = self.delete_row(table, key).await;
            self.refusal_sticks(written)
        })
    }

    fn purge<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(async move {
            let written = self.purge_row(table, key).await;
            self.refusal_sticks(written)
        })
    }

    fn get<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<Option<Row>>> {
        Box::pin(async move { Ok(self.select_rows(table, Some(key), Vec::new(), Some(1)).await?.into_iter().next()) })
    }

    fn require<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(self.require_row(table, key))
    }

    fn select<'a>(
        &'a mut self,
        table: &'static TableMeta,
        filter: Vec<(&'static str, Value)>,
        limit: Option<u32>,
    ) -> BoxFuture<'a, KernelResult<Vec<Row>>> {
        Box::pin(self.select_rows(table, None, filter, limit))
    }

    fn enqueue<'a>(&'a mut self, job: engine_kernel::JobRequest) -> BoxFuture<'a, KernelResult<()>> {
        Box::pin(self.enqueue_job(job))
    }
}
