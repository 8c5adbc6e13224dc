//! The bounds a written row keeps (`StoreLimits`): keys and the values that become bucket
//! parameters stay short enough for every index and cursor that carries them, and a row's JSON
//! stays within its table's bound; no text holds a NUL character, which Postgres stores in no
//! text or JSON and which SQLite would keep, so that a row is the same on either backend. A write
//! past one is rejected `validation_failed`, naming the bound, before it reaches the database.
//! A member has at most `StoreLimits::pending_invitations` pending invitations of one rule, and a
//! bucket at most `StoreLimits::accepted_rows` rows of one table that `accept(open(Other))` let
//! in from one bucket of `Other`: a write past either is rejected `forbidden`, so strangers
//! cannot grow another's invitations or inbox without bound.

use std::collections::BTreeSet;

use engine_kernel::rules::buckets::RuleSelection;
use engine_kernel::rules::{ConstValue, FilterValue, Membership, ParamSource, RuleMeta};
use engine_kernel::{BucketKey, Error as KernelError, Row, TableMeta};
use serde_json::Value;

use super::ServerTx;
use crate::pg::sql::{constant, ident};
use crate::rules::selection;

type KernelResult<T> = engine_kernel::Result<T>;

/// The bytes a value takes in its JSON form (a text value: its UTF-8 bytes).
fn bytes_of(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len(),
        other => serde_json::to_string(other).map_or(0, |s| s.len()),
    }
}

impl ServerTx<'_> {
    /// Refuse `row` of `table` (every column, as it will be stored) past a bound. A NUL in its
    /// texts is [`refuse_nul`]'s to refuse, before anything reads with the row's values.
    pub(super) fn check_bounds(&self, table: &TableMeta, row: &Row) -> KernelResult<()> {
        let limits = &self.core.limits;
        let mut keys: Vec<&str> = table.primary_key.to_vec();
        for selection in self.core.rules.selections(table.name) {
            keys.extend(selection.scope_columns());
            keys.extend(selection.ties().iter().map(|(column, _)| *column));
        }
        for column in keys {
            let bytes = row.get(column).map_or(0, bytes_of);
            if bytes > limits.key_bytes {
                return Err(KernelError::validation(format!(
                    "column `{}.{column}` holds a key or bucket parameter of {bytes} bytes; at most {} are taken",
                    table.name, limits.key_bytes
                )));
            }
        }
        let row_bytes = serde_json::to_vec(row).map_or(0, |json| json.len());
        let bound = limits.row_bytes_of(table.name);
        if row_bytes > bound {
            return Err(KernelError::validation(format!(
                "a row of `{}` of {row_bytes} bytes; at most {bound} are taken",
                table.name
            )));
        }
        Ok(())
    }
}

impl ServerTx<'_> {
    /// Refuse `after` of `table` when it is a pending invitation of a rule with `invite(...)`
    /// (`before` none, or not the same member's pending invitation of it) whose member already
    /// has `StoreLimits::pending_invitations` pending ones of that rule. The count reads every
    /// row, not only those the actor sees: the inviter sees none of another's invitations.
    pub(super) async fn check_pending_invitations(
        &mut self,
        table: &'static TableMeta,
        before: Option<&Row>,
        after: &Row,
    ) -> KernelResult<()> {
        let bound = self.core.limits.pending_invitations;
        for rule in self.inviting() {
            let (Some(column), Some(Membership::Table { filters, .. })) = (rule.invite, rule.membership) else {
                continue;
            };
            let pending = |row: &Row| is_pending(rule, table, row);
            if !pending(after) {
                continue;
            }
            // The member: the columns the membership query compares with the actor's claims.
            let member: Vec<&'static str> =
                filters.iter().filter(|f| matches!(f.value, FilterValue::Claim(_))).map(|f| f.column).collect();
            if before.is_some_and(|b| pending(b) && member.iter().all(|c| b.get(*c) == after.get(*c))) {
                continue;
            }
            let mut equalities = vec![(table.filter_column(column)?, serde_json::Value::Bool(false))];
            for name in &member {
                equalities.push((table.filter_column(name)?, after.get(*name).cloned().unwrap_or_default()));
            }
            let values = Value::Array(equalities[1..].iter().map(|(_, value)| value.clone()).collect());
            self.count_alone(&format!("_engine_invitations/{}:{values}", rule.name)).await?;
            let held = self.rows_where(table, &equalities).await?.into_iter().filter(|row| pending(row)).count();
            if held >= bound {
                let who = member.iter().filter_map(|c| after.get(*c)).map(Value::to_string).collect::<Vec<_>>();
                return Err(KernelError::forbidden(format!(
                    "{} has {bound} pending invitations of `{}`, the most kept: it accepts or declines some before it is invited again",
                    who.join(", "),
                    rule.name
                )));
            }
        }
        Ok(())
    }
}

impl ServerTx<'_> {
    /// The rules with `invite(...)` whose memberships grant buckets of their own.
    fn inviting(&self) -> Vec<&'static RuleMeta> {
        self.core.rules.granting().filter(|rule| rule.invite.is_some()).collect()
    }

    /// Refuse `row` of `table` entering buckets the actor does not hold through
    /// `accept(open(...))` only (`open`, each with the bucket of the accepted rule that lets it
    /// in, from [`authorize_entering`](Self::authorize_entering)) where the bucket already keeps
    /// `StoreLimits::accepted_rows` rows of `table` that lie in that one too. A pending
    /// invitation to the bucket of the accepted rule is neither checked nor counted here:
    /// `check_pending_invitations` bounds it, per member. Not one pending under another rule:
    /// its invitation says nothing of the rows the accepted rule lets in. The count reads every
    /// row, not only those the actor sees.
    pub(super) async fn check_accepted_rows(
        &mut self,
        table: &'static TableMeta,
        open: &[(BucketKey, BucketKey)],
        row: &Row,
    ) -> KernelResult<()> {
        let bound = self.core.limits.accepted_rows;
        for (bucket, source) in open {
            let inviting = self.rule(source).filter(|rule| rule.invite.is_some());
            if inviting.is_some_and(|rule| {
                is_pending(rule, table, row) && rule.invited_to(table, row).as_ref() == Some(source)
            }) {
                continue;
            }
            self.count_alone(&format!("_engine_accepted/{bucket}:{source}")).await?;
            if self.count_in_both(table, bucket, source, bound).await? >= bound {
                tracing::warn!(table = table.name, bucket = %bucket, source = %source, "write refused: accepted rows");
                return Err(KernelError::forbidden(format!(
                    "the mutation puts a row of `{table}` through `accept(open(...))` into a bucket of rule `{rule}` that the actor does not hold, which keeps {bound} rows of `{table}` from the actor's bucket of rule `{from}` already, the most it takes from one (`StoreLimits::accepted_rows`): it takes more once some of them are deleted",
                    table = table.name,
                    rule = bucket.rule(),
                    from = source.rule(),
                )));
            }
        }
        Ok(())
    }

    /// The buckets a row stays in that its writer does not hold and that take rows through
    /// `accept(open(...))`, each with a bucket of the accepted rule that the row enters: a
    /// message moved from one outbox to another while it stays in an inbox. Such a pair is new
    /// to the row as much as a bucket it enters ([`check_accepted_rows`](Self::check_accepted_rows)).
    pub(super) async fn open_sources_entered(
        &mut self,
        before: &BTreeSet<BucketKey>,
        after: &BTreeSet<BucketKey>,
    ) -> KernelResult<Vec<(BucketKey, BucketKey)>> {
        let mut pairs = Vec::new();
        for bucket in before.intersection(after) {
            let Some(rule) = self.rule(bucket) else { continue };
            let open: Vec<&str> = rule.accepts.iter().filter(|a| a.open).map(|a| a.rule).collect();
            let entered: Vec<BucketKey> =
                after.difference(before).filter(|b| open.contains(&b.rule())).cloned().collect();
            if entered.is_empty() || self.held_at_start(bucket).await? {
                continue;
            }
            pairs.extend(entered.into_iter().map(|source| (bucket.clone(), source)));
        }
        Ok(pairs)
    }

    /// How many live rows of `table` lie in both `bucket` and `source`, counted up to `bound`.
    async fn count_in_both(
        &mut self,
        table: &'static TableMeta,
        bucket: &BucketKey,
        source: &BucketKey,
        bound: usize,
    ) -> KernelResult<usize> {
        let of = |bucket: &BucketKey| {
            let selections = self.core.rules.selections(table.name).iter().filter(|s| s.rule.name == bucket.rule());
            (selections.cloned().collect::<Vec<_>>(), bucket.params())
        };
        let both = [of(bucket), of(source)];
        let inviting = self.rule(source).filter(|rule| rule.invite.is_some());
        let count = match self.conn.sqlite() {
            Some(conn) => {
                let pending = inviting.and_then(|rule| pending_condition(rule, table, selection::sqlite::constant));
                let mut sql = count_in_all(table, &both, pending, bound, |sql, selection, params| {
                    selection::sqlite::push_selected(sql, "t", table, selection, params);
                });
                let count = sql.build_query_scalar::<i64>().fetch_one(&mut *conn).await;
                count.map_err(|e| self.failed_with(e.into()))?
            }
            None => {
                let pending = inviting.and_then(|rule| pending_condition(rule, table, constant));
                let mut sql = count_in_all(table, &both, pending, bound, |sql, selection, params| {
                    selection::push_selected(sql, "t", table, selection, params);
                });
                let count = sql.build_query_scalar::<i64>().fetch_one(self.conn()?).await;
                count.map_err(|e| self.failed(e))?
            }
        };
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Wait until no other transaction counts the rows a bound named `name` keeps, and keep them
    /// to this one until it ends (Postgres): two writes counted at once would each see room for
    /// itself. A SQLite store has one writer, which already counts them one at a time.
    async fn count_alone(&mut self, name: &str) -> KernelResult<()> {
        if self.conn.is_sqlite() {
            return Ok(());
        }
        let lock = sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(name)
            .execute(self.writing().await?)
            .await;
        lock.map(|_| ()).map_err(|e| self.failed(e))
    }
}

/// Refuse `row` of `table` when a text in it holds a NUL character: before anything reads with
/// its values, so that it is refused in the same words on either store (Postgres would refuse
/// to compare with such a text).
pub(super) fn refuse_nul(table: &TableMeta, row: &Row) -> KernelResult<()> {
    match row.iter().find(|(_, value)| holds_nul(value)) {
        Some((column, _)) => Err(KernelError::validation(format!(
            "column `{}.{column}` holds a NUL character, which no stored text may",
            table.name
        ))),
        None => Ok(()),
    }
}

/// The statement counting the live rows of `table` that lie in every bucket of `buckets` (the
/// selections of its rule that read the table, and its parameters) and are not `pending` (a
/// condition on `t`), up to `bound`, on either backend: `push_selected` is that backend's
/// selection compiler.
fn count_in_all<DB: sqlx::Database>(
    table: &TableMeta,
    buckets: &[(Vec<RuleSelection>, Vec<String>)],
    pending: Option<String>,
    bound: usize,
    push_selected: impl Fn(&mut sqlx::QueryBuilder<DB>, &RuleSelection, &[String]),
) -> sqlx::QueryBuilder<DB>
where
    DB::Arguments: Default,
{
    let mut sql =
        sqlx::QueryBuilder::new(format!("SELECT count(*) FROM (SELECT 1 FROM {} AS t WHERE true", ident(table.name)));
    for (selections, params) in buckets {
        // A row lies in a bucket when one of its rule's selections of the table puts it there.
        sql.push(" AND (false");
        for selection in selections {
            sql.push(" OR (");
            push_selected(&mut sql, selection, params);
            sql.push(")");
        }
        sql.push(")");
    }
    if let Some(pending) = pending {
        sql.push(format_args!(" AND NOT ({pending})"));
    }
    sql.push(format_args!(" LIMIT {bound}) AS kept"));
    sql
}

/// The condition on `t`, a row of `table`, of its being a pending invitation of `rule` (as
/// [`is_pending`] has it, for a row of a bucket of the rule): its `invite(...)` column not true,
/// its other constant filters holding and its parameter columns set. `None` for a rule without
/// `invite(...)` or another membership table. `constant` writes a constant as the store holds it.
fn pending_condition(rule: &RuleMeta, table: &TableMeta, constant: fn(ConstValue) -> String) -> Option<String> {
    let (Some(invite), Some(Membership::Table { table: members, filters })) = (rule.invite, rule.membership) else {
        return None;
    };
    if members != table.name {
        return None;
    }
    let column = |name: &str| format!("t.{}", ident(name));
    let mut pending = vec![format!("{} IS NOT TRUE", column(invite))];
    for filter in filters.iter().filter(|f| f.column != invite) {
        match filter.value {
            // A null column equals no constant, and the row is no invitation.
            FilterValue::Const(value) => {
                pending.push(format!("COALESCE({} = {}, false)", column(filter.column), constant(value)))
            }
            FilterValue::Claim(claim) if rule.parameters.iter().any(|p| p.source == ParamSource::Claim(claim)) => {
                pending.push(format!("{} IS NOT NULL", column(filter.column)));
            }
            FilterValue::Claim(_) => {}
        }
    }
    for param in rule.parameters {
        if let ParamSource::Membership { column: name } = param.source {
            pending.push(format!("{} IS NOT NULL", column(name)));
        }
    }
    Some(pending.join(" AND "))
}

/// Whether `row` of `table` is a pending invitation of `rule`, a rule with `invite(...)`: a
/// membership row of it that grants nothing yet.
fn is_pending(rule: &RuleMeta, table: &TableMeta, row: &Row) -> bool {
    rule.invited_to(table, row).is_some() && rule.granted_by(table, row).is_none()
}

/// Whether a text anywhere in `value` (a string, or an object's key) holds a NUL character.
pub(super) fn holds_nul(value: &Value) -> bool {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) if text.contains('\0') => return true,
            Value::Array(items) => stack.extend(items),
            Value::Object(fields) => {
                if fields.keys().any(|key| key.contains('\0')) {
                    return true;
                }
                stack.extend(fields.values());
            }
            _ => {}
        }
    }
    false
}

/// How deep `value` nests: 0 for a scalar, 1 for an array or object of scalars.
pub(crate) fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 0)];
    while let Some((value, level)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(fields) => Box::new(fields.values()),
            _ => continue,
        };
        deepest = deepest.max(level + 1);
        stack.extend(children.map(|child| (child, level + 1)));
    }
    deepest
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_nul_anywhere_in_a_value_is_found() {
        for (value, nul) in [
            (json!("a\u{0}b"), true),
            (json!({"a": ["x", {"b": "\u{0}"}]}), true),
            (json!({"a\u{0}": 1}), true),
            (json!({"a": ["x", {"b": "0"}]}), false),
            (json!(0), false),
        ] {
            assert_eq!(holds_nul(&value), nul, "{value}");
        }
    }

    #[test]
    fn depth_counts_nesting() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({"a": 1})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
        let mut deep = json!(0);
        for _ in 0..100 {
            deep = json!([deep]);
        }
        assert_eq!(depth(&deep), 100);
    }
}
