//! The mutator transaction on Postgres: the store side of `MutatorCtx`. It enforces write
//! authorization (DESIGN.md decision 4) and merge policies (decision 7) on every write, scopes
//! every read to the actor's buckets, and collects the buckets the mutation affects.
//!
//! A mutation runs inside a transaction its caller began, or on a [`Session::Deferred`]
//! connection: its reads then run on their own (under READ COMMITTED each statement sees a
//! snapshot of its own either way) and the transaction begins just before its first write.
//!
//! Authorization, exactly: a row may be updated or deleted only if its before image lies in a
//! bucket the actor held when the mutation began (a row the actor cannot see is not found); a
//! write may put a row into a bucket only if the actor held that bucket when the mutation
//! began, or the bucket belongs to a membership rule, had no rows when the mutation began, and
//! is held by the actor once the mutation's writes are in. A claim bucket of another actor is
//! never new. Whether the actor held a bucket at the start is asked lazily, bucket by bucket,
//! until the mutation first writes a table some membership query reads; just before that write
//! every holding is read and frozen, so no write can grant the mutation a bucket it then uses.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::rules::{FilterValue, Membership, RuleMeta};
use engine_kernel::{
    Actor, BoxFuture, BucketKey, Error as KernelError, Hlc, MergePolicy, MutatorTx, Row, SqlType, TableMeta,
};
use serde_json::Value;
use sqlx::PgConnection;

use super::sql::{constant, ident, key_columns};
use super::values::{bind, check, decode};
use super::{PostgresStorage, held};
use crate::error::{Error, is_transient};

type KernelResult<T> = engine_kernel::Result<T>;

/// A mutation's view of the store, inside its transaction.
pub(crate) struct PgMutatorTx<'t> {
    session: Session<'t>,
    store: &'t PostgresStorage,
    actor: Actor,
    hlc: Hlc,
    /// The mutation's `clientMutationId`, which seeds its ids.
    seed: uuid::Uuid,
    /// Whether the actor held a bucket when the mutation began, as far as asked.
    held_at_start: BTreeMap<BucketKey, bool>,
    /// Whether every holding has been read (before the first write to a membership table).
    frozen: bool,
    /// Buckets the mutation put rows into that it did not hold at the start: to be held by the
    /// actor when the writes are in.
    new_buckets: BTreeSet<BucketKey>,
    /// Buckets the mutation put rows into (readable by it from then on).
    entered: BTreeSet<BucketKey>,
    /// Buckets whose rows the mutation changed.
    pub(crate) affected: BTreeSet<BucketKey>,
    /// Claim values (`user_id=carol`) whose membership rows the mutation wrote.
    pub(crate) membership_changes: BTreeSet<String>,
    /// The first failure of a statement: the transaction is aborted and the mutation fails.
    failure: Option<(engine_kernel::ErrorCode, String)>,
    /// The last insert, authorized but not yet sent: sent before the next operation, or with
    /// the mutation's record in one statement (a round trip saved on the commonest mutation).
    pending: Option<PendingInsert>,
}

/// The connection a mutation runs on.
pub(crate) enum Session<'t> {
    /// Inside a transaction the caller began and ends.
    Within(&'t mut PgConnection),
    /// Not in a transaction yet: one begins before the first write. A mutation that never
    /// writes before its record leaves the record to be a transaction of its own.
    Deferred(&'t mut PgConnection),
    /// The transaction begun before the first write, committed by [`PgMutatorTx::commit`].
    Begun(sqlx::Transaction<'t, sqlx::Postgres>),
    /// Beginning the transaction failed; the mutation has failed with it.
    Lost,
}

impl Session<'_> {
    fn conn(&mut self) -> KernelResult<&mut PgConnection> {
        match self {
            Session::Within(conn) | Session::Deferred(conn) => Ok(conn),
            Session::Begun(tx) => Ok(&mut **tx),
            Session::Lost => Err(KernelError::Transient("the mutation's transaction could not begin".into())),
        }
    }
}

/// `INSERT` of every column of `table` (and its HLC stamps), placeholders from `$first` on.
pub(crate) fn insert_sql(table: &TableMeta, stamped: bool, first: usize) -> String {
    let mut columns: Vec<String> = table.columns.iter().map(|c| ident(c.name)).collect();
    let mut values: Vec<String> = (0..table.columns.len()).map(|i| format!("${}", first + i)).collect();
    if stamped {
        columns.push("_engine_hlc".into());
        values.push(format!("${}::jsonb", first + table.columns.len()));
    }
    format!("INSERT INTO {} ({}) VALUES ({})", ident(table.name), columns.join(", "), values.join(", "))
}

/// An authorized insert waiting to be sent.
pub(crate) struct PendingInsert {
    table: &'static TableMeta,
    values: Vec<Value>,
    stamps: Option<Value>,
}

impl PendingInsert {
    /// The table the insert goes to.
    pub(crate) fn table(&self) -> &'static TableMeta {
        self.table
    }

    /// `query` with the insert's values bound.
    pub(crate) fn bind<'q>(
        &self,
        mut query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> crate::error::Result<sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>> {
        for (column, value) in self.table.columns.iter().zip(&self.values) {
            query = bind(query, self.table.name, column, value)?;
        }
        if let Some(stamps) = &self.stamps {
            query = query.bind(stamps.clone());
        }
        Ok(query)
    }
}

impl<'t> PgMutatorTx<'t> {
    pub(crate) fn new(
        session: Session<'t>,
        store: &'t PostgresStorage,
        actor: Actor,
        hlc: Hlc,
        seed: uuid::Uuid,
    ) -> Self {
        PgMutatorTx {
            session,
            store,
            actor,
            hlc,
            seed,
            held_at_start: BTreeMap::new(),
            frozen: false,
            new_buckets: BTreeSet::new(),
            entered: BTreeSet::new(),
            affected: BTreeSet::new(),
            membership_changes: BTreeSet::new(),
            failure: None,
            pending: None,
        }
    }

    /// The connection, for a read (or the mutation's record).
    pub(crate) fn conn(&mut self) -> KernelResult<&mut PgConnection> {
        self.session.conn()
    }

    /// The connection, for a write: in the mutation's transaction, begun now if deferred.
    async fn writing(&mut self) -> KernelResult<&mut PgConnection> {
        self.session = match std::mem::replace(&mut self.session, Session::Lost) {
            Session::Deferred(conn) => match sqlx::Connection::begin(conn).await {
                Ok(tx) => Session::Begun(tx),
                Err(e) => return Err(self.failed(e)),
            },
            other => other,
        };
        self.conn()
    }

    /// Commit the transaction the mutation began; one its caller began, the caller commits.
    pub(crate) async fn commit(self) -> KernelResult<()> {
        match self.session {
            Session::Begun(tx) => tx.commit().await.map_err(|e| map_sql_error(&e)),
            _ => Ok(()),
        }
    }

    /// Send the insert waiting to be sent, if any.
    async fn flush(&mut self) -> KernelResult<()> {
        let Some(pending) = self.pending.take() else { return Ok(()) };
        let sql = self.store.statements.insert(pending.table);
        let query = pending.bind(sqlx::query(sqlx::AssertSqlSafe(sql))).map_err(to_kernel)?;
        if let Err(e) = query.execute(self.writing().await?).await {
            return Err(self.failed(e));
        }
        Ok(())
    }

    /// The insert still waiting, to be sent with the mutation's record.
    pub(crate) fn take_pending(&mut self) -> Option<PendingInsert> {
        self.pending.take()
    }

    /// After the mutator returned: the checks that need all its writes in.
    pub(crate) async fn finish(&mut self) -> KernelResult<()> {
        if let Some((code, message)) = &self.failure {
            return Err(rebuild(*code, message));
        }
        if !self.new_buckets.is_empty() {
            self.flush().await?;
        }
        let new: Vec<BucketKey> = self.new_buckets.iter().cloned().collect();
        for bucket in new {
            if !self.holds_now(&bucket).await? {
                return Err(KernelError::forbidden(format!(
                    "the mutation puts a row into bucket `{bucket}`, which the actor does not hold"
                )));
            }
        }
        Ok(())
    }

    fn rule(&self, bucket: &BucketKey) -> Option<&'static RuleMeta> {
        self.store.app.sync_rules().rule(bucket.rule())
    }

    fn membership_query(&self, rule: &RuleMeta) -> Option<&held::MembershipQuery> {
        self.store.memberships.iter().find(|q| q.rule().name == rule.name)
    }

    /// Whether the actor holds `bucket` with the mutation's writes in.
    async fn holds_now(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(false) };
        match self.membership_query(rule) {
            None => Ok(crate::buckets::claim_bucket(rule, &self.actor).as_ref() == Some(bucket)),
            Some(query) => {
                let query = query.clone();
                query.holds(self.session.conn()?, &self.actor, bucket).await.map_err(to_kernel)
            }
        }
    }

    /// Whether the actor held `bucket` when the mutation began.
    async fn held_at_start(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        if let Some(&held) = self.held_at_start.get(bucket) {
            return Ok(held);
        }
        if self.frozen {
            return Ok(false);
        }
        let held = self.holds_now(bucket).await?;
        self.held_at_start.insert(bucket.clone(), held);
        Ok(held)
    }

    /// Read and keep every holding, before a write that could change one.
    async fn freeze_before_writing(&mut self, table: &TableMeta) -> KernelResult<()> {
        if self.frozen {
            return Ok(());
        }
        let reads_table = |rule: &RuleMeta| match rule.membership {
            Some(Membership::Table { table: t, .. }) => t == table.name,
            // A raw query may read any table.
            Some(Membership::Raw { .. }) => true,
            None => false,
        };
        if !self.store.app.sync_rules().rules.iter().any(reads_table) {
            return Ok(());
        }
        let held = held::held_buckets(self.session.conn()?, &self.store.app, &self.store.memberships, &self.actor)
            .await
            .map_err(to_kernel)?;
        for bucket in self.held_at_start.keys().cloned().collect::<Vec<_>>() {
            self.held_at_start.insert(bucket.clone(), held.contains(&bucket));
        }
        for bucket in held {
            self.held_at_start.insert(bucket, true);
        }
        self.frozen = true;
        Ok(())
    }

    /// Whether bucket `bucket` had any row when the mutation began (asked before the mutation
    /// first puts a row into it).
    async fn had_rows(&mut self, bucket: &BucketKey) -> KernelResult<bool> {
        let Some(rule) = self.rule(bucket) else { return Ok(true) };
        let params = bucket.params();
        let mut alternatives = Vec::new();
        let mut binds: Vec<String> = Vec::new();
        for selection in rule.data {
            let table = self.store.app.table(selection.table).expect("rule tables are app tables");
            let mut conditions = Vec::new();
            for (param, value) in rule.parameters.iter().zip(&params) {
                let scope = selection.scope.iter().find(|s| s.param == param.name).expect("every parameter is scoped");
                let column = table.column(scope.column).expect("scope columns exist");
                binds.push(value.clone());
                conditions.push(match column.sql_type {
                    SqlType::Text => format!("t.{} = ${}", ident(scope.column), binds.len()),
                    other => format!("t.{} = ${}::text::{}", ident(scope.column), binds.len(), other.postgres()),
                });
            }
            for filter in selection.filters {
                conditions.push(format!("t.{} = {}", ident(filter.column), constant(filter.value)));
            }
            if let Some(deleted) = table.soft_delete {
                conditions.push(format!("t.{} IS NULL", ident(deleted)));
            }
            alternatives.push(format!(
                "EXISTS (SELECT 1 FROM {} AS t WHERE {})",
                ident(table.name),
                conditions.join(" AND ")
            ));
        }
        let sql = format!("SELECT {}", alternatives.join(" OR "));
        let mut query = sqlx::query_scalar::<_, bool>(sqlx::AssertSqlSafe(sql));
        for value in binds {
            query = query.bind(value);
        }
        query.fetch_one(self.conn()?).await.map_err(|e| self.failed(e))
    }

    /// May the mutation put a row into `bucket`?
    async fn authorize_entering(&mut self, bucket: &BucketKey) -> KernelResult<()> {
        if self.entered.contains(bucket) || self.held_at_start(bucket).await? {
            return Ok(());
        }
        let is_membership_rule = self.rule(bucket).is_some_and(|r| r.membership.is_some());
        if is_membership_rule && !self.had_rows(bucket).await? {
            self.new_buckets.insert(bucket.clone());
            return Ok(());
        }
        Err(KernelError::forbidden(format!(
            "the mutation puts a row into bucket `{bucket}`, which the actor does not hold"
        )))
    }

    /// Whether the mutation may see a row in `buckets` (of a synced table).
    async fn can_read(&mut self, buckets: &BTreeSet<BucketKey>) -> KernelResult<bool> {
        for bucket in buckets {
            if self.entered.contains(bucket) || self.held_at_start(bucket).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn is_synced(&self, table: &TableMeta) -> bool {
        !self.store.rules.selections(table.name).is_empty()
    }

    fn reads_memberships(&self, table: &TableMeta) -> bool {
        self.store
            .app
            .sync_rules()
            .rules
            .iter()
            .any(|r| matches!(r.membership, Some(Membership::Table { table: t, .. }) if t == table.name))
    }

    /// Note that a write may change whose memberships: a raw membership query may read any
    /// table, so in an app with one every write may change anyone's.
    fn note_write(&mut self) {
        let raw =
            self.store.app.sync_rules().rules.iter().any(|r| matches!(r.membership, Some(Membership::Raw { .. })));
        if raw {
            self.membership_changes.insert("*".into());
        }
    }

    /// Note the claim values of a membership row, whose holders' bucket sets may change.
    fn note_membership(&mut self, table: &TableMeta, row: &Row) {
        for rule in self.store.app.sync_rules().rules {
            if let Some(Membership::Table { table: t, filters }) = rule.membership
                && t == table.name
            {
                for filter in filters {
                    if let FilterValue::Claim(claim) = filter.value
                        && let Some(value) = row.get(filter.column).and_then(crate::buckets::param_text)
                    {
                        let name = claim.describe();
                        self.membership_changes.insert(format!("{}={value}", name.trim_start_matches("actor.")));
                    }
                }
            }
        }
    }

    /// Record a failed statement: the transaction is aborted from here on.
    fn failed(&mut self, err: sqlx::Error) -> KernelError {
        let mapped = map_sql_error(&err);
        if self.failure.is_none() {
            self.failure = Some((mapped.code(), message_of(&mapped)));
        }
        mapped
    }

    fn check_usable(&self) -> KernelResult<()> {
        match &self.failure {
            Some((code, message)) => Err(rebuild(*code, message)),
            None => Ok(()),
        }
    }

    /// The row with key `key` of `table`, locked for update when asked, with its HLC stamps.
    async fn fetch(
        &mut self,
        table: &'static TableMeta,
        key: &Row,
        lock: bool,
        live_only: bool,
    ) -> KernelResult<Option<(Row, serde_json::Map<String, Value>)>> {
        let field = table.merge == MergePolicy::Field && self.is_synced(table);
        let mut columns: Vec<String> = table.columns.iter().map(|c| format!("t.{}", ident(c.name))).collect();
        if field {
            columns.push("t._engine_hlc".into());
        }
        let live = match table.soft_delete {
            Some(deleted) if live_only => format!(" AND t.{} IS NULL", ident(deleted)),
            _ => String::new(),
        };
        let sql = format!(
            "SELECT {} FROM {} AS t WHERE {}{live}{}",
            columns.join(", "),
            ident(table.name),
            key_predicate(table, "t.", 1),
            if lock { " FOR UPDATE" } else { "" }
        );
        let query = bind_key(sqlx::query(sqlx::AssertSqlSafe(sql)), table, key)?;
        // A row locked for an update or delete is locked in the mutation's transaction.
        let conn = if lock { self.writing().await? } else { self.conn()? };
        let row = match query.fetch_optional(conn).await {
            Ok(row) => row,
            Err(e) => return Err(self.failed(e)),
        };
        let Some(row) = row else { return Ok(None) };
        let mut out = Row::new();
        for (i, column) in table.columns.iter().enumerate() {
            out.insert(column.name.to_owned(), decode(&row, i, column).map_err(to_kernel)?);
        }
        let stamps = if field {
            use sqlx::Row as _;
            match row.try_get::<Value, _>(table.columns.len()) {
                Ok(Value::Object(map)) => map,
                _ => serde_json::Map::new(),
            }
        } else {
            serde_json::Map::new()
        };
        Ok(Some((out, stamps)))
    }

    async fn insert_row(&mut self, table: &'static TableMeta, row: Row) -> KernelResult<()> {
        self.check_usable()?;
        self.flush().await?;
        for key in row.keys() {
            if table.column(key).is_none() {
                return Err(KernelError::validation(format!("table `{}` has no column `{key}`", table.name)));
            }
        }
        let buckets = self.store.rules.row_buckets(table, &row);
        for bucket in &buckets {
            self.authorize_entering(bucket).await?;
        }
        if self.reads_memberships(table) {
            self.freeze_before_writing(table).await?;
        }
        let field = table.merge == MergePolicy::Field && self.is_synced(table);
        let mut values = Vec::with_capacity(table.columns.len());
        for column in table.columns {
            let mut value = row.get(column.name).cloned().unwrap_or(Value::Null);
            if column.sql_type.is_crdt() && !value.is_null() {
                // The initial document must decode like any update from a client.
                value = engine_kernel::crdt::merged_column(column.sql_type, None, &value)?;
            }
            // Refuse a value of the wrong shape now, not when the insert is sent.
            check(table.name, column, &value).map_err(to_kernel)?;
            values.push(value);
        }
        let stamps = field.then(|| {
            let stamp = Value::from(self.hlc.to_string());
            Value::Object(table.columns.iter().map(|c| (c.name.to_owned(), stamp.clone())).collect())
        });
        self.flush().await?;
        self.pending = Some(PendingInsert { table, values, stamps });
        self.note_write();
        if self.reads_memberships(table) {
            self.note_membership(table, &row);
        }
        self.entered.extend(buckets.iter().cloned());
        self.affected.extend(buckets);
        Ok(())
    }

    async fn update_row(
        &mut self,
        table: &'static TableMeta,
        key: Row,
        changes: Vec<(&'static str, Value)>,
    ) -> KernelResult<bool> {
        self.check_usable()?;
        self.flush().await?;
        for (column, _) in &changes {
            if table.column(column).is_none() {
                return Err(KernelError::validation(format!("table `{}` has no column `{column}`", table.name)));
            }
            if table.is_key(column) {
                return Err(KernelError::validation(format!("the primary key of `{}` cannot change", table.name)));
            }
        }
        let Some((before, mut stamps)) = self.fetch(table, &key, true, false).await? else { return Ok(false) };
        let synced = self.is_synced(table);
        let before_buckets = self.store.rules.row_buckets(table, &before);
        if synced && !self.can_read(&before_buckets).await? {
            return Ok(false); // a row the actor cannot see is not found
        }
        let mut after = before.clone();
        let stamp = self.hlc.to_string();
        for (column, value) in &changes {
            let meta = table.column(column).expect("checked above");
            if meta.sql_type.is_crdt() {
                let merged = engine_kernel::crdt::merged_column(meta.sql_type, after.get(*column), value)?;
                after.insert((*column).to_owned(), merged);
            } else if table.merge == MergePolicy::Field && synced {
                // Per column, the newer clock wins; a write that loses still bumps the row.
                let newer = stamps.get(*column).and_then(Value::as_str).is_none_or(|old| stamp.as_str() > old);
                if newer {
                    after.insert((*column).to_owned(), value.clone());
                    stamps.insert((*column).to_owned(), Value::from(stamp.clone()));
                }
            } else {
                after.insert((*column).to_owned(), value.clone());
            }
        }
        let after_buckets = self.store.rules.row_buckets(table, &after);
        for bucket in after_buckets.difference(&before_buckets) {
            self.authorize_entering(bucket).await?;
        }
        if self.reads_memberships(table) {
            self.freeze_before_writing(table).await?;
        }
        let assigned: Vec<&'static engine_kernel::ColumnMeta> = {
            let mut columns: Vec<_> = changes.iter().map(|(c, _)| table.column(c).expect("checked")).collect();
            columns.dedup_by_key(|c| c.name);
            columns
        };
        let field = table.merge == MergePolicy::Field && synced;
        let mut sets: Vec<String> =
            assigned.iter().enumerate().map(|(i, c)| format!("{} = ${}", ident(c.name), i + 1)).collect();
        if field {
            sets.push(format!("_engine_hlc = ${}::jsonb", assigned.len() + 1));
        }
        if sets.is_empty() {
            // Nothing to set: touch the row so pulling clients see it again.
            sets.push(format!("{} = {}", ident(key_columns(table)[0].name), ident(key_columns(table)[0].name)));
        }
        let sql = format!(
            "UPDATE {} SET {} WHERE {}",
            ident(table.name),
            sets.join(", "),
            key_predicate(table, "", assigned.len() + usize::from(field) + 1)
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for column in &assigned {
            let value = after.get(column.name).cloned().unwrap_or(Value::Null);
            query = bind(query, table.name, column, &value).map_err(to_kernel)?;
        }
        if field {
            query = query.bind(Value::Object(stamps));
        }
        let query = bind_key(query, table, &key)?;
        if let Err(e) = query.execute(self.writing().await?).await {
            return Err(self.failed(e));
        }
        self.note_write();
        if self.reads_memberships(table) {
            self.note_membership(table, &before);
            self.note_membership(table, &after);
        }
        self.entered.extend(after_buckets.difference(&before_buckets).cloned());
        self.affected.extend(before_buckets);
        self.affected.extend(after_buckets);
        Ok(true)
    }

    async fn purge_row(&mut self, table: &'static TableMeta, key: Row) -> KernelResult<bool> {
        self.check_usable()?;
        self.flush().await?;
        let Some((before, _)) = self.fetch(table, &key, true, false).await? else { return Ok(false) };
        let buckets = self.store.rules.row_buckets(table, &before);
        let live = table.soft_delete.is_none_or(|c| before.get(c).is_none_or(Value::is_null));
        if self.is_synced(table) {
            // A soft-deleted row is in no bucket; the buckets it was in decide who may purge it.
            let deciding =
                if live { buckets.clone() } else { self.store.rules.row_buckets(table, &undeleted(table, &before)) };
            if !self.can_read(&deciding).await? {
                return Ok(false);
            }
        }
        if self.reads_memberships(table) {
            self.freeze_before_writing(table).await?;
        }
        let sql = format!("DELETE FROM {} WHERE {}", ident(table.name), key_predicate(table, "", 1));
        let query = bind_key(sqlx::query(sqlx::AssertSqlSafe(sql)), table, &key)?;
        if let Err(e) = query.execute(self.writing().await?).await {
            return Err(self.failed(e));
        }
        self.note_write();
        if self.reads_memberships(table) {
            self.note_membership(table, &before);
        }
        self.affected.extend(buckets);
        Ok(true)
    }

    async fn select_rows(
        &mut self,
        table: &'static TableMeta,
        key: Option<Row>,
        filter: Vec<(&'static str, Value)>,
        limit: Option<u32>,
    ) -> KernelResult<Vec<Row>> {
        self.check_usable()?;
        self.flush().await?;
        let mut equalities: Vec<(&'static engine_kernel::ColumnMeta, Value)> = Vec::new();
        for (column, value) in key.into_iter().flatten().chain(filter.into_iter().map(|(c, v)| (c.to_owned(), v))) {
            let meta = table
                .column(&column)
                .ok_or_else(|| KernelError::validation(format!("table `{}` has no column `{column}`", table.name)))?;
            if meta.sql_type.is_crdt() {
                return Err(KernelError::validation(format!(
                    "collaborative column `{}.{column}` cannot be compared",
                    table.name
                )));
            }
            equalities.push((meta, value));
        }
        let mut conditions: Vec<String> =
            equalities.iter().enumerate().map(|(i, (c, _))| format!("t.{} = ${}", ident(c.name), i + 1)).collect();
        if let Some(deleted) = table.soft_delete {
            conditions.push(format!("t.{} IS NULL", ident(deleted)));
        }
        let columns: Vec<String> = table.columns.iter().map(|c| format!("t.{}", ident(c.name))).collect();
        let order: Vec<String> = key_columns(table).iter().map(|c| super::sql::ordered("t", c)).collect();
        let sql = format!(
            "SELECT {} FROM {} AS t{}{} ORDER BY {}",
            columns.join(", "),
            ident(table.name),
            if conditions.is_empty() { "" } else { " WHERE " },
            conditions.join(" AND "),
            order.join(", ")
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (column, value) in &equalities {
            query = bind(query, table.name, column, value).map_err(to_kernel)?;
        }
        let rows = match query.fetch_all(self.conn()?).await {
            Ok(rows) => rows,
            Err(e) => return Err(self.failed(e)),
        };
        let synced = self.is_synced(table);
        let mut out = Vec::new();
        for row in rows {
            let mut decoded = Row::new();
            for (i, column) in table.columns.iter().enumerate() {
                decoded.insert(column.name.to_owned(), decode(&row, i, column).map_err(to_kernel)?);
            }
            if synced && !self.can_read(&self.store.rules.row_buckets(table, &decoded)).await? {
                continue;
            }
            out.push(decoded);
            if limit.is_some_and(|l| out.len() >= l as usize) {
                break;
            }
        }
        Ok(out)
    }
}

/// `col = $n AND …` over the primary key of `table`, columns prefixed by `alias` (`t.` or
/// nothing), placeholders from `$first` on.
fn key_predicate(table: &TableMeta, alias: &str, first: usize) -> String {
    let conditions: Vec<String> = key_columns(table)
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{alias}{} = ${}", ident(c.name), first + i))
        .collect();
    conditions.join(" AND ")
}

/// `query` with the primary key values of `key` bound, in [`key_predicate`]'s order.
fn bind_key<'q>(
    mut query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    table: &'static TableMeta,
    key: &Row,
) -> KernelResult<sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>> {
    for column in key_columns(table) {
        let value = key.get(column.name).cloned().unwrap_or(Value::Null);
        query = bind(query, table.name, column, &value).map_err(to_kernel)?;
    }
    Ok(query)
}

/// `row` with its soft-delete column cleared: the buckets it was in before deletion.
fn undeleted(table: &TableMeta, row: &Row) -> Row {
    let mut row = row.clone();
    if let Some(column) = table.soft_delete {
        row.insert(column.to_owned(), Value::Null);
    }
    row
}

/// The message of a kernel error, without its class's prefix.
fn message_of(err: &KernelError) -> String {
    match err {
        KernelError::Validation(m)
        | KernelError::Forbidden(m)
        | KernelError::MutatorFailed(m)
        | KernelError::Conflict(m)
        | KernelError::Transient(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The failure of an earlier statement again, in its class: a mutation whose statement failed
/// fails as that statement did, whatever the mutator did next.
fn rebuild(code: engine_kernel::ErrorCode, message: &str) -> KernelError {
    use engine_kernel::ErrorCode;
    match code {
        ErrorCode::RetryLater => KernelError::Transient(message.to_owned()),
        ErrorCode::Conflict => KernelError::conflict(message),
        ErrorCode::ValidationFailed => KernelError::validation(message),
        _ => KernelError::Internal(message.to_owned().into()),
    }
}

/// A database error, classified by SQLSTATE for the push protocol.
pub(crate) fn map_sql_error(err: &sqlx::Error) -> KernelError {
    if is_transient(err) {
        return KernelError::Transient(err.to_string());
    }
    if let sqlx::Error::Database(db) = err {
        let code = db.code().unwrap_or_default();
        if code.starts_with("23") {
            let what = match code.as_ref() {
                "23505" => "a row with this key already exists",
                "23503" => "a referenced row is missing",
                "23502" => "a required column is null",
                "23514" => "a check constraint refused the values",
                _ => "a constraint refused the write",
            };
            return KernelError::conflict(what);
        }
        if code.starts_with("22") {
            return KernelError::validation("a value does not fit its column");
        }
    }
    KernelError::Internal(err.to_string().into())
}

fn to_kernel(err: Error) -> KernelError {
    match err {
        Error::Kernel(e) => e,
        Error::RetryLater { detail, .. } => KernelError::Transient(detail),
        Error::Database(e) => map_sql_error(&e),
        other => KernelError::Internal(other.to_string().into()),
    }
}

impl PgMutatorTx<'_> {
    async fn enqueue_job(&mut self, job: engine_kernel::JobRequest) -> KernelResult<()> {
        self.check_usable()?;
        let user = self.actor.user_id.clone();
        if let Err(e) = super::jobs::insert(self.writing().await?, &job, Some(&user)).await {
            return Err(self.failed(e));
        }
        Ok(())
    }
}

impl MutatorTx for PgMutatorTx<'_> {
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
        Box::pin(self.insert_row(table, row))
    }

    fn update<'a>(
        &'a mut self,
        table: &'static TableMeta,
        key: Row,
        changes: Vec<(&'static str, Value)>,
    ) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(self.update_row(table, key, changes))
    }

    fn delete<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(async move {
            match table.soft_delete {
                Some(column) => {
                    let now = <engine_kernel::Timestamp as engine_kernel::ColumnType>::to_json(&chrono::Utc::now());
                    // Deleting a row already deleted finds nothing.
                    self.flush().await?;
                    match self.fetch(table, &key, false, true).await? {
                        Some(_) => self.update_row(table, key, vec![(column, now)]).await,
                        None => Ok(false),
                    }
                }
                None => self.purge_row(table, key).await,
            }
        })
    }

    fn purge<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<bool>> {
        Box::pin(self.purge_row(table, key))
    }

    fn get<'a>(&'a mut self, table: &'static TableMeta, key: Row) -> BoxFuture<'a, KernelResult<Option<Row>>> {
        Box::pin(async move { Ok(self.select_rows(table, Some(key), Vec::new(), Some(1)).await?.into_iter().next()) })
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
