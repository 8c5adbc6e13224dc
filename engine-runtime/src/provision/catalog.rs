//! What the database has, read from its catalog (no lock on any table), and how it differs from
//! what an app declares: drift is a column whose type, nullability or key differs, or a column
//! the app no longer declares that would make its inserts fail.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::{App, ColumnMeta};

use crate::error::{Error, Result};

/// A column as the database has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnInfo {
    /// `format_type` of its type (`text`, `bigint`, `timestamp with time zone`).
    pub(crate) type_name: String,
    pub(crate) not_null: bool,
    pub(crate) has_default: bool,
}

impl ColumnInfo {
    fn describe(&self) -> String {
        format!("{} {}", self.type_name, if self.not_null { "NOT NULL" } else { "NULL" })
    }
}

/// A table as the database has it.
#[derive(Debug, Clone, Default)]
pub(crate) struct TableInfo {
    pub(crate) columns: BTreeMap<String, ColumnInfo>,
    /// The primary key's columns, in order (empty when it has none).
    pub(crate) key: Vec<String>,
    /// Trigger name → whether it fires only under a `WHEN` condition.
    pub(crate) triggers: BTreeMap<String, bool>,
}

/// The tables, indexes and functions of the current schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Catalog {
    pub(crate) tables: BTreeMap<String, TableInfo>,
    /// Index name → whether it is valid (a failed concurrent build leaves an invalid one).
    pub(crate) indexes: BTreeMap<String, bool>,
    /// Function name → its body.
    pub(crate) functions: BTreeMap<String, String>,
    /// Each type name the app uses → how Postgres names it.
    pub(crate) type_names: BTreeMap<String, String>,
}

const SCHEMA: &str = "current_schema()::regnamespace";

impl Catalog {
    /// Read the catalog, with the Postgres names of `app`'s column types.
    pub(crate) async fn read(conn: &mut sqlx::PgConnection, app: &App) -> Result<Catalog> {
        let mut catalog = Catalog::default();
        let tables: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT relname::text FROM pg_class WHERE relnamespace = {SCHEMA} AND relkind IN ('r', 'p')"
        )))
        .fetch_all(&mut *conn)
        .await?;
        for table in tables {
            catalog.tables.insert(table, TableInfo::default());
        }
        let columns: Vec<(String, String, String, bool, bool)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                    a.atthasdef OR a.attidentity <> ''
             FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             WHERE c.relnamespace = {SCHEMA} AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped"
        )))
        .fetch_all(&mut *conn)
        .await?;
        for (table, column, type_name, not_null, has_default) in columns {
            catalog
                .tables
                .entry(table)
                .or_default()
                .columns
                .insert(column, ColumnInfo { type_name, not_null, has_default });
        }
        let keys: Vec<(String, Vec<String>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT c.relname::text, array_agg(a.attname::text ORDER BY k.ord)
             FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
             CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE i.indisprimary AND c.relnamespace = {SCHEMA} GROUP BY c.relname"
        )))
        .fetch_all(&mut *conn)
        .await?;
        for (table, key) in keys {
            catalog.tables.entry(table).or_default().key = key;
        }
        let triggers: Vec<(String, String, bool)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT c.relname::text, t.tgname::text, t.tgqual IS NOT NULL FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
             WHERE NOT t.tgisinternal AND c.relnamespace = {SCHEMA}"
        )))
        .fetch_all(&mut *conn)
        .await?;
        for (table, trigger, conditional) in triggers {
            catalog.tables.entry(table).or_default().triggers.insert(trigger, conditional);
        }
        let indexes: Vec<(String, bool)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT c.relname::text, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
             WHERE c.relnamespace = {SCHEMA}"
        )))
        .fetch_all(&mut *conn)
        .await?;
        catalog.indexes = indexes.into_iter().collect();
        let functions: Vec<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT proname::text, prosrc FROM pg_proc WHERE pronamespace = {SCHEMA}"
        )))
        .fetch_all(&mut *conn)
        .await?;
        catalog.functions = functions.into_iter().collect();
        let types: BTreeSet<&str> =
            app.tables().iter().flat_map(|t| t.meta().columns.iter().map(|c| c.sql_type.postgres())).collect();
        let types: Vec<String> = types.into_iter().map(str::to_owned).collect();
        let names: Vec<(String, String)> =
            sqlx::query_as("SELECT t, format_type(t::regtype, NULL) FROM unnest($1::text[]) AS t")
                .bind(&types)
                .fetch_all(&mut *conn)
                .await?;
        catalog.type_names = names.into_iter().collect();
        Ok(catalog)
    }

    /// How the tables of `app` that exist differ from what it declares, one line each (empty
    /// when they do not). Columns the database lacks are not drift: provisioning adds them.
    pub(crate) fn drift(&self, app: &App) -> Vec<String> {
        drift(&self.tables, app, &Postgres { type_names: &self.type_names })
    }
}

/// A difference between a table and the app, which the engine does not reconcile itself: the
/// backend says how the operator does ([`Dialect::how`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reconcile<'a> {
    /// Make `column` NOT NULL.
    SetNotNull { table: &'a str, column: &'a str },
    /// Let `column` hold null.
    DropNotNull { table: &'a str, column: &'a str },
    /// Give `column` the type `to`.
    Retype { table: &'a str, column: &'a str, to: &'a str },
    /// Give the table another primary key.
    Rekey,
    /// Drop `column`.
    Drop { table: &'a str, column: &'a str },
}

/// What drift reads of a backend: how it names a column's type, and how an operator makes a
/// change the engine does not make. One module per backend implements it (`Postgres` here,
/// `provision/sqlite.rs`), so both refuse the same drift in the same words.
pub(crate) trait Dialect {
    /// The type the database gives `column` as the app declares it.
    fn type_of(&self, column: &ColumnMeta) -> String;
    /// Whether a column the database has as `found` carries a field declared `expected`.
    fn carries(&self, expected: &str, found: &str) -> bool {
        expected == found
    }
    /// How to make `change` (a statement in backticks, or how to go about it), or `None` when
    /// there is nothing to name but doing it.
    fn how(&self, change: Reconcile<'_>) -> Option<String>;
}

/// The Postgres [`Dialect`]: `ALTER TABLE` changes a column in place.
struct Postgres<'a> {
    /// Each type name the app uses → how Postgres names it.
    type_names: &'a BTreeMap<String, String>,
}

impl Dialect for Postgres<'_> {
    fn type_of(&self, column: &ColumnMeta) -> String {
        let postgres = column.sql_type.postgres();
        self.type_names.get(postgres).map_or(postgres, String::as_str).to_owned()
    }

    fn carries(&self, expected: &str, found: &str) -> bool {
        expected == found || carries_text(expected, found)
    }

    fn how(&self, change: Reconcile<'_>) -> Option<String> {
        Some(match change {
            Reconcile::SetNotNull { table, column } => {
                format!("`ALTER TABLE {table} ALTER COLUMN {column} SET NOT NULL`, after filling its nulls")
            }
            Reconcile::DropNotNull { table, column } => {
                format!("`ALTER TABLE {table} ALTER COLUMN {column} DROP NOT NULL`")
            }
            Reconcile::Retype { table, column, to } => {
                format!("`ALTER TABLE {table} ALTER COLUMN {column} TYPE {to} USING …`")
            }
            Reconcile::Rekey => return None,
            Reconcile::Drop { table, column } => format!("`ALTER TABLE {table} DROP COLUMN {column}`"),
        })
    }
}

/// How the tables of `app` among `tables` differ from what it declares, one line each, in the
/// words of `dialect` (empty when they do not). Columns a table lacks are not drift:
/// provisioning adds them.
pub(crate) fn drift(tables: &BTreeMap<String, TableInfo>, app: &App, dialect: &dyn Dialect) -> Vec<String> {
    let how = |change: Reconcile<'_>| dialect.how(change).map(|how| format!(" ({how})")).unwrap_or_default();
    let mut out = Vec::new();
    let mut declared: Vec<_> = app.tables().iter().map(|t| t.meta()).collect();
    declared.sort_by_key(|t| t.name);
    for table in declared {
        let Some(found) = tables.get(table.name) else { continue };
        for column in table.columns {
            let Some(has) = found.columns.get(column.name) else { continue };
            let expected =
                ColumnInfo { type_name: dialect.type_of(column), not_null: !column.nullable, has_default: false };
            let same_type = dialect.carries(&expected.type_name, &has.type_name);
            if same_type && has.not_null == expected.not_null {
                continue;
            }
            let (t, c) = (table.name, column.name);
            let what = if !same_type {
                format!(
                    "the engine does not change a column's type: convert it yourself{} or declare the field with the type the database has",
                    how(Reconcile::Retype { table: t, column: c, to: &expected.type_name })
                )
            } else if expected.not_null {
                format!(
                    "make it NOT NULL{} or declare the field `Option<…>`",
                    how(Reconcile::SetNotNull { table: t, column: c })
                )
            } else {
                format!(
                    "drop NOT NULL{} or declare the field without `Option`",
                    how(Reconcile::DropNotNull { table: t, column: c })
                )
            };
            out.push(format!(
                "table {t}, column {c}: the app declares {}, the database has {}; {what}",
                expected.describe(),
                has.describe()
            ));
        }
        if !found.key.is_empty() && found.key.iter().map(String::as_str).ne(table.primary_key.iter().copied()) {
            out.push(format!(
                "table {}: the app declares primary key ({}), the database has primary key ({}); change the table's key yourself{} or declare the key it has",
                table.name,
                table.primary_key.join(", "),
                found.key.join(", "),
                how(Reconcile::Rekey)
            ));
        }
        for (name, has) in &found.columns {
            let declared = table.columns.iter().any(|c| c.name == name.as_str());
            if !declared && !name.starts_with("_engine_") && has.not_null && !has.has_default {
                out.push(format!(
                    "table {}, column {name}: the app does not declare it, and the database has it {} without a default, so the app's inserts would fail; drop it{}, make it nullable{} or give it a default",
                    table.name,
                    has.describe(),
                    how(Reconcile::Drop { table: table.name, column: name }),
                    how(Reconcile::DropNotNull { table: table.name, column: name }),
                ));
            }
        }
    }
    out
}

/// The error of a database whose tables drifted from the app (`drift`'s lines).
pub(crate) fn drift_error(drift: &[String]) -> Error {
    Error::provision(format!(
        "the database differs from the app (schema drift), and the engine changes no existing column:\n  {}",
        drift.join("\n  ")
    ))
}

/// The error of a `NOT NULL` column without a default that the app adds to a table with rows,
/// which would have no value for it.
///
/// `step` is the statement that would add it, which the error gives with a default to run
/// first; `fresh` is the other way out on this store (an empty database, or the SQLite file
/// moved aside, as a development file such as the notes example's `./engine_notes.db` is).
pub(crate) fn required_on_rows(table: &str, column: &str, step: &str, fresh: &str) -> Error {
    Error::provision(format!(
        "the app adds column {column} to table {table}, NOT NULL, and the table has rows, which would have no value for it: declare the field `Option<…>`; or add the column yourself with a default (`{step} DEFAULT …`) before the app starts; or {fresh}"
    ))
}

/// Whether a column the app declares `text` may be one of the database's other string types
/// (`character varying(n)`, `character(n)`): the engine reads and writes them as strings, and a
/// value past the column's length is refused by the database like any value it does not take.
fn carries_text(expected: &str, found: &str) -> bool {
    expected == "text" && (found.starts_with("character varying") || found.starts_with("character("))
}

/// The body of a `CREATE OR REPLACE FUNCTION` statement: what `pg_proc.prosrc` holds.
pub(crate) fn function_body(sql: &str) -> Option<&str> {
    let start = sql.find(" AS $")? + 4;
    let tag_end = start + sql[start + 1..].find('$')? + 2;
    let tag = &sql[start..tag_end];
    let end = sql.rfind(tag)?;
    (end >= tag_end).then(|| &sql[tag_end..end])
}

#[cfg(test)]
mod tests {
    use super::function_body;

    #[test]
    fn a_function_body_is_what_its_dollar_quotes_hold() {
        assert_eq!(function_body("CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$"), Some(" SELECT 1 "));
        assert_eq!(
            function_body("CREATE FUNCTION f() LANGUAGE plpgsql AS $body$\nBEGIN\nEND\n$body$"),
            Some("\nBEGIN\nEND\n")
        );
        assert_eq!(function_body("CREATE TABLE t (a int)"), None);
    }
}
