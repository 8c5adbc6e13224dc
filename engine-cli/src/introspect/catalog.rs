//! What Postgres' catalog says about the tables of one schema: columns with their types,
//! nullability and defaults, primary keys, unique constraints and foreign keys.
//!
//! Every string read from the catalog is escaped as it is read ([`escaped`]), so the model, the
//! generated source, the report and the errors only ever hold it escaped. The generated source
//! quotes catalog text in `//` and `///` comments and inside backticks; a column default holding
//! a newline would end its comment there and write the rest as code.

use sqlx::{Connection, PgConnection, Row};

use crate::error::{Error, Result};

/// The prefix of the engine's own tables and columns, which introspection skips.
pub(crate) const ENGINE_PREFIX: &str = "_engine";

/// `text` from the catalog as generated source may quote it in a comment and inside backticks:
/// control characters (a newline ends a comment), Unicode's line and paragraph separators,
/// bidirectional controls (rustc refuses them in comments) and backticks (which end a code span
/// of a doc comment) are written as Rust escapes (`\u{a}`, `\u{60}`). Other text is kept as it is.
pub(crate) fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let unsafe_in_comment = c.is_control()
            || matches!(c, '`' | '\u{2028}' | '\u{2029}' | '\u{061c}' | '\u{200e}' | '\u{200f}')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
        if unsafe_in_comment {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// The tables of one schema, by name. Every string in it is [`escaped`].
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
        .map(|name| SqlTable {
            name: escaped(&name),
            columns: vec![],
            primary_key: vec![],
            uniques: vec![],
            foreign_keys: vec![],
        })
        .collect();
    // Names are compared escaped, as the tables hold them.
    let index = |tables: &[SqlTable], name: &str| tables.iter().position(|t| t.name == escaped(name));
    let all_escaped = |names: Vec<String>| names.iter().map(|n| escaped(n)).collect::<Vec<_>>();
    for row in sqlx::query(COLUMNS).bind(schema).fetch_all(&mut conn).await.map_err(failed)? {
        let table: String = row.get(0);
        let name: String = row.get(1);
        let Some(i) = index(&tables, &table) else { continue };
        if name.starts_with(ENGINE_PREFIX) {
            continue;
        }
        let text = |i: usize| escaped(&row.get::<String, _>(i));
        tables[i].columns.push(SqlColumn {
            name: escaped(&name),
            type_text: text(2),
            type_name: text(3),
            type_kind: text(4),
            not_null: row.get(5),
            default: row.get::<Option<String>, _>(6).as_deref().map(escaped),
            generated: row.get(7),
            identity: text(8),
        });
    }
    for row in sqlx::query(CONSTRAINTS).bind(schema).fetch_all(&mut conn).await.map_err(failed)? {
        let table: String = row.get(0);
        let kind: String = row.get(1);
        let columns = all_escaped(row.get(2));
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
                    let references = all_escaped(row.get(5));
                    tables[i].foreign_keys.push(ForeignKey { columns, table: escaped(&target), references });
                }
            }
        }
    }
    conn.close().await.ok();
    Ok(Catalog { schema: escaped(schema), tables })
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn what_could_leave_a_comment_or_a_code_span_is_escaped() {
        assert_eq!(escaped("now()"), "now()");
        assert_eq!(escaped("'a\n`b'"), "'a\\u{a}\\u{60}b'");
        assert_eq!(escaped("x\r\u{202e}\u{2028}y\u{0}"), "x\\u{d}\\u{202e}\\u{2028}y\\u{0}");
        assert_eq!(escaped("café ✓"), "café ✓", "other text is kept");
    }
}
