//! Which buckets an actor holds, read from a SQLite file: the claim buckets of rules without a
//! membership from the actor's claims, and for each membership rule the distinct parameters of
//! the live rows of its table that match the actor's claims and the rule's constants. Raw
//! membership SQL is Postgres' (`SqliteStorage` refuses an app that has some).

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::rules::buckets::{claim_bucket, claim_text, param_text};
use engine_kernel::rules::{ConstFilter, FilterValue, Membership, ParamSource, RuleMeta};
use engine_kernel::{Actor, App, BucketKey, TableMeta};
use engine_sqlite::values::{decode, stored};
use engine_sqlite::{Sql, ident};
use sqlx::SqliteConnection;

use super::bucket_of_values;
use crate::error::Result;
use crate::rules::selection::sqlite::param_value;

/// Every bucket `actor` holds.
pub(crate) async fn held_buckets(conn: &mut SqliteConnection, app: &App, actor: &Actor) -> Result<BTreeSet<BucketKey>> {
    Ok(held_since(conn, app, actor).await?.0)
}

/// Every bucket `actor` holds; and for each held through rows of a synced membership table, the
/// number of the write of the oldest of them (the actor has held the bucket since, perhaps not
/// before).
pub(crate) async fn held_since(
    conn: &mut SqliteConnection,
    app: &App,
    actor: &Actor,
) -> Result<(BTreeSet<BucketKey>, BTreeMap<BucketKey, u64>)> {
    let mut held = BTreeSet::new();
    let mut since = BTreeMap::new();
    for rule in app.sync_rules().rules {
        match rule.membership {
            None => held.extend(claim_bucket(rule, actor)),
            Some(Membership::Table { .. }) => {
                let Some(rows) = members(conn, app, rule, Some(actor), None, None, true).await? else { continue };
                for (values, written) in rows {
                    let Some(bucket) = bucket_of_values(rule, actor, values.into_iter()) else { continue };
                    if let Some(written) = written {
                        since.insert(bucket.clone(), written);
                    }
                    held.insert(bucket);
                }
            }
            Some(Membership::Raw { .. }) => {}
        }
    }
    Ok((held, since))
}

/// Every bucket of `rule` (a membership rule) `actor` holds through a live membership row
/// matching one of `write` (any row when `None`).
pub(crate) async fn held_through(
    conn: &mut SqliteConnection,
    app: &App,
    rule: &'static RuleMeta,
    actor: &Actor,
    write: Option<&[&[ConstFilter]]>,
) -> Result<BTreeSet<BucketKey>> {
    let Some(rows) = members(conn, app, rule, Some(actor), None, write, false).await? else {
        return Ok(BTreeSet::new());
    };
    Ok(rows.into_iter().filter_map(|(values, _)| bucket_of_values(rule, actor, values.into_iter())).collect())
}

/// Whether `actor` holds `bucket` of `rule` through a live membership row matching one of
/// `write` (any row when `None`).
pub(crate) async fn holds(
    conn: &mut SqliteConnection,
    app: &App,
    rule: &'static RuleMeta,
    actor: &Actor,
    bucket: &BucketKey,
    write: Option<&[&[ConstFilter]]>,
) -> Result<bool> {
    let Some(rows) = members(conn, app, rule, Some(actor), Some(bucket), write, false).await? else {
        return Ok(false);
    };
    Ok(rows.into_iter().any(|(values, _)| bucket_of_values(rule, actor, values.into_iter()).as_ref() == Some(bucket)))
}

/// Whether a live membership row of anyone grants `bucket` of `rule`.
pub(crate) async fn has_member(
    conn: &mut SqliteConnection,
    app: &App,
    rule: &'static RuleMeta,
    bucket: &BucketKey,
) -> Result<bool> {
    Ok(members(conn, app, rule, None, Some(bucket), None, false).await?.is_some_and(|rows| !rows.is_empty()))
}

/// The membership-sourced parameters (as text, in order) of the live rows of `rule`'s membership
/// table that match the claims of `actor` (when given) and the rule's constants, grant `bucket`
/// (when given) and match one of `write` (when given); with `since`, for a synced table, beside
/// them the number of the write of the oldest row of each. `None` when the actor lacks a claim
/// the rule needs, or the rule's memberships are not a table's.
async fn members(
    conn: &mut SqliteConnection,
    app: &App,
    rule: &'static RuleMeta,
    actor: Option<&Actor>,
    bucket: Option<&BucketKey>,
    write: Option<&[&[ConstFilter]]>,
    since: bool,
) -> Result<Option<Vec<Members>>> {
    let Some(Membership::Table { table, filters }) = rule.membership else { return Ok(None) };
    let table: &TableMeta = app.table(table).expect("the app lists every rule table");
    let column = |name: &str| table.column(name).expect("rule columns exist");
    let sourced: Vec<&str> = rule
        .parameters
        .iter()
        .filter_map(|p| match p.source {
            ParamSource::Membership { column } => Some(column),
            ParamSource::Claim(_) => None,
        })
        .collect();
    let since = since && !app.rule_index().selections(table.name).is_empty();
    let parameters = sourced.iter().map(|c| format!("m.{}", ident(c))).collect::<Vec<_>>().join(", ");
    let mut sql = Sql::new(if since { "SELECT " } else { "SELECT DISTINCT " });
    sql.push(&parameters);
    if since {
        sql.push(", min(m._engine_seq)");
    }
    sql.push(format_args!(" FROM {} AS m WHERE 1", ident(table.name)));
    for filter in filters {
        let value = match (filter.value, actor) {
            (FilterValue::Claim(claim), Some(actor)) => match claim_text(claim, actor) {
                Some(text) => param_value(column(filter.column), &text),
                None => return Ok(None),
            },
            (FilterValue::Claim(_), None) => continue,
            (FilterValue::Const(value), _) => value.to_json(),
        };
        sql.push(format_args!(" AND m.{} = ", ident(filter.column))).push_bind(stored(column(filter.column), &value));
    }
    if let Some(bucket) = bucket {
        for (param, text) in rule.parameters.iter().zip(bucket.params()) {
            if let ParamSource::Membership { column: name } = param.source {
                sql.push(format_args!(" AND m.{} = ", ident(name)))
                    .push_bind(stored(column(name), &param_value(column(name), &text)));
            }
        }
    }
    push_live_and_writing(&mut sql, table, write).expect("rule columns exist");
    if since {
        sql.push(format_args!(" GROUP BY {parameters}"));
    }
    let rows = sql.build().fetch_all(&mut *conn).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let mut values = Vec::with_capacity(sourced.len());
        for (i, name) in sourced.iter().enumerate() {
            values.push(param_text(&decode(row, i, column(name))?));
        }
        let written = if since {
            sqlx::Row::try_get::<Option<i64>, _>(row, sourced.len())?.and_then(|n| u64::try_from(n).ok())
        } else {
            None
        };
        out.push((values, written));
    }
    Ok(Some(out))
}

/// The membership-sourced parameters of one row (or group of rows) of a membership table, as
/// text in order, and the number of the write of the oldest when asked.
type Members = (Vec<Option<String>>, Option<u64>);

/// `EXISTS (…)`: [`holds`] as a condition of another statement, evaluated where that statement
/// runs; `None` where it cannot be asked so: the bucket is not one of `rule` the actor can hold
/// (a claim parameter is not the actor's, the actor lacks a claim the rule needs), or a
/// membership parameter's text is not the one its stored value gives back (`01` of an integer
/// column, which a row holding 1 does not grant, though it equals 1 in SQL).
pub(crate) fn push_holds(
    sql: &mut Sql,
    app: &App,
    rule: &'static RuleMeta,
    actor: &Actor,
    bucket: &BucketKey,
    write: Option<&[&[ConstFilter]]>,
) -> Option<()> {
    let Some(Membership::Table { table, filters }) = rule.membership else { return None };
    let table: &TableMeta = app.table(table)?;
    let params = bucket.params();
    if params.len() != rule.parameters.len() {
        return None;
    }
    let mut equal = Vec::new();
    for filter in filters {
        let column = table.column(filter.column)?;
        let value = match filter.value {
            FilterValue::Claim(claim) => param_value(column, &claim_text(claim, actor)?),
            FilterValue::Const(value) => value.to_json(),
        };
        equal.push((column, value));
    }
    for (param, text) in rule.parameters.iter().zip(params) {
        match param.source {
            ParamSource::Claim(claim) => {
                if claim_text(claim, actor).as_deref() != Some(text.as_str()) {
                    return None;
                }
            }
            ParamSource::Membership { column } => {
                let column = table.column(column)?;
                let value = param_value(column, &text);
                if param_text(&value).as_deref() != Some(text.as_str()) {
                    return None;
                }
                equal.push((column, value));
            }
        }
    }
    sql.push(format_args!("EXISTS (SELECT 1 FROM {} AS m WHERE 1", ident(table.name)));
    for (column, value) in &equal {
        sql.push(format_args!(" AND m.{} = ", ident(column.name))).push_bind(stored(column, value));
    }
    push_live_and_writing(sql, table, write)?;
    sql.push(")");
    Some(())
}

/// The conditions on a membership row `m` of `table` that it is live and, with `write`, that it
/// holds one of the alternatives of a `write(...)` (each a set of column values); none for a
/// column `table` lacks.
fn push_live_and_writing(sql: &mut Sql, table: &TableMeta, write: Option<&[&[ConstFilter]]>) -> Option<()> {
    if let Some(deleted) = table.soft_delete {
        sql.push(format_args!(" AND m.{} IS NULL", ident(deleted)));
    }
    if let Some(any_of) = write {
        sql.push(" AND (0");
        for all in any_of {
            sql.push(" OR (1");
            for filter in *all {
                let column = table.column(filter.column)?;
                sql.push(format_args!(" AND m.{} = ", ident(filter.column)))
                    .push_bind(stored(column, &filter.value.to_json()));
            }
            sql.push(")");
        }
        sql.push(")");
    }
    Some(())
}
