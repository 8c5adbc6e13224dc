//! Which buckets an actor holds, read from a SQLite file: the claim buckets of rules without a
//! membership from the actor's claims, and for each membership rule the distinct parameters of
//! the live rows of its table that match the actor's claims and the rule's constants. Raw
//! membership SQL is Postgres' (`SqliteStorage` refuses an app that has some).

use std::collections::BTreeSet;

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
    let mut held = BTreeSet::new();
    for rule in app.sync_rules().rules {
        match rule.membership {
            None => held.extend(claim_bucket(rule, actor)),
            Some(Membership::Table { .. }) => held.extend(held_through(conn, app, rule, actor, None).await?),
            Some(Membership::Raw { .. }) => {}
        }
    }
    Ok(held)
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
    let Some(rows) = members(conn, app, rule, Some(actor), None, write).await? else { return Ok(BTreeSet::new()) };
    Ok(rows.into_iter().filter_map(|values| bucket_of_values(rule, actor, values.into_iter())).collect())
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
    let Some(rows) = members(conn, app, rule, Some(actor), Some(bucket), write).await? else { return Ok(false) };
    Ok(rows.into_iter().any(|values| bucket_of_values(rule, actor, values.into_iter()).as_ref() == Some(bucket)))
}

/// Whether a live membership row of anyone grants `bucket` of `rule`.
pub(crate) async fn has_member(
    conn: &mut SqliteConnection,
    app: &App,
    rule: &'static RuleMeta,
    bucket: &BucketKey,
) -> Result<bool> {
    Ok(members(conn, app, rule, None, Some(bucket), None).await?.is_some_and(|rows| !rows.is_empty()))
}

/// The membership-sourced parameters (as text, in order) of the live rows of `rule`'s membership
/// table that match the claims of `actor` (when given) and the rule's constants, grant `bucket`
/// (when given) and match one of `write` (when given); `None` when the actor lacks a claim the
/// rule needs, or the rule's memberships are not a table's.
async fn members(
    conn: &mut SqliteConnection,
    app: &App,
    rule: &'static RuleMeta,
    actor: Option<&Actor>,
    bucket: Option<&BucketKey>,
    write: Option<&[&[ConstFilter]]>,
) -> Result<Option<Vec<Vec<Option<String>>>>> {
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
    let mut sql = Sql::new("SELECT DISTINCT ");
    sql.push(sourced.iter().map(|c| format!("m.{}", ident(c))).collect::<Vec<_>>().join(", "));
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
    if let Some(deleted) = table.soft_delete {
        sql.push(format_args!(" AND m.{} IS NULL", ident(deleted)));
    }
    if let Some(any_of) = write {
        sql.push(" AND (0");
        for all in any_of {
            sql.push(" OR (1");
            for filter in *all {
                let value = stored(column(filter.column), &filter.value.to_json());
                sql.push(format_args!(" AND m.{} = ", ident(filter.column))).push_bind(value);
            }
            sql.push(")");
        }
        sql.push(")");
    }
    let rows = sql.build().fetch_all(&mut *conn).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let mut values = Vec::with_capacity(sourced.len());
        for (i, name) in sourced.iter().enumerate() {
            values.push(param_text(&decode(row, i, column(name))?));
        }
        out.push(values);
    }
    Ok(Some(out))
}
