//! Which buckets an actor holds, read from a SQLite file: the claim buckets of rules without a
//! membership from the actor's claims, and for each membership rule the distinct parameters of
//! the live rows of its table that match the actor's claims and the rule's constants. Raw
//! membership SQL is Postgres' (`SqliteStorage` refuses an app that has some).

use std::collections::BTreeSet;

use engine_kernel::rules::buckets::{claim_bucket, claim_text, param_text};
use engine_kernel::rules::{FilterValue, Membership, ParamSource, RuleMeta};
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
            Some(Membership::Table { table, .. }) => {
                let table = app.table(table).expect("the app lists every rule table");
                held.extend(held_through(conn, rule, table, actor).await?);
            }
            Some(Membership::Raw { .. }) => {}
        }
    }
    Ok(held)
}

/// The buckets of `rule` the actor holds through rows of its membership table `table`.
async fn held_through(
    conn: &mut SqliteConnection,
    rule: &'static RuleMeta,
    table: &'static TableMeta,
    actor: &Actor,
) -> Result<BTreeSet<BucketKey>> {
    let Some(Membership::Table { filters, .. }) = rule.membership else { return Ok(BTreeSet::new()) };
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
        let column = table.column(filter.column).expect("rule columns exist");
        let value = match filter.value {
            FilterValue::Claim(claim) => match claim_text(claim, actor) {
                Some(text) => param_value(column, &text),
                // The actor lacks the claim: it holds none of these buckets.
                None => return Ok(BTreeSet::new()),
            },
            FilterValue::Const(value) => value.to_json(),
        };
        sql.push(format_args!(" AND m.{} = ", ident(filter.column))).push_bind(stored(column, &value));
    }
    if let Some(deleted) = table.soft_delete {
        sql.push(format_args!(" AND m.{} IS NULL", ident(deleted)));
    }
    let rows = sql.build().fetch_all(&mut *conn).await?;
    let mut held = BTreeSet::new();
    for row in &rows {
        let mut values = Vec::with_capacity(sourced.len());
        for (i, name) in sourced.iter().enumerate() {
            let column = table.column(name).expect("rule columns exist");
            values.push(param_text(&decode(row, i, column)?));
        }
        held.extend(bucket_of_values(rule, actor, values.into_iter()));
    }
    Ok(held)
}
