//! Write authorization (`docs/design.md` §4, which states the rule exactly): no write puts data
//! where the actor cannot read, and no write grants a bucket its writer could not read. This is
//! the one place the rule is read.
//!
//! [`Holdings`] asks whether the actor held a bucket lazily. Before a write to a membership row,
//! the holdings of the buckets that row grants are read and pinned: a write can change no
//! other, so every other is still asked lazily. A write to a table a raw membership query reads
//! could change any: before it every holding is read and frozen. On the push's next
//! path a permission one bucket decides is assumed ([`Assumed`]) and confirmed by the record
//! statement, or by a statement of its own before the mutator's next read or write.
//! A refusal names the table and the rule, never a bucket key: the server log keeps the bucket.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::rules::buckets::claim_bucket;
use engine_kernel::rules::refusal::{self, Refusal};
use engine_kernel::rules::{ConstFilter, Membership, RuleMeta, WriteRule};
use engine_kernel::{Actor, BucketKey, Error as KernelError, Row, TableMeta};
use serde_json::Value;

use super::ServerTx;
use super::errors::{ASK_INSTEAD, to_kernel};
use crate::pg::sql::Sql;
use crate::pg::sql::ident;
use crate::rules::held::{self, MembershipQuery};
use crate::rules::selection;

type KernelResult<T> = engine_kernel::Result<T>;

/// What the mutation knows of the actor's buckets.
#[derive(Debug, Default)]
pub(super) struct Holdings {
    /// Whether the actor held a bucket when the mutation began, as far as asked (or assumed,
    /// see `assumed`).
    held_at_start: BTreeMap<BucketKey, bool>,
    /// Whether the actor could write a table in a bucket through some of the alternatives of the
    /// rule's `write(...)` (a [`Mask`]) when the mutation began, as far as asked or assumed.
    writable_at_start: BTreeMap<(BucketKey, &'static str, Mask), bool>,
    /// For pinned buckets (all, once frozen): each bucket, table and alternative the actor
    /// could write through.
    writable_through: BTreeSet<(BucketKey, &'static str, usize)>,
    /// Buckets whose holding and write permissions were read before a write to a membership
    /// row that grants them: answered from what was read from then on.
    pinned: BTreeSet<BucketKey>,
    /// Whether every holding has been read (before the first write to a table a raw membership
    /// query reads).
    frozen: bool,
    /// Whether the mutation is writing membership tables: nothing is assumed from then on, as
    /// the record statement would confirm it against the memberships written.
    granting: bool,
    /// Buckets of membership rules that had no rows when the mutation began and that it put rows
    /// into or granted: new buckets (a new list, a new team).
    created: BTreeSet<BucketKey>,
    /// Of those, the ones the mutation put rows into, with the table of the first row: to be
    /// held by the actor when the writes are in.
    new_buckets: BTreeMap<BucketKey, &'static str>,
    /// Buckets the mutation put rows into (readable by it from then on).
    entered: BTreeSet<BucketKey>,
    /// Buckets the mutation put rows into only through `accept(...)`: not readable by it.
    accepted: BTreeSet<BucketKey>,
    /// Buckets rows left through the mutation's updates and deletes (so they had rows).
    left: BTreeSet<BucketKey>,
    /// New buckets the mutation granted through a membership row, with the membership table.
    granted_new: BTreeMap<BucketKey, &'static str>,
    /// Buckets the mutation put a row into that is not a membership row granting the bucket: a
    /// new bucket is created by such a row, not by its first member joining it.
    data_entered: BTreeSet<BucketKey>,
    /// Held buckets of anchored rules the mutation granted through a membership row, with the
    /// membership table: their anchors must exist once the writes are in.
    granted_anchored: BTreeMap<BucketKey, &'static str>,
    /// Buckets of anchored rules the mutation put rows into through `accept(...)`, with the
    /// table of the first row: their anchors must exist once the writes are in.
    accepted_anchored: BTreeMap<BucketKey, &'static str>,
    /// Whether write permissions may be assumed, for the record statement to confirm.
    may_assume: bool,
    /// The write permissions assumed so far.
    assumed: Vec<Assumed>,
}

impl Holdings {
    /// Holdings whose write permissions are assumed where they can be, and confirmed by the
    /// mutation's record statement ([`ServerTx::take_assumed`]).
    pub(super) fn assuming() -> Self {
        Holdings { may_assume: true, ..Holdings::default() }
    }
}

/// A write permission assumed on the next path: the actor held `bucket` when the mutation
/// began, through a membership row matching one of `write` when given.
#[derive(Debug, Clone)]
pub(crate) struct Assumed {
    query: MembershipQuery,
    bucket: BucketKey,
    write: Option<Vec<&'static [ConstFilter]>>,
}

/// How a row may enter a bucket ([`ServerTx::authorize_entering`]).
enum Entry {
    /// The actor may write the table there, or creates the bucket, or a checked `accept(...)`
    /// or an open one of a bucket it holds lets the row in.
    Allowed,
    /// The actor holds the claim bucket, whose rule says nothing of the table: another bucket
    /// of the row may still allow it.
    Elsewhere,
    /// Only `accept(open(...))` lets the row into a bucket the actor does not hold, from the
    /// bucket of the accepted rule given, where the actor may write it.
    Open(BucketKey),
}

/// A set of the alternatives of a `write(...)`, by index: bit `i` for alternative `i`. The
/// macros refuse a `write(...)` of more than [`Mask::BITS`] alternatives.
type Mask = u64;

/// The alternatives of `write` whose row terms hold on every one of `images` for `actor`.
fn applying(write: &WriteRule, images: &[&Row], actor: &Actor) -> Mask {
    let mut mask = 0;
    for (i, alternative) in write.any_of.iter().enumerate().take(Mask::BITS as usize) {
        if images.iter().all(|row| alternative.holds_on(row, actor)) {
            mask |= 1 << i;
        }
    }
    mask
}

/// The alternatives of `mask`, with their indexes.
fn alternatives_in(
    write: &'static WriteRule,
    mask: Mask,
) -> impl Iterator<Item = (usize, &'static engine_kernel::rules::WriteAlternative)> {
    write.any_of.iter().enumerate().filter(move |(i, _)| *i < Mask::BITS as usize && mask & (1 << i) != 0)
}

/// The alternatives of `write` that ask something of the membership, by index: in the others,
/// holding the bucket decides.
fn conditional(write: &'static WriteRule) -> Vec<usize> {
    alternatives_in(write, Mask::MAX).filter(|(_, a)| !a.member.is_empty()).map(|(i, _)| i).collect()
}

/// The membership conditions of the alternatives of `mask`.
fn members_in(write: &'static WriteRule, mask: Mask) -> Vec<&'static [ConstFilter]> {
    alternatives_in(write, mask).map(|(_, alternative)| alternative.member).collect()
}

impl Assumed {
    /// Append the condition that every permission of `all` holds, `(true AND EXISTS (…) …)`,
    /// evaluated in the snapshot of the statement it is part of.
    pub(crate) fn push_all(all: &[Assumed], sql: &mut Sql, actor: &Actor) -> crate::error::Result<()> {
        sql.push("(true");
        for assumed in all {
            sql.push(" AND ");
            assumed.push(sql, actor)?;
        }
        sql.push(")");
        Ok(())
    }

    /// Append the condition that every permission of `all` holds on SQLite, `(1 AND EXISTS (…)
    /// …)`.
    pub(crate) fn push_all_on_sqlite(
        all: &[Assumed],
        sql: &mut engine_sqlite::Sql,
        app: &engine_kernel::App,
        actor: &Actor,
    ) -> crate::error::Result<()> {
        sql.push("(1");
        for assumed in all {
            sql.push(" AND ");
            assumed.push_on_sqlite(sql, app, actor)?;
        }
        sql.push(")");
        Ok(())
    }

    /// Append the condition that this permission holds, on SQLite.
    pub(crate) fn push_on_sqlite(
        &self,
        sql: &mut engine_sqlite::Sql,
        app: &engine_kernel::App,
        actor: &Actor,
    ) -> crate::error::Result<()> {
        held::sqlite::push_holds(sql, app, self.query.rule(), actor, &self.bucket, self.write.as_deref())
            .ok_or_else(|| crate::error::Error::internal("an assumed permission cannot be asked"))
    }

    /// Append the condition that this permission holds.
    pub(crate) fn push(&self, sql: &mut Sql, actor: &Actor) -> crate::error::Result<()> {
        self.query
            .push_holds(sql, actor, &self.bucket, self.write.as_deref())
            .ok_or_else(|| crate::error::Error::internal("an assumed permission cannot be asked"))
    }
}

/// A refusal in the domain's words ([`refusal::forbidden`]); the bucket goes to the server log.
fn forbidden(table: &str, bucket: &BucketKey, refusal: Refusal) -> KernelError {
    tracing::warn!(table, rule = bucket.rule(), bucket = %bucket, ?refusal, "write refused");
    refusal::forbidden(table, bucket.rule(), refusal)
}

/// The refusal of a change to a row lying in `buckets` ([`refusal::forbidden_change`]); the
/// buckets go to the server log.
pub(super) fn forbidden_change(
    rules: &engine_kernel::SyncRules,
    table: &str,
    buckets: &BTreeSet<BucketKey>,
) -> KernelError {
    tracing::warn!(table, buckets = ?buckets, "write refused");
    refusal::forbidden_change(rules, table, buckets)
}

impl ServerTx<'_> {
    pub(super) fn rule(&self, bucket: &BucketKey) -> Option<&'static RuleMeta> {
        self.core.app.sync_rules().rule(bucket.rule())
    }

    fn membership_query(&self, rule: &RuleMeta) -> Option<&MembershipQuery> {
        self.core.memberships.iter().find(|q| q.rule().name == rule.name)
    }

    /// Whether the actor holds `bucket` with the mutation's writes in.
    async fn holds_now(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(false) };
        match self.membership_query(rule).cloned() {
            None => Ok(claim_bucket(rule, &self.actor).as_ref() == Some(bucket)),
            Some(_) if let Some(conn) = self.conn.sqlite() => {
                held::sqlite::holds(conn, &self.core.app, rule, &self.actor, bucket, None).await.map_err(to_kernel)
            }
            Some(query) => query.holds(self.conn.conn()?, &self.actor, bucket).await.map_err(to_kernel),
        }
    }

    /// Whether the actor held `bucket` when the mutation began.
    pub(super) async fn held_at_start(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        if let Some(&held) = self.holdings.held_at_start.get(bucket) {
            return Ok(held);
        }
        if self.is_pinned(bucket) {
            return Ok(false);
        }
        let held = self.holds_now(bucket).await?;
        self.holdings.held_at_start.insert(bucket.clone(), held);
        Ok(held)
    }

    /// Assume that the actor could write rows of `table` in `bucket` when the mutation began,
    /// where the answer is not known yet and a statement can confirm it later: holdings are not
    /// frozen, no write to `table` freezes them, and the bucket's memberships are a table's rows.
    /// Returns whether it was assumed.
    fn assume_write(&mut self, bucket: &BucketKey, table: &'static TableMeta) -> bool {
        if !self.holdings.may_assume || self.holdings.granting || self.may_grant(table) {
            return false;
        }
        let Some(rule) = self.rule(bucket) else { return false };
        let Some(query) = self.membership_query(rule) else { return false };
        let Some(write_rule) = rule.write_rule(table.name) else { return false };
        // Which alternatives apply depends on the row: asked, not assumed.
        if write_rule.reads_rows() {
            return false;
        }
        let mask = applying(write_rule, &[], &self.actor);
        let write = (!write_rule.is_unconditional()).then(|| members_in(write_rule, mask));
        let asked = (bucket.clone(), table.name, mask);
        let held = self.holdings.held_at_start.get(bucket).copied();
        let known = match write {
            None => held.is_some(),
            Some(_) => held == Some(false) || self.holdings.writable_at_start.contains_key(&asked),
        };
        if known || !self.can_ask_within(query, bucket, write.as_deref()) {
            return false;
        }
        let conditional = write.is_some();
        let assumed = Assumed { query: query.clone(), bucket: bucket.clone(), write };
        self.holdings.assumed.push(assumed);
        // Writing through a membership row is holding the bucket through it.
        self.holdings.held_at_start.insert(bucket.clone(), true);
        if conditional {
            self.holdings.writable_at_start.insert(asked, true);
        }
        true
    }

    /// Whether a live row of `table` with primary key `key` is one the actor can read, as far
    /// as that can be told on the next path without reading the row: `Some(None)` when it is
    /// (the table is not synced, or a bucket the key alone decides is one the mutation knows the
    /// actor holds), `Some(Some(held))` when it is if the actor holds such a bucket (`held`, for
    /// a statement to confirm), `None` when the row must be read to tell. A row lies in a bucket
    /// its key alone decides when a selection of its table scopes by key columns only and has
    /// no filter: then every live row with that key is in it.
    pub(super) fn readable_by_key(&mut self, table: &'static TableMeta, key: &Row) -> Option<Option<Assumed>> {
        if !self.holdings.may_assume || self.holdings.granting {
            return None;
        }
        if !self.is_synced(table) {
            return Some(None);
        }
        let is_key = |column: &str| table.key_columns().any(|c| c.name == column);
        let mut unknown = None;
        for selection in self.core.rules.selections(table.name) {
            let by_key =
                selection.selection.filters.is_empty() && selection.selection.scope.iter().all(|eq| is_key(eq.column));
            let Some(bucket) = by_key.then(|| selection.bucket_of(key)).flatten() else { continue };
            let entered = self.holdings.entered.contains(&bucket) && !self.holdings.accepted.contains(&bucket);
            let held = self.holdings.held_at_start.get(&bucket).copied();
            if entered || held == Some(true) {
                return Some(None);
            }
            if held == Some(false) {
                continue;
            }
            let rule = selection.rule;
            match self.membership_query(rule) {
                None if claim_bucket(rule, &self.actor).as_ref() == Some(&bucket) => return Some(None),
                None => {}
                Some(query) if unknown.is_none() && self.can_ask_within(query, &bucket, None) => {
                    unknown = Some(Assumed { query: query.clone(), bucket, write: None });
                }
                Some(_) => {}
            }
        }
        unknown.map(Some)
    }

    /// Whether a statement can ask whether the actor holds `bucket` through `query` (a row
    /// matching one of `write`, when given), as a condition of itself.
    fn can_ask_within(&self, query: &MembershipQuery, bucket: &BucketKey, write: Option<&[&[ConstFilter]]>) -> bool {
        if self.conn.is_sqlite() {
            let mut sql = engine_sqlite::Sql::new("");
            return held::sqlite::push_holds(&mut sql, &self.core.app, query.rule(), &self.actor, bucket, write)
                .is_some();
        }
        query.can_ask_within(&self.actor, bucket, write)
    }

    /// Confirm the write permissions assumed so far, in one statement, before the mutation
    /// reads or writes rows again: a mutator learns nothing past a write it may not make.
    /// The mutation's writes so far touched no membership table, so the statement sees the
    /// memberships as they were.
    pub(super) async fn confirm_assumed(&mut self) -> KernelResult<()> {
        if self.holdings.assumed.is_empty() {
            return Ok(());
        }
        if self.conn.is_sqlite() {
            let mut sql = engine_sqlite::Sql::new("SELECT ");
            Assumed::push_all_on_sqlite(&self.holdings.assumed, &mut sql, &self.core.app, &self.actor)
                .map_err(to_kernel)?;
            let Some(conn) = self.conn.sqlite() else { return Ok(()) };
            let confirmed = sql.build_query_scalar::<bool>().fetch_one(&mut *conn).await;
            if !confirmed.map_err(|e| self.failed_with(e.into()))? {
                return Err(KernelError::forbidden(ASK_INSTEAD));
            }
            self.holdings.assumed.clear();
            return Ok(());
        }
        let mut sql = Sql::new("SELECT ");
        Assumed::push_all(&self.holdings.assumed, &mut sql, &self.actor).map_err(to_kernel)?;
        let confirmed = sql.build_query_scalar::<bool>().fetch_one(self.conn.conn()?).await;
        if !confirmed.map_err(|e| self.failed(e))? {
            return Err(KernelError::forbidden(ASK_INSTEAD));
        }
        self.holdings.assumed.clear();
        Ok(())
    }

    /// The write permissions assumed, for the record statement to confirm.
    pub(crate) fn take_assumed(&mut self) -> Vec<Assumed> {
        std::mem::take(&mut self.holdings.assumed)
    }

    /// [`may_write`](Self::may_write), assumed where it can be.
    async fn may_write_or_assume(
        &mut self,
        bucket: &BucketKey,
        table: &'static TableMeta,
        images: &[&Row],
    ) -> KernelResult<bool> {
        if self.assume_write(bucket, table) {
            return Ok(true);
        }
        self.may_write(bucket, table, images).await
    }

    /// Whether the actor could write rows of `table` in `bucket` when the mutation began, the row
    /// being `images` (before and after the write, as far as it has them): it held the bucket,
    /// and an alternative of the rule's `write(...)` for `table` whose row terms hold on the
    /// images lets its holders, or its membership, write. Nothing is writable that no
    /// `write(...)` names.
    async fn may_write(
        &mut self,
        bucket: &BucketKey,
        table: &'static TableMeta,
        images: &[&Row],
    ) -> KernelResult<bool> {
        let Some(write) = self.rule(bucket).and_then(|rule| rule.write_rule(table.name)) else { return Ok(false) };
        let mask = applying(write, images, &self.actor);
        self.may_write_through(bucket, table, mask).await
    }

    /// Whether the actor could write rows of `table` in `bucket` when the mutation began through
    /// one of the alternatives `mask` of the rule's `write(...)`.
    async fn may_write_through(
        &mut self,
        bucket: &BucketKey,
        table: &'static TableMeta,
        mask: Mask,
    ) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(false) };
        let Some(write) = rule.write_rule(table.name) else { return Ok(false) };
        if mask == 0 {
            return Ok(false);
        }
        let every_holder = alternatives_in(write, mask).any(|(_, alternative)| alternative.member.is_empty());
        let asked = (bucket.clone(), table.name, mask);
        // Neither asked yet: whether held and whether writable are one question to Postgres.
        if !every_holder
            && !self.is_pinned(bucket)
            && !self.holdings.held_at_start.contains_key(bucket)
            && !self.holdings.writable_at_start.contains_key(&asked)
            && let Some(query) = self.membership_query(rule).cloned()
        {
            let members = members_in(write, mask);
            let (held, may) = match self.conn.sqlite() {
                Some(conn) => {
                    let (app, actor) = (&self.core.app, &self.actor);
                    let held = held::sqlite::holds(conn, app, rule, actor, bucket, None).await.map_err(to_kernel)?;
                    (
                        held,
                        held && held::sqlite::holds(conn, app, rule, actor, bucket, Some(&members))
                            .await
                            .map_err(to_kernel)?,
                    )
                }
                None => query
                    .holds_and_through(self.conn.conn()?, &self.actor, bucket, &members)
                    .await
                    .map_err(to_kernel)?,
            };
            self.holdings.held_at_start.insert(bucket.clone(), held);
            self.holdings.writable_at_start.insert(asked, held && may);
            return Ok(held && may);
        }
        if !self.held_at_start(bucket).await? {
            return Ok(false);
        }
        if every_holder {
            return Ok(true);
        }
        if let Some(&may) = self.holdings.writable_at_start.get(&asked) {
            return Ok(may);
        }
        if self.is_pinned(bucket) {
            let through = alternatives_in(write, mask)
                .any(|(i, _)| self.holdings.writable_through.contains(&(bucket.clone(), table.name, i)));
            return Ok(through);
        }
        let Some(query) = self.membership_query(rule).cloned() else { return Ok(false) };
        let may = self.holds_through(&query, bucket, &members_in(write, mask)).await?;
        self.holdings.writable_at_start.insert(asked, may);
        Ok(may)
    }

    /// Whether a write to `table` may change whose buckets: some membership query reads it (a
    /// raw one may read any table).
    pub(super) fn may_grant(&self, table: &TableMeta) -> bool {
        self.core.app.sync_rules().rules.iter().any(|rule| match rule.membership {
            Some(Membership::Table { table: t, .. }) => t == table.name,
            Some(Membership::Raw { reads, .. }) => reads.contains(&table.name),
            None => false,
        })
    }

    /// Whether the actor holds `bucket` through a membership matching one of `members`, now.
    async fn holds_through(
        &mut self,
        query: &MembershipQuery,
        bucket: &BucketKey,
        members: &[&'static [ConstFilter]],
    ) -> KernelResult<bool> {
        match self.conn.sqlite() {
            Some(conn) => {
                held::sqlite::holds(conn, &self.core.app, query.rule(), &self.actor, bucket, Some(members)).await
            }
            None => query.holds_through(self.conn.conn()?, &self.actor, bucket, Some(members)).await,
        }
        .map_err(to_kernel)
    }

    /// Whether what the actor held of `bucket` when the mutation began is kept, not asked.
    fn is_pinned(&self, bucket: &BucketKey) -> bool {
        self.holdings.frozen || self.holdings.pinned.contains(bucket)
    }

    /// Before a write that turns a row of `table` from or into `images`: read and keep the
    /// holdings the write could change. A row of a membership table changes only the buckets it
    /// grants (before and after), so those are pinned; a table a raw membership query reads
    /// could change any holding, so every one is read and frozen.
    pub(super) async fn freeze_before_writing(&mut self, table: &TableMeta, images: &[&Row]) -> KernelResult<()> {
        if self.holdings.frozen || !self.may_grant(table) {
            return Ok(());
        }
        // Confirmed before a write that may grant them.
        self.confirm_assumed().await?;
        self.holdings.granting = true;
        if self.core.app.sync_rules().raw_reader(table.name).is_none() {
            let granted: BTreeSet<BucketKey> = (self.core.memberships.iter())
                .flat_map(|query| images.iter().filter_map(|row| query.granted_by(table, row)))
                .collect();
            for bucket in granted {
                self.pin(bucket).await?;
            }
            return Ok(());
        }
        if self.conn.sqlite().is_some() {
            return self.freeze_on_sqlite().await;
        }
        let conn = self.conn.conn()?;
        let held =
            held::held_buckets(conn, &self.core.app, &self.core.memberships, &self.actor).await.map_err(to_kernel)?;
        let mut through = BTreeSet::new();
        for query in &self.core.memberships {
            for write in query.rule().writes {
                let conditional = conditional(write);
                if write.reads_rows() {
                    // Which alternatives apply depends on the row: each is asked on its own.
                    for &i in &conditional {
                        let member = [write.any_of[i].member];
                        let buckets = query.held_through(conn, &self.actor, Some(&member)).await.map_err(to_kernel)?;
                        through.extend(buckets.into_iter().map(|bucket| (bucket, write.table, i)));
                    }
                } else if !conditional.is_empty() {
                    // Every question of a rule that reads no rows is about all its alternatives
                    // at once (`applying` sets them all): one query answers it for each.
                    let members: Vec<_> = conditional.iter().map(|&i| write.any_of[i].member).collect();
                    let buckets = query.held_through(conn, &self.actor, Some(&members)).await.map_err(to_kernel)?;
                    for bucket in buckets {
                        through.extend(conditional.iter().map(|&i| (bucket.clone(), write.table, i)));
                    }
                }
            }
        }
        self.freeze(held, through);
        Ok(())
    }

    /// Read and keep whether the actor held `bucket` when the mutation began, and the
    /// alternatives of each `write(...)` of its rule it could write through, asked as
    /// [`freeze_before_writing`](Self::freeze_before_writing) asks them of every bucket. The
    /// bucket's membership rows are not written yet, so what holds now held at the start.
    async fn pin(&mut self, bucket: BucketKey) -> KernelResult<()> {
        if self.is_pinned(&bucket) {
            return Ok(());
        }
        let held = self.held_at_start(&bucket).await?;
        let rule = self.rule(&bucket);
        let query = rule.and_then(|rule| self.membership_query(rule)).cloned();
        if let (true, Some(rule), Some(query)) = (held, rule, query) {
            for write in rule.writes {
                let conditional = conditional(write);
                if write.reads_rows() {
                    for &i in &conditional {
                        if self.holds_through(&query, &bucket, &[write.any_of[i].member]).await? {
                            self.holdings.writable_through.insert((bucket.clone(), write.table, i));
                        }
                    }
                } else if !conditional.is_empty() {
                    let members: Vec<_> = conditional.iter().map(|&i| write.any_of[i].member).collect();
                    if self.holds_through(&query, &bucket, &members).await? {
                        let through = conditional.iter().map(|&i| (bucket.clone(), write.table, i));
                        self.holdings.writable_through.extend(through);
                    }
                }
            }
        }
        self.holdings.pinned.insert(bucket);
        Ok(())
    }

    /// [`freeze_before_writing`](Self::freeze_before_writing) on SQLite: the same questions,
    /// each a statement on the writer's connection.
    async fn freeze_on_sqlite(&mut self) -> KernelResult<()> {
        let (app, actor) = (&self.core.app, &self.actor);
        let Some(conn) = self.conn.sqlite() else { return Ok(()) };
        let held = held::sqlite::held_buckets(conn, app, actor).await.map_err(to_kernel)?;
        let mut through = BTreeSet::new();
        for query in &self.core.memberships {
            let rule = query.rule();
            for write in rule.writes {
                let conditional = conditional(write);
                if write.reads_rows() {
                    for &i in &conditional {
                        let member = [write.any_of[i].member];
                        let buckets = held::sqlite::held_through(conn, app, rule, actor, Some(&member))
                            .await
                            .map_err(to_kernel)?;
                        through.extend(buckets.into_iter().map(|bucket| (bucket, write.table, i)));
                    }
                } else if !conditional.is_empty() {
                    let members: Vec<_> = conditional.iter().map(|&i| write.any_of[i].member).collect();
                    let buckets =
                        held::sqlite::held_through(conn, app, rule, actor, Some(&members)).await.map_err(to_kernel)?;
                    for bucket in buckets {
                        through.extend(conditional.iter().map(|&i| (bucket.clone(), write.table, i)));
                    }
                }
            }
        }
        self.freeze(held, through);
        Ok(())
    }

    /// Keep `held` (every bucket the actor holds) and `through` (each bucket, table and
    /// alternative it may write through) as the holdings the mutation began with.
    fn freeze(&mut self, held: BTreeSet<BucketKey>, through: BTreeSet<(BucketKey, &'static str, usize)>) {
        for (bucket, was_held) in self.holdings.held_at_start.iter_mut() {
            *was_held = held.contains(bucket);
        }
        for bucket in held {
            self.holdings.held_at_start.insert(bucket, true);
        }
        for ((bucket, table, mask), may) in self.holdings.writable_at_start.iter_mut() {
            *may = (0..Mask::BITS as usize)
                .any(|i| *mask & (1 << i) != 0 && through.contains(&(bucket.clone(), *table, i)));
        }
        self.holdings.writable_through = through;
        self.holdings.frozen = true;
    }

    /// Whether `bucket` has any row now: a data row, or a membership row granting it (a bucket
    /// with members is not new, even before its first data row).
    async fn has_rows(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(true) };
        let params = bucket.params();
        if let Some(conn) = self.conn.sqlite() {
            let (app, rules) = (&self.core.app, &self.core.rules);
            let has = has_rows_on_sqlite(conn, app, rules, rule, bucket).await;
            return has.map_err(|e| self.failed_with(e));
        }
        let mut sql = Sql::new("SELECT false");
        for selection in self.core.rules.rule_selections(rule.name) {
            let table = self.core.app.table(selection.selection.table).expect("rule tables are app tables");
            sql.push(format_args!(" OR EXISTS (SELECT 1 FROM {} AS t WHERE ", ident(table.name)));
            selection::push_selected(&mut sql, "t", table, selection, &params);
            sql.push(")");
        }
        if let Some(query) = self.membership_query(rule) {
            sql.push(" OR ");
            if query.push_any_grant(&mut sql, bucket).is_none() {
                sql.push("false");
            }
        }
        let had = sql.build_query_scalar::<bool>().fetch_one(self.conn()?).await;
        had.map_err(|e| self.failed(e))
    }

    /// Whether `bucket` had any row when the mutation began: a bucket the mutation created had
    /// none; one it took rows out of, or put rows into without creating it, had some (or may
    /// have had: the answer errs towards refusing); any other has the rows it had.
    async fn had_rows(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        if self.holdings.created.contains(bucket) {
            return Ok(false);
        }
        if self.holdings.left.contains(bucket) || self.holdings.entered.contains(bucket) {
            return Ok(true);
        }
        self.has_rows(bucket).await
    }

    /// May the mutation put a row of `table` into each of `entering`, the row lying in
    /// `row_buckets`? A claim bucket the actor holds whose rule names no `write` for `table` may
    /// receive a row the actor may write through another bucket the row lies in (a list's row in
    /// its owner's bucket of lists): holding it, the actor reads the row there anyway. Returns
    /// the buckets the actor does not hold that the row enters through an `accept(open(...))`
    /// only, each with the bucket of the accepted rule that lets it in, whose rows there are
    /// bounded ([`check_accepted_rows`](Self::check_accepted_rows)).
    pub(super) async fn authorize_entering(
        &mut self,
        table: &'static TableMeta,
        entering: impl IntoIterator<Item = &BucketKey>,
        row_buckets: &BTreeSet<BucketKey>,
        images: &[&Row],
    ) -> KernelResult<Vec<(BucketKey, BucketKey)>> {
        let mut read_only = Vec::new();
        let mut open = Vec::new();
        for bucket in entering {
            match self.authorize_entering_one(table, bucket, row_buckets, images).await? {
                Entry::Allowed => {}
                Entry::Elsewhere => read_only.push(bucket.clone()),
                Entry::Open(source) => open.push((bucket.clone(), source)),
            }
        }
        for bucket in read_only {
            let mut elsewhere = false;
            for other in row_buckets.iter().filter(|b| **b != bucket) {
                if self.holdings.created.contains(other) || self.may_write(other, table, images).await? {
                    elsewhere = true;
                    break;
                }
            }
            if !elsewhere {
                return Err(forbidden_change(self.core.app.sync_rules(), table.name, &BTreeSet::from([bucket])));
            }
        }
        Ok(open)
    }

    /// May the mutation put a row of `table` into `bucket`, and how?
    async fn authorize_entering_one(
        &mut self,
        table: &'static TableMeta,
        bucket: &BucketKey,
        row_buckets: &BTreeSet<BucketKey>,
        images: &[&Row],
    ) -> KernelResult<Entry> {
        if self.holdings.created.contains(bucket) {
            self.holdings.new_buckets.entry(bucket.clone()).or_insert(table.name);
            return Ok(Entry::Allowed);
        }
        // Where an `accept(...)` may let the row in instead, the answer decides which way: asked.
        let accepts = self.rule(bucket).is_some_and(|rule| !rule.accepts.is_empty());
        let may = if accepts {
            self.may_write(bucket, table, images).await?
        } else {
            self.may_write_or_assume(bucket, table, images).await?
        };
        if may {
            return Ok(Entry::Allowed);
        }
        let Some(rule) = self.rule(bucket) else { return Err(forbidden(table.name, bucket, Refusal::Puts)) };
        for accepted in rule.accepts {
            for other in row_buckets.iter().filter(|b| b.rule() == accepted.rule) {
                let may = self.holdings.created.contains(other) || self.may_write(other, table, images).await?;
                if may && (accepted.open || self.receiver_holds(bucket, other).await?) {
                    let held = self.held_at_start(bucket).await?;
                    if !held {
                        self.holdings.accepted.insert(bucket.clone());
                    }
                    // Not a way into a team before it exists: rows waiting there would keep its
                    // creator from creating it.
                    if rule.anchor.is_some() {
                        self.holdings.accepted_anchored.entry(bucket.clone()).or_insert(table.name);
                    }
                    return Ok(match accepted.open && !held {
                        true => Entry::Open(other.clone()),
                        false => Entry::Allowed,
                    });
                }
            }
        }
        if self.held_at_start(bucket).await? {
            // Only a claim bucket that says nothing of `table` (the actor's own view of it) takes
            // a row written through another bucket; a rule with members, or a `write(...)` for
            // the table, decides who puts rows in, and a row through elsewhere would reach its
            // other holders unchecked.
            if rule.membership.is_none() && rule.write_rule(table.name).is_none() {
                return Ok(Entry::Elsewhere);
            }
            return Err(forbidden_change(self.core.app.sync_rules(), table.name, &BTreeSet::from([bucket.clone()])));
        }
        // A bucket held `while(...)` another's is held through that one's memberships: never new.
        if rule.membership.is_some() && rule.held_while.is_none() && !self.had_rows(bucket).await? {
            self.holdings.created.insert(bucket.clone());
            self.holdings.new_buckets.entry(bucket.clone()).or_insert(table.name);
            return Ok(Entry::Allowed);
        }
        Err(forbidden(table.name, bucket, Refusal::Puts))
    }

    /// Whether the actor of claim bucket `bucket` (the receiver of a row a checked `accept(...)`
    /// admits) holds `source`, the bucket of the accepted rule the row lies in, as the
    /// mutation's connection sees it. The receiver's claims are the bucket's parameters.
    async fn receiver_holds(&mut self, bucket: &BucketKey, source: &BucketKey) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(false) };
        let Some(receiver) = engine_kernel::rules::buckets::claim_actor(rule, bucket) else { return Ok(false) };
        let Some(source_rule) = self.rule(source) else { return Ok(false) };
        match self.membership_query(source_rule).cloned() {
            None => Ok(claim_bucket(source_rule, &receiver).as_ref() == Some(source)),
            Some(_) if let Some(conn) = self.conn.sqlite() => {
                held::sqlite::holds(conn, &self.core.app, source_rule, &receiver, source, None).await.map_err(to_kernel)
            }
            Some(query) => query.holds(self.conn.conn()?, &receiver, source).await.map_err(to_kernel),
        }
    }

    /// The buckets a row of `table` counts as lying in for a write
    /// ([`RuleIndex::write_buckets`](engine_kernel::rules::buckets::RuleIndex::write_buckets)).
    pub(super) fn write_buckets(&self, table: &TableMeta, row: &Row) -> BTreeSet<BucketKey> {
        self.core.rules.write_buckets(table, row)
    }

    /// The membership queries whose rows grant buckets of their own: not those of rules held
    /// `while(...)` another's, whose buckets a membership row grants only as it grants the
    /// other's.
    fn granting(&self) -> impl Iterator<Item = &MembershipQuery> + '_ {
        self.core.memberships.iter().filter(|query| query.rule().held_while.is_none())
    }

    /// Refuse a client write to a table only server code writes: declared `server_only(...)`, or
    /// read by a raw membership query (whom a change to it grants cannot be told from raw SQL).
    pub(super) fn authorize_table(&self, table: &TableMeta) -> KernelResult<()> {
        let rules = self.core.app.sync_rules();
        if rules.is_server_only(table.name) {
            return Err(refusal::forbidden_server_only(table.name));
        }
        if let Some(rule) = rules.raw_reader(table.name) {
            return Err(refusal::forbidden_raw_reader(table.name, rule.name));
        }
        Ok(())
    }

    /// May the mutation put a live row of `table` where it lies in `buckets`? Not where it lies
    /// in none: such a row is beyond every rule, and only server code writes it.
    pub(super) fn authorize_placing(&self, table: &TableMeta, buckets: &BTreeSet<BucketKey>) -> KernelResult<()> {
        match buckets.is_empty() {
            true => Err(forbidden_change(self.core.app.sync_rules(), table.name, buckets)),
            false => Ok(()),
        }
    }

    /// Whether the removal of `row` is its member leaving
    /// ([`RuleIndex::is_leaving`](engine_kernel::rules::buckets::RuleIndex::is_leaving)).
    fn is_leaving(&self, table: &TableMeta, row: &Row) -> bool {
        self.core.rules.is_leaving(table, row, &self.actor)
    }

    /// Whether `changes` to `before` of `table` are the actor accepting its own invitation
    /// ([`RuleIndex::is_accepting`](engine_kernel::rules::buckets::RuleIndex::is_accepting)):
    /// asked of the row the changes make, before the merge, and asked again of the merged row.
    pub(super) fn is_accepting_change(
        &self,
        table: &TableMeta,
        before: &Row,
        changes: &[(&'static str, Value)],
    ) -> bool {
        let mut after = before.clone();
        for (column, value) in changes {
            after.insert((*column).to_owned(), value.clone());
        }
        self.core.rules.is_accepting(table, before, &after, &self.actor)
    }

    /// May the mutation change or delete a row of `table` that lies in `buckets` (which it can
    /// read, [`write_buckets`](Self::write_buckets) of its image before), the row being `images`
    /// (before, and after when known)? It may when it may write the table in one of them, or
    /// when `removed` is the actor's own membership row of a rule with `leave`. A row in no
    /// bucket is not written by client mutations.
    pub(super) async fn authorize_changing(
        &mut self,
        table: &'static TableMeta,
        buckets: &BTreeSet<BucketKey>,
        removed: Option<&Row>,
        images: &[&Row],
    ) -> KernelResult<()> {
        if removed.is_some_and(|row| self.is_leaving(table, row)) {
            return Ok(());
        }
        // Where another of the row's buckets may allow it, each is asked in turn.
        let single = buckets.len() == 1;
        for bucket in buckets {
            if self.holdings.created.contains(bucket) {
                return Ok(());
            }
            let may = if single {
                self.may_write_or_assume(bucket, table, images).await?
            } else {
                self.may_write(bucket, table, images).await?
            };
            if may {
                return Ok(());
            }
        }
        Err(forbidden_change(self.core.app.sync_rules(), table.name, buckets))
    }

    /// Whether some rule of `buckets` decides writes of `table` by the row written: then a
    /// change is asked again once the row after it is known.
    pub(super) fn reads_rows(&self, table: &TableMeta, buckets: &BTreeSet<BucketKey>) -> bool {
        buckets
            .iter()
            .filter_map(|bucket| self.rule(bucket)?.write_rule(table.name))
            .any(engine_kernel::rules::WriteRule::reads_rows)
    }

    /// May the row of `table` (`images`, before and after when known) leave each of `leaving`,
    /// data buckets its image before lies in, `before` all of them? Taking a row out of a bucket
    /// writes there: the actor may write the table in it; or its rule accepts rows from another
    /// rule and the row lay in a bucket of that rule the actor may write it in (unassigning a
    /// task); or it is a claim bucket the actor holds that says nothing of the table, the actor's
    /// own view of a row it writes elsewhere. A member leaving (`removed`, its own membership
    /// row of a rule with `leave`) takes its row out of the bucket the row lies in as well.
    pub(super) async fn authorize_leaving(
        &mut self,
        table: &'static TableMeta,
        leaving: impl IntoIterator<Item = &BucketKey>,
        before: &BTreeSet<BucketKey>,
        removed: Option<&Row>,
        images: &[&Row],
    ) -> KernelResult<()> {
        if removed.is_some_and(|row| self.is_leaving(table, row)) {
            return Ok(());
        }
        'leaving: for bucket in leaving {
            if self.holdings.created.contains(bucket) || self.may_write(bucket, table, images).await? {
                continue;
            }
            let Some(rule) = self.rule(bucket) else { return Err(forbidden(table.name, bucket, Refusal::Puts)) };
            for accepted in rule.accepts {
                for other in before.iter().filter(|b| b.rule() == accepted.rule) {
                    if self.holdings.created.contains(other) || self.may_write(other, table, images).await? {
                        continue 'leaving;
                    }
                }
            }
            // The change itself is authorized through another bucket (`authorize_changing`).
            if rule.membership.is_none() && rule.write_rule(table.name).is_none() && self.held_at_start(bucket).await? {
                continue;
            }
            return Err(forbidden_change(self.core.app.sync_rules(), table.name, &BTreeSet::from([bucket.clone()])));
        }
        Ok(())
    }

    /// Before a row of `table` becomes `row` (from `before`, none for an insert): it accepts no
    /// other member's invitation
    /// ([`RuleIndex::accepted_for_another`](engine_kernel::rules::buckets::RuleIndex::accepted_for_another)),
    /// and the buckets and write permissions it grants its member are ones the actor has, or new.
    pub(super) async fn authorize_granting(
        &mut self,
        table: &'static TableMeta,
        before: Option<&Row>,
        row: &Row,
    ) -> KernelResult<()> {
        if let Some(bucket) = self.core.rules.accepted_for_another(table, before, row, &self.actor) {
            return Err(forbidden(table.name, &bucket, Refusal::Accepts));
        }
        let queries: Vec<MembershipQuery> = self.granting().cloned().collect();
        for query in queries {
            let Some(bucket) = query.granted_by(table, row) else { continue };
            if self.holdings.created.contains(&bucket) {
                continue;
            }
            if self.held_at_start(&bucket).await? {
                if query.rule().anchor.is_some() {
                    self.holdings.granted_anchored.insert(bucket.clone(), table.name);
                }
                for write in query.rule().writes {
                    let target = self.core.app.table(write.table).expect("rule tables are app tables");
                    for (_, granted) in alternatives_in(write, Mask::MAX) {
                        if !MembershipQuery::row_matches(row, &[granted.member]) {
                            continue;
                        }
                        // The actor's own permission is at least as wide: an alternative of
                        // its membership's that asks no more of the row. An equality with the
                        // actor's claims is relative: granted, `row.author_id == actor.user_id`
                        // lets the member write its own rows, as it lets the actor write the
                        // actor's. An inequality is not: `row.user_id != actor.user_id` granted
                        // would let the member write the actor's rows, which the actor's own
                        // term keeps from the actor.
                        let wider = alternatives_in(write, Mask::MAX)
                            .filter(|(_, own)| {
                                own.row.iter().all(|term| granted.row.contains(term) && covers_when_granted(term))
                            })
                            .fold(0, |mask, (i, _)| mask | 1 << i);
                        if !self.may_write_through(&bucket, target, wider).await? {
                            return Err(forbidden(table.name, &bucket, Refusal::Grants));
                        }
                    }
                }
                continue;
            }
            if self.had_rows(&bucket).await? {
                return Err(forbidden(table.name, &bucket, Refusal::Grants));
            }
            self.holdings.granted_new.insert(bucket.clone(), table.name);
            self.holdings.created.insert(bucket);
        }
        Ok(())
    }

    /// Note that the mutation put `row` of `table` into `buckets`: it may read them from now
    /// on, except those it only fed through `accept(...)`.
    pub(super) fn entered(&mut self, table: &TableMeta, row: &Row, buckets: impl IntoIterator<Item = BucketKey>) {
        for bucket in buckets {
            if !self.core.memberships.iter().any(|query| query.granted_by(table, row).as_ref() == Some(&bucket)) {
                self.holdings.data_entered.insert(bucket.clone());
            }
            self.holdings.entered.insert(bucket);
        }
    }

    /// Note that rows left `buckets`.
    pub(super) fn left(&mut self, buckets: impl IntoIterator<Item = BucketKey>) {
        self.holdings.left.extend(buckets);
    }

    /// Whether the mutation may see a row in `buckets`.
    pub(super) async fn can_read(&mut self, buckets: &BTreeSet<BucketKey>) -> KernelResult<bool> {
        for bucket in buckets {
            let entered = self.holdings.entered.contains(bucket) && !self.holdings.accepted.contains(bucket);
            if entered || self.held_at_start(bucket).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// With every write in: each bucket of an anchored rule the mutation created, granted a
    /// membership of, or put a row into through `accept(...)`, has its anchor row (which the
    /// mutation may have written). A new bucket without it is refused as a join of a bucket the
    /// actor may not write, with the same words whether or not the anchor's id is taken
    /// elsewhere; a row accepted into a bucket without it, as a row no `accept(...)` admits.
    async fn check_anchors(&mut self) -> KernelResult<()> {
        let anchored = |bucket: &BucketKey| self.rule(bucket).is_some_and(|rule| rule.anchor.is_some());
        let mut pending: Vec<(BucketKey, &'static str, Refusal)> = Vec::new();
        let holdings = &self.holdings;
        let put = holdings.new_buckets.iter().chain(&holdings.granted_new).chain(&holdings.accepted_anchored);
        for (bucket, table) in put {
            if anchored(bucket) && !pending.iter().any(|(b, ..)| b == bucket) {
                pending.push((bucket.clone(), table, Refusal::Puts));
            }
        }
        for (bucket, table) in &self.holdings.granted_anchored {
            pending.push((bucket.clone(), table, Refusal::Grants));
        }
        if pending.is_empty() {
            return Ok(());
        }
        self.flush().await?;
        for (bucket, table, refusal) in pending {
            if !self.anchor_exists(&bucket).await? {
                return Err(forbidden(table, &bucket, refusal));
            }
        }
        Ok(())
    }

    /// Whether the anchor row of `bucket` is there now (live), as the mutation sees it.
    async fn anchor_exists(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(false) };
        let Some(anchor) = rule.anchor.as_ref() else { return Ok(true) };
        let table = self.core.app.table(anchor.table).expect("rule tables are app tables");
        let selection = engine_kernel::rules::buckets::RuleSelection::new(rule, anchor);
        if let Some(conn) = self.conn.sqlite() {
            let exists = exists_on_sqlite(conn, table, &selection, &bucket.params()).await;
            return exists.map_err(|e| self.failed_with(e));
        }
        let mut sql = Sql::new(format!("SELECT EXISTS (SELECT 1 FROM {} AS t WHERE ", ident(table.name)));
        selection::push_selected(&mut sql, "t", table, &selection, &bucket.params());
        sql.push(")");
        let exists = sql.build_query_scalar::<bool>().fetch_one(self.conn()?).await;
        exists.map_err(|e| self.failed(e))
    }

    /// With every write in: the actor holds each new bucket the mutation put rows into, and no
    /// bucket of a raw membership query that it did not hold and that had rows.
    pub(super) async fn check_new_buckets(&mut self) -> KernelResult<()> {
        let raw: Vec<MembershipQuery> = self.core.memberships.iter().filter(|q| q.is_raw()).cloned().collect();
        let raw_may_grant = self.holdings.frozen && !raw.is_empty();
        // A new bucket is created by a data row the mutation puts in it, not by a member joining
        // it ahead of whoever creates it: such a join is refused as a join of a bucket that
        // exists and the actor may not write, with the same words, whether or not it exists.
        let created = self.holdings.new_buckets.iter().chain(&self.holdings.granted_new);
        if let Some((bucket, table)) = created.into_iter().find(|(b, _)| !self.holdings.data_entered.contains(*b)) {
            return Err(forbidden(table, bucket, Refusal::Puts));
        }
        self.check_anchors().await?;
        if self.holdings.new_buckets.is_empty() && !raw_may_grant {
            return Ok(());
        }
        self.flush().await?;
        for (bucket, table) in std::mem::take(&mut self.holdings.new_buckets) {
            if !self.holds_now(&bucket).await? {
                return Err(forbidden(table, &bucket, Refusal::Puts));
            }
        }
        if raw_may_grant {
            for query in raw {
                let now = query.held_through(self.conn.conn()?, &self.actor, None).await.map_err(to_kernel)?;
                for bucket in now {
                    if !self.held_at_start(&bucket).await? && self.had_rows(&bucket).await? {
                        tracing::warn!(rule = bucket.rule(), bucket = %bucket, "write refused: a raw membership grant");
                        return Err(KernelError::forbidden(format!(
                            "the mutation grants the actor a bucket of rule `{}` that it did not hold",
                            bucket.rule()
                        )));
                    }
                }
            }
        }
        Ok(())
    }
}

/// Whether a live row of `table` lies in the bucket `params` of `selection`, on SQLite.
async fn exists_on_sqlite(
    conn: &mut sqlx::SqliteConnection,
    table: &TableMeta,
    selection: &engine_kernel::rules::buckets::RuleSelection,
    params: &[String],
) -> crate::error::Result<bool> {
    let mut sql = engine_sqlite::Sql::new(format!("SELECT EXISTS (SELECT 1 FROM {} AS t WHERE ", ident(table.name)));
    selection::sqlite::push_selected(&mut sql, "t", table, selection, params);
    sql.push(")");
    Ok(sql.build_query_scalar::<bool>().fetch_one(&mut *conn).await?)
}

/// Whether `bucket` of `rule` has any row now, on SQLite: a data row, or a membership row
/// granting it.
async fn has_rows_on_sqlite(
    conn: &mut sqlx::SqliteConnection,
    app: &engine_kernel::App,
    rules: &engine_kernel::rules::buckets::RuleIndex,
    rule: &'static RuleMeta,
    bucket: &BucketKey,
) -> crate::error::Result<bool> {
    let params = bucket.params();
    for selection in rules.rule_selections(rule.name) {
        let table = app.table(selection.selection.table).expect("rule tables are app tables");
        if exists_on_sqlite(conn, table, selection, &params).await? {
            return Ok(true);
        }
    }
    held::sqlite::has_member(conn, app, rule, bucket).await
}

/// Whether the actor's own row term `term` covers the same term granted to another member: a
/// constant asks the same of either, and an equality with a claim gives each its own rows; an
/// inequality with a claim gives the member the actor's rows.
fn covers_when_granted(term: &engine_kernel::rules::RowTerm) -> bool {
    term.equal || matches!(term.value, engine_kernel::rules::FilterValue::Const(_))
}
