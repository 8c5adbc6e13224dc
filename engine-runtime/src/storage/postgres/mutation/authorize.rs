//! Write authorization: no write puts data where the actor cannot read (docs/design.md §4).
//!
//! The rule, exactly:
//! - A row may be updated or deleted only if its before image lies in a bucket the actor held
//!   when the mutation began. A row the actor cannot see is not found.
//! - A write may put a row into a bucket (an insert, or an update that changes a column deciding
//!   the row's buckets) only if the actor held that bucket when the mutation began, or the
//!   bucket belongs to a membership rule, had no rows when the mutation began, and is held by
//!   the actor once the mutation's writes are in (as when creating a list makes its first member).
//!   A claim bucket of another actor is never new.
//! - Reads through the mutation see only rows of buckets the actor held at the start, or that
//!   the mutation itself put rows into.
//!
//! Whether the actor held a bucket at the start is asked lazily, bucket by bucket, until the
//! mutation first writes a table some membership query reads; just before that write every
//! holding is read and frozen, so no write can grant the mutation a bucket it then uses.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::rules::{Membership, RuleMeta};
use engine_kernel::{BucketKey, Error as KernelError, TableMeta};

use super::PgMutatorTx;
use super::errors::to_kernel;
use crate::buckets::claim_bucket;
use crate::storage::postgres::held;
use crate::storage::postgres::selection::{self, Sql};
use crate::storage::postgres::sql::ident;

type KernelResult<T> = engine_kernel::Result<T>;

/// What the mutation knows of the actor's buckets.
#[derive(Debug, Default)]
pub(super) struct Holdings {
    /// Whether the actor held a bucket when the mutation began, as far as asked.
    held_at_start: BTreeMap<BucketKey, bool>,
    /// Whether every holding has been read (before the first write to a membership table).
    frozen: bool,
    /// Buckets the mutation put rows into that it did not hold at the start: to be held by the
    /// actor when the writes are in.
    new_buckets: BTreeSet<BucketKey>,
    /// Buckets the mutation put rows into (readable by it from then on).
    entered: BTreeSet<BucketKey>,
}

/// The refusal of a write into a bucket the actor may not fill.
fn forbidden(bucket: &BucketKey) -> KernelError {
    KernelError::forbidden(format!("the mutation puts a row into bucket `{bucket}`, which the actor does not hold"))
}

impl PgMutatorTx<'_> {
    fn rule(&self, bucket: &BucketKey) -> Option<&'static RuleMeta> {
        self.store.app.sync_rules().rule(bucket.rule())
    }

    /// Whether the actor holds `bucket` with the mutation's writes in.
    async fn holds_now(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(false) };
        match self.store.memberships.iter().find(|q| q.rule().name == rule.name) {
            None => Ok(claim_bucket(rule, &self.actor).as_ref() == Some(bucket)),
            Some(query) => query.holds(self.session.conn()?, &self.actor, bucket).await.map_err(to_kernel),
        }
    }

    /// Whether the actor held `bucket` when the mutation began.
    async fn held_at_start(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        if let Some(&held) = self.holdings.held_at_start.get(bucket) {
            return Ok(held);
        }
        if self.holdings.frozen {
            return Ok(false);
        }
        let held = self.holds_now(bucket).await?;
        self.holdings.held_at_start.insert(bucket.clone(), held);
        Ok(held)
    }

    /// Whether a write to `table` may change whose buckets: some membership query reads it (a
    /// raw one may read any table).
    pub(super) fn may_grant(&self, table: &TableMeta) -> bool {
        self.store.app.sync_rules().rules.iter().any(|rule| match rule.membership {
            Some(Membership::Table { table: t, .. }) => t == table.name,
            Some(Membership::Raw { .. }) => true,
            None => false,
        })
    }

    /// Read and keep every holding, before a write to `table` that could change one.
    pub(super) async fn freeze_before_writing(&mut self, table: &TableMeta) -> KernelResult<()> {
        if self.holdings.frozen || !self.may_grant(table) {
            return Ok(());
        }
        let held = held::held_buckets(self.session.conn()?, &self.store.app, &self.store.memberships, &self.actor)
            .await
            .map_err(to_kernel)?;
        for (bucket, was_held) in self.holdings.held_at_start.iter_mut() {
            *was_held = held.contains(bucket);
        }
        for bucket in held {
            self.holdings.held_at_start.insert(bucket, true);
        }
        self.holdings.frozen = true;
        Ok(())
    }

    /// Whether `bucket` had any row when the mutation began (asked before the mutation first
    /// puts a row into it).
    async fn had_rows(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(true) };
        let params = bucket.params();
        let mut sql = Sql::new("SELECT false");
        for selection in self.store.rules.rule_selections(rule.name) {
            let table = self.store.app.table(selection.selection.table).expect("rule tables are app tables");
            sql.push(format_args!(" OR EXISTS (SELECT 1 FROM {} AS t WHERE ", ident(table.name)));
            selection::push_selected(&mut sql, "t", table, selection, &params);
            sql.push(")");
        }
        let had = sql.build_query_scalar::<bool>().fetch_one(self.conn()?).await;
        had.map_err(|e| self.failed(e))
    }

    /// May the mutation put a row into `bucket`?
    pub(super) async fn authorize_entering(&mut self, bucket: &BucketKey) -> KernelResult<()> {
        if self.holdings.entered.contains(bucket) || self.held_at_start(bucket).await? {
            return Ok(());
        }
        let is_membership_rule = self.rule(bucket).is_some_and(|r| r.membership.is_some());
        if is_membership_rule && !self.had_rows(bucket).await? {
            self.holdings.new_buckets.insert(bucket.clone());
            return Ok(());
        }
        Err(forbidden(bucket))
    }

    /// Note that the mutation put rows into `buckets`: it may read them from now on.
    pub(super) fn entered(&mut self, buckets: impl IntoIterator<Item = BucketKey>) {
        self.holdings.entered.extend(buckets);
    }

    /// Whether the mutation may see a row in `buckets`.
    pub(super) async fn can_read(&mut self, buckets: &BTreeSet<BucketKey>) -> KernelResult<bool> {
        for bucket in buckets {
            if self.holdings.entered.contains(bucket) || self.held_at_start(bucket).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// With every write in: the actor holds each new bucket the mutation put rows into.
    pub(super) async fn check_new_buckets(&mut self) -> KernelResult<()> {
        if self.holdings.new_buckets.is_empty() {
            return Ok(());
        }
        self.flush().await?;
        for bucket in std::mem::take(&mut self.holdings.new_buckets) {
            if !self.holds_now(&bucket).await? {
                return Err(forbidden(&bucket));
            }
        }
        Ok(())
    }
}
