//! The SQL text of the local store, built with sqlx's [`QueryBuilder`]: the builder writes every
//! placeholder and binds its value, and a name reaches the text only through [`ident`], which
//! quotes it. The pieces here are those several statements share: a table's column list, the
//! match on its primary key, the `SELECT` of the live rows of its view.
//!
//! A statement without values goes through the builder too, so no SQL text of the store is put
//! together by hand.

use engine_kernel::{ColumnMeta, Row, TableMeta};
use serde_json::Value;

use super::values::{looked_up, stored};

pub(crate) use engine_sqlite::{Sql, ident};

/// The confirmed base table of `table`, quoted.
pub(crate) fn base(table: &str) -> String {
    ident(&format!("_engine_base_{table}"))
}

/// Every column of `table`, quoted, in order: `"a", "b"`.
pub(crate) fn push_columns(sql: &mut Sql, table: &TableMeta) {
    let mut list = sql.separated(", ");
    for column in table.columns {
        list.push(ident(column.name));
    }
}

/// ` WHERE "k1" = ? AND "k2" = ?` over the primary key of `table`, bound to `key`'s values as
/// they are.
pub(crate) fn push_key_match(sql: &mut Sql, table: &TableMeta, key: &Row) {
    sql.push(" WHERE ");
    let mut predicate = sql.separated(" AND ");
    for column in table.key_columns() {
        let value = stored(column, key.get(column.name).unwrap_or(&Value::Null));
        predicate.push(ident(column.name)).push_unseparated(" = ").push_bind_unseparated(value);
    }
}

/// `SELECT` of the live rows of the view of `table` whose columns equal `filter`, in primary-key
/// order. A filter value is compared in the form the store holds ([`looked_up`]).
pub(crate) fn select_live(table: &TableMeta, filter: &[(&ColumnMeta, &Value)], limit: Option<u32>) -> Sql {
    let mut sql = Sql::new("SELECT ");
    push_columns(&mut sql, table);
    sql.push(" FROM ").push(ident(table.name));
    if !filter.is_empty() || table.soft_delete.is_some() {
        sql.push(" WHERE ");
        let mut conditions = sql.separated(" AND ");
        for (column, value) in filter {
            let value = stored(column, &looked_up(table, column, value));
            conditions.push(ident(column.name)).push_unseparated(" = ").push_bind_unseparated(value);
        }
        if let Some(deleted) = table.soft_delete {
            conditions.push(format_args!("{} IS NULL", ident(deleted)));
        }
    }
    sql.push(" ORDER BY ");
    let mut order = sql.separated(", ");
    for key in table.primary_key {
        order.push(ident(key));
    }
    if let Some(limit) = limit {
        sql.push(" LIMIT ").push_bind(i64::from(limit));
    }
    sql
}
