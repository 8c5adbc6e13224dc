//! The selection compiler: the one place where a sync rule's selection becomes SQL. Which rows a
//! bucket holds is decided here for every reader of it: pull, write authorization (did a bucket
//! have rows), the change-tracking triggers (which buckets a row left), membership queries and
//! stats. The same selection evaluated in Rust is [`RuleSelection::bucket_of`]; a property test
//! holds the two to each other.
//!
//! A row is in a bucket of a selection when every scope column equals the bucket's parameter
//! (compared in the column's own type, so its index serves), every column tied to a parameter
//! equals the scope column, every constant filter holds, and the row is live (its soft-delete
//! column is null). Dynamic SQL goes through [`Sql`] (sqlx's `QueryBuilder`): values are bound,
//! never spliced, and no placeholder is numbered by hand.

use engine_kernel::{ColumnMeta, SqlType, TableMeta};

use super::sql::{constant, ident, literal, ordered};
use crate::buckets::{RuleSelection, param_text};
use crate::cursor::RowPosition;

/// A statement being built, with its bound values.
pub(crate) type Sql = sqlx::QueryBuilder<sqlx::Postgres>;

/// Which buckets of a selection's rule a predicate asks about.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Buckets<'a> {
    /// One bucket, by its parameter values in parameter order.
    One(&'a [String]),
    /// Several buckets, each by its parameter values in parameter order.
    Many(&'a [Vec<String>]),
}

/// `alias.column`, quoted.
pub(crate) fn column(alias: &str, name: &str) -> String {
    format!("{alias}.{}", ident(name))
}

/// Bind `value`, a parameter's text form, as a value of `column`'s type: `$n` for text,
/// `$n::text::int8` and the like otherwise. A column compared with it keeps its index.
pub(crate) fn push_as_column(sql: &mut Sql, column: &ColumnMeta, value: String) {
    sql.push_bind(value);
    if column.sql_type != SqlType::Text {
        sql.push(format_args!("::text::{}", column.sql_type.postgres()));
    }
}

/// Bind `values`, parameters' text forms, as an array of `column`'s type.
fn push_array_as_column(sql: &mut Sql, column: &ColumnMeta, values: Vec<String>) {
    sql.push_bind(values).push("::text[]");
    if column.sql_type != SqlType::Text {
        sql.push(format_args!("::{}[]", column.sql_type.postgres()));
    }
}

/// `alias.deleted IS NULL` for a table with a soft-delete column: only live rows are in buckets.
pub(crate) fn live(alias: &str, table: &TableMeta) -> Option<String> {
    table.soft_delete.map(|deleted| format!("{} IS NULL", column(alias, deleted)))
}

/// The conditions of a selection that bind nothing: its constant filters, then its ties.
fn fixed_conditions(alias: &str, selection: &RuleSelection) -> Vec<String> {
    let filters =
        selection.selection.filters.iter().map(|f| format!("{} = {}", column(alias, f.column), constant(f.value)));
    let ties = selection.ties().iter().map(|(c, first)| format!("{} = {}", column(alias, c), column(alias, first)));
    filters.chain(ties).collect()
}

/// The rows of `table` (as `alias`) in `buckets` of `selection`: scope, ties, filters, live.
pub(crate) fn push_selected(
    sql: &mut Sql,
    alias: &str,
    table: &TableMeta,
    selection: &RuleSelection,
    buckets: Buckets<'_>,
) {
    let scope = selection.scope_columns();
    let meta = |name: &str| table.column(name).expect("scope columns are columns");
    match buckets {
        Buckets::One(params) => {
            for (i, (name, value)) in scope.iter().zip(params).enumerate() {
                if i > 0 {
                    sql.push(" AND ");
                }
                sql.push(format_args!("{} = ", column(alias, name)));
                push_as_column(sql, meta(name), value.clone());
            }
        }
        Buckets::Many(params) => match scope {
            [name] => {
                sql.push(format_args!("{} = ANY(", column(alias, name)));
                push_array_as_column(sql, meta(name), params.iter().map(|p| p[0].clone()).collect());
                sql.push(")");
            }
            _ => {
                let columns: Vec<String> = scope.iter().map(|c| column(alias, c)).collect();
                sql.push(format_args!("({}) IN (SELECT ", columns.join(", ")));
                for (i, name) in scope.iter().enumerate() {
                    let cast = match meta(name).sql_type {
                        SqlType::Text => String::new(),
                        other => format!("::{}", other.postgres()),
                    };
                    sql.push(format_args!("{}u.p{i}{cast}", if i > 0 { ", " } else { "" }));
                }
                sql.push(" FROM unnest(");
                for i in 0..scope.len() {
                    if i > 0 {
                        sql.push(", ");
                    }
                    sql.push_bind(params.iter().map(|p| p[i].clone()).collect::<Vec<String>>()).push("::text[]");
                }
                let names: Vec<String> = (0..scope.len()).map(|i| format!("p{i}")).collect();
                sql.push(format_args!(") AS u({}))", names.join(", ")));
            }
        },
    }
    for condition in fixed_conditions(alias, selection).into_iter().chain(live(alias, table)) {
        sql.push(" AND ").push(condition);
    }
}

/// The rows of `table` (as `alias`) in any bucket of `selection`, with the bucket's parameters
/// as text: `(parameters, conditions)`, for `SELECT {parameters} … WHERE {conditions}`.
pub(crate) fn any_bucket(alias: &str, table: &TableMeta, selection: &RuleSelection) -> (String, String) {
    let scope = selection.scope_columns();
    let parameters: Vec<String> = scope.iter().map(|c| format!("{}::text", column(alias, c))).collect();
    let mut conditions: Vec<String> = scope.iter().map(|c| format!("{} IS NOT NULL", column(alias, c))).collect();
    conditions.extend(fixed_conditions(alias, selection));
    conditions.extend(live(alias, table));
    (parameters.join(", "), conditions.join(" AND "))
}

/// The key of the bucket of `selection` that the row `record` (`OLD`, `NEW` in a trigger) is in,
/// or null when it is in none; whether the row is live is asked apart.
pub(crate) fn bucket_key_of(record: &str, selection: &RuleSelection) -> String {
    let scope = selection.scope_columns();
    let mut conditions: Vec<String> = scope.iter().map(|c| format!("{} IS NOT NULL", column(record, c))).collect();
    conditions.extend(fixed_conditions(record, selection));
    let params: Vec<String> = scope.iter().map(|c| format!("{}::text", column(record, c))).collect();
    format!(
        "CASE WHEN {} THEN _engine_bucket_key({}, ARRAY[{}]) END",
        conditions.join(" AND "),
        literal(selection.rule.name),
        params.join(", ")
    )
}

/// `alias._engine_xid, key…`: the change stream's order within a table (transaction id, then the
/// primary key byte-wise).
pub(crate) fn stream_order(alias: &str, table: &TableMeta) -> String {
    let mut parts = vec![format!("{alias}._engine_xid")];
    parts.extend(table.key_columns().map(|c| ordered(alias, c)));
    parts.join(", ")
}

/// Rows of `table` (as `alias`) after `position` in the change stream's order and below
/// `horizon`.
pub(crate) fn push_after(sql: &mut Sql, alias: &str, table: &TableMeta, position: &RowPosition, horizon: u64) {
    let xid = format!("{alias}._engine_xid");
    sql.push(format_args!("{xid} < ")).push_bind(horizon.to_string()).push("::text::xid8 AND ");
    match table.name.cmp(position.table.as_str()) {
        std::cmp::Ordering::Less => {
            sql.push(format_args!("{xid} > ")).push_bind(position.xid.to_string()).push("::text::xid8");
        }
        std::cmp::Ordering::Greater => {
            sql.push(format_args!("{xid} >= ")).push_bind(position.xid.to_string()).push("::text::xid8");
        }
        std::cmp::Ordering::Equal => {
            let mut left = vec![xid];
            left.extend(table.key_columns().map(|c| ordered(alias, c)));
            sql.push(format_args!("({}) > (", left.join(", ")));
            sql.push_bind(position.xid.to_string()).push("::text::xid8");
            for (column, value) in table.key_columns().zip(&position.key) {
                sql.push(", ");
                push_as_column(sql, column, param_text(value).unwrap_or_default());
                if column.sql_type == SqlType::Text {
                    sql.push("::text COLLATE \"C\"");
                }
            }
            sql.push(")");
        }
    }
}

#[cfg(test)]
mod tests;
