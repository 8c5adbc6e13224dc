//! What Postgres' catalog says about the tables of one schema: columns with their types,
//! nullability and defaults, primary keys, unique constraints and foreign keys.

use sqlx::{Connection, PgConnection, Row};

use crate::error::{Error, Result};

/// The prefix of the engine's own tables and columns, which introspection skips.
pub(crate) const ENGINE_PREFIX: &str = "_engine";

/// The tables of one schema, by name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Catalog {
    /// The schema read.
    pub(crate) schema: String,
    /// Its tables, by name.
    pub(crate) tables: Vec<SqlTable>,
}

/// One table as the catalog describes it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SqlTable {
    pub(crate) name: String,
    /// In the table's column order.
    pub(crate) columns: Vec<SqlColumn>,
    /// The primary key's columns, in key order; empty when there is none.
    pub(crate) primary_key: Vec<String>,
    /// Each unique constraint's columns.
    pub(crate) uniques: Vec<Vec<String>>,
    /// The foreign keys to tables of the same schema.
    pub(crate) foreign_keys: Vec<ForeignKey>,
}

/// One column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SqlColumn {
    pub(crate) name: String,
    /// The type as Postgres writes it (`character varying(40)`, `numeric(12,2)`).
    pub(crate) type_text: String,
    /// The name of the type in `pg_type` (`varchar`, `numeric`, `_text`).
    pub(crate) type_name: String,
    /// `pg_type.typtype`: `b` base, `e` enum, `d` domain, `c` composite, `r`/`m` range.
    pub(crate) type_kind: String,
    pub(crate) not_null: bool,
    /// The default expression, if any.
    pub(crate) default: Option<String>,
    /// Computed by the database (`GENERATED ALWAYS AS (…) STORED`).
    pub(crate) generated: bool,
    /// An identity column: `a` (`GENERATED ALWAYS`), `d` (`BY DEFAULT`), or empty.
    pub(crate) identity: String,
}

/// A foreign key: `columns` of this table reference `references` of `table`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ForeignKey {
    pub(crate) columns: Vec<String>,
    pub(crate) table: String,
    pub(crate) references: Vec<String>,
}

impl SqlTable {
    /// The foreign key of the single column `column`, if it has one.
    pub(crate) fn foreign_key_of(&self, column: &str) -> Option<&ForeignKey> {
        self.foreign_keys.iter().find(|fk| fk.columns.len() == 1 && fk.columns[0] == column)
    }
}

const TABLES: &str = "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
 ORDER BY c.relname";

const COLUMNS: &str = "SELECT c.relname::text, a.attname::text, format_type(a.atttypid, a.atttypmod), t.typname::text,
        t.typtype::text, a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attgenerated::text <> '',
        a.attidentity::text
 FROM pg_attribute a
 JOIN pg_class c ON c.oid = a.attrelid
 JOIN pg_namespace n ON n.oid = c.relnamespace
 JOIN pg_type t ON t.oid = a.atttypid
 LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY c.relname, a.attnum";

const CONSTRAINTS: &str = "SELECT c.relname::text, k.contype::text,
        ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS u(num, i)
              JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.num ORDER BY u.i),
        f.relname::text, fn.nspname::text,
        ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY AS u(num, i)
              JOIN pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.num ORDER BY u.i)
 FROM pg_constraint k
 JOIN pg_class c ON c.oid = k.conrelid
 JOIN pg_namespace n ON n.oid = c.relnamespace
 LEFT JOIN pg_class f ON f.oid = k.confrelid
 LEFT JOIN pg_namespace fn ON fn.oid = f.relnamespace
 WHERE n.nspname = $1 AND k.contype IN ('p', 'u', 'f')
 ORDER BY c.relname, k.conname";

/// Read the tables of `schema` at `url` (only those named in `only`, when given), leaving out
/// the engine's own tables and columns.
pub(crate) async fn read(url: &str, schema: &str, only: Option<&[String]>) -> Result<Catalog> {
    let failed = |source: sqlx::Error| Error::Introspect { reason: format!("cannot read schema `{schema}`"), source };
    let mut conn = PgConnection::connect(url)
        .await
        .map_err(|source| Error::Introspect { reason: "cannot connect to the database".into(), source })?;
    let wanted = |name: &str| !name.starts_with(ENGINE_PREFIX) && only.is_none_or(|o| o.iter().any(|t| t == name));
    let mut tables: Vec<SqlTable> = sqlx::query_scalar::<_, String>(TABLES)
        .bind(schema)
        .fetch_all(&mut conn)
        .await
        .map_err(failed)?
        .into_iter()
        .filter(|name| wanted(name))
        .map(|name| SqlTable { name, columns: vec![], primary_key: vec![], uniques: vec![], foreign_keys: vec![] })
        .collect();
    let index = |tables: &[SqlTable], name: &str| tables.iter().position(|t| t.name == name);
    for row in sqlx::query(COLUMNS).bind(schema).fetch_all(&mut conn).await.map_err(failed)? {
        let table: String = row.get(0);
        let name: String = row.get(1);
        let Some(i) = index(&tables, &table) else { continue };
        if name.starts_with(ENGINE_PREFIX) {
            continue;
        }
        tables[i].columns.push(SqlColumn {
            name,
            type_text: row.get(2),
            type_name: row.get(3),
            type_kind: row.get(4),
            not_null: row.get(5),
            default: row.get(6),
            generated: row.get(7),
            identity: row.get(8),
        });
    }
    for row in sqlx::query(CONSTRAINTS).bind(schema).fetch_all(&mut conn).await.map_err(failed)? {
        let table: String = row.get(0);
        let kind: String = row.get(1);
        let columns: Vec<String> = row.get(2);
        let Some(i) = index(&tables, &table) else { continue };
        match kind.as_str() {
            "p" => tables[i].primary_key = columns,
            "u" => tables[i].uniques.push(columns),
            _ => {
                let target: Option<String> = row.get(3);
                let target_schema: Option<String> = row.get(4);
                if let (Some(target), Some(target_schema)) = (target, target_schema)
                    && target_schema == schema
                {
                    tables[i].foreign_keys.push(ForeignKey { columns, table: target, references: row.get(5) });
                }
            }
        }
    }
    conn.close().await.ok();
    Ok(Catalog { schema: schema.to_owned(), tables })
}
