//! Tables: the [`Table`] trait `#[engine::table]` implements, and the metadata ([`TableMeta`])
//! that storage, sync rules and the contract read.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::column::{ColumnCodec, ColumnMeta, ColumnType};
use crate::error::{Error, Result};
use crate::value::ColumnValue;

/// Whether `name` is a SQL identifier the engine can use unquoted: lowercase ASCII letters,
/// digits and `_`, not starting with a digit, at most 63 bytes (Postgres' limit). Table and
/// column names must be.
///
/// ```
/// use engine_kernel::table::is_sql_identifier;
/// assert!(is_sql_identifier("list_members") && is_sql_identifier("_x1"));
/// assert!(!is_sql_identifier("Notes") && !is_sql_identifier("1x") && !is_sql_identifier("a-b"));
/// ```
pub fn is_sql_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'_'))
        && bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_'))
        && name.len() <= 63
}

/// The default SQL name of a table: the struct name in snake_case, pluralized by English's
/// regular rule (`Note` → `notes`, `ListMember` → `list_members`, `Category` → `categories`,
/// `Box` → `boxes`). Irregular plurals take `name = "…"`.
///
/// ```
/// use engine_kernel::table::default_table_name;
/// assert_eq!(default_table_name("ListMember"), "list_members");
/// assert_eq!(default_table_name("Category"), "categories");
/// ```
pub fn default_table_name(struct_name: &str) -> String {
    use heck::ToSnakeCase;
    let word = struct_name.to_snake_case();
    let ends_with_consonant_y = word.ends_with('y')
        && word.len() > 1
        && !matches!(word.as_bytes()[word.len() - 2], b'a' | b'e' | b'i' | b'o' | b'u');
    if ends_with_consonant_y {
        format!("{}ies", &word[..word.len() - 1])
    } else if ["s", "x", "z", "ch", "sh"].iter().any(|end| word.ends_with(end)) {
        format!("{word}es")
    } else {
        format!("{word}s")
    }
}

/// A row in its JSON form: SQL column name → value (`docs/protocol.md#row-values`).
pub type Row = Map<String, Value>;

/// How concurrent writes to one row are merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MergePolicy {
    /// Whole-row last-write-wins in server commit order.
    #[default]
    Lww,
    /// Per column: scalar columns ordered by hybrid logical clock, collaborative columns merged.
    Field,
    /// Collaborative columns only, merged structurally.
    Crdt,
}

impl MergePolicy {
    /// The policy's name in the table attribute and the contract.
    pub const fn name(self) -> &'static str {
        match self {
            MergePolicy::Lww => "lww",
            MergePolicy::Field => "field",
            MergePolicy::Crdt => "crdt",
        }
    }
}

/// What the metadata knows of one table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableMeta {
    /// The SQL table name.
    pub name: &'static str,
    /// The Rust struct that declares it.
    pub struct_name: &'static str,
    /// The struct's doc comment.
    pub description: &'static str,
    /// Every column, in declaration order.
    pub columns: &'static [ColumnMeta],
    /// The primary key columns, in key order.
    pub primary_key: &'static [&'static str],
    /// The owner column, holding the actor's owner id.
    pub owner: Option<&'static str>,
    /// The soft-delete column: a non-null value makes the row a tombstone for clients.
    pub soft_delete: Option<&'static str>,
    /// How concurrent writes merge.
    pub merge: MergePolicy,
}

impl TableMeta {
    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&'static ColumnMeta> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Whether `name` is a primary-key column.
    pub fn is_key(&self, name: &str) -> bool {
        self.primary_key.contains(&name)
    }

    /// The collaborative columns.
    pub fn crdt_columns(&self) -> impl Iterator<Item = &'static ColumnMeta> + use<> {
        self.columns.iter().filter(|c| c.sql_type.is_crdt())
    }

    /// The primary key's columns, in key order.
    pub fn key_columns(&self) -> impl Iterator<Item = &'static ColumnMeta> + use<> {
        let columns = self.columns;
        self.primary_key.iter().map(move |k| columns.iter().find(|c| c.name == *k).expect("key columns are columns"))
    }
}

/// The rules every write obeys, in every store: the server's and the client's mutator
/// transactions both check them here, so a mutator fails alike on both sides.
impl TableMeta {
    /// `value` as column `column` of this table holds it: refused when it has the wrong shape
    /// for the column's type, or is null in a non-null column.
    pub fn value(&self, column: &ColumnMeta, value: &Value) -> Result<ColumnValue> {
        if value.is_null() && !column.nullable {
            return Err(Error::validation(format!("column `{}.{}` cannot be null", self.name, column.name)));
        }
        ColumnValue::from_json(column.sql_type, value.clone())
            .map_err(|e| Error::validation(format!("column `{}.{}`: {e}", self.name, column.name)))
    }

    /// The column named `name`, refused when the table has none.
    pub fn known_column(&self, name: &str) -> Result<&'static ColumnMeta> {
        self.column(name).ok_or_else(|| Error::validation(format!("table `{}` has no column `{name}`", self.name)))
    }

    /// An inserted row names only columns of the table.
    pub fn check_insert(&self, row: &Row) -> Result<()> {
        row.keys().try_for_each(|name| self.known_column(name).map(drop))
    }

    /// An update sets only columns of the table, and never a primary-key column. Returns the
    /// columns it sets, each once, in the order first set.
    pub fn check_update(&self, changes: &[(&str, Value)]) -> Result<Vec<&'static ColumnMeta>> {
        let mut columns: Vec<&'static ColumnMeta> = Vec::with_capacity(changes.len());
        for (name, _) in changes {
            let column = self.known_column(name)?;
            if self.is_key(column.name) {
                return Err(Error::validation(format!("the primary key of `{}` cannot change", self.name)));
            }
            if !columns.iter().any(|c| c.name == column.name) {
                columns.push(column);
            }
        }
        Ok(columns)
    }

    /// A read compares only columns of the table, and never a collaborative one (a document's
    /// bytes say nothing about its content).
    pub fn filter_column(&self, name: &str) -> Result<&'static ColumnMeta> {
        let column = self.known_column(name)?;
        if column.sql_type.is_crdt() {
            return Err(Error::validation(format!("collaborative column `{}.{name}` cannot be compared", self.name)));
        }
        Ok(column)
    }

    /// What a write stores in `column`: a collaborative column merges the update `value` into
    /// `stored` (the document so far; none for an insert), never replacing it; any other column
    /// takes `value` as given.
    pub fn written(&self, column: &ColumnMeta, stored: Option<&Value>, value: &Value) -> Result<Value> {
        if column.sql_type.is_crdt() && !value.is_null() {
            crate::crdt::merged_column(column.sql_type, stored, value)
        } else {
            Ok(value.clone())
        }
    }

    /// Whether `row` is live: the table has no soft-delete column, or the row's is null.
    pub fn is_live(&self, row: &Row) -> bool {
        self.soft_delete.is_none_or(|c| row.get(c).is_none_or(Value::is_null))
    }

    /// `row` with its soft-delete column cleared: the row as it was before it was deleted.
    pub fn undeleted(&self, row: &Row) -> Row {
        let mut row = row.clone();
        if let Some(column) = self.soft_delete {
            row.insert(column.to_owned(), Value::Null);
        }
        row
    }

    /// The assignment that soft-deletes a row now, when the table has a soft-delete column.
    pub fn deletion(&self) -> Option<(&'static str, Value)> {
        self.soft_delete.map(|column| (column, chrono::Utc::now().to_json()))
    }
}

/// A table declared with `#[engine::table]`: a Rust struct whose fields are the columns.
///
/// The row's serde form is its JSON row (SQL column names as keys, each value in its column
/// type's JSON form), so the struct serializes exactly as it travels in pulls.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an engine table",
    label = "not declared with `#[engine::table]`",
    note = "add `#[engine::table]` to the definition of `{Self}`"
)]
pub trait Table: serde::Serialize + DeserializeOwned + schemars::JsonSchema + Send + Sync + Sized + 'static {
    /// The table's metadata.
    const META: &'static TableMeta;
    /// The primary key: the key column's type, or a tuple of them for a composite key.
    type Key: Clone + Send + Sync + 'static;

    /// This row's primary key.
    fn key(&self) -> Self::Key;
    /// A primary key as a row of its columns.
    fn key_row(key: &Self::Key) -> Row;
    /// The row in its JSON form.
    fn to_row(&self) -> Row;
    /// The row from its JSON form; missing nullable columns are null, unknown columns ignored.
    fn from_row(row: Row) -> Result<Self>;
}

/// Put a column value into a row (used by generated code).
#[doc(hidden)]
pub fn put_column<V>(row: &mut Row, column: &'static str, codec: &ColumnCodec<V>, value: &V) {
    row.insert(column.to_owned(), codec.to_json(value));
}

/// Take a column value out of a row (used by generated code).
#[doc(hidden)]
pub fn take_column<V>(row: &mut Row, table: &'static str, column: &'static str, codec: &ColumnCodec<V>) -> Result<V> {
    let value = match row.remove(column) {
        Some(value) => value,
        None if codec.nullable => Value::Null,
        None => return Err(Error::validation(format!("row of `{table}` lacks column `{column}`"))),
    };
    codec.from_json(value).map_err(|e| Error::validation(format!("column `{table}.{column}`: {e}")))
}

/// Serialize a table row as its JSON row (used by generated code).
#[doc(hidden)]
pub fn serialize_row<T: Table, S: serde::Serializer>(row: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&row.to_row(), serializer)
}

/// Deserialize a table row from its JSON row (used by generated code).
#[doc(hidden)]
pub fn deserialize_row<'de, T: Table, D: serde::Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    let row = <Row as serde::Deserialize>::deserialize(deserializer)?;
    T::from_row(row).map_err(serde::de::Error::custom)
}

/// The JSON Schema of a table's row (used by generated code).
#[doc(hidden)]
pub fn row_schema(meta: &TableMeta) -> schemars::Schema {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for column in meta.columns {
        let mut schema = column.sql_type.json_schema(column.nullable);
        if !column.description.is_empty() && !column.sql_type.is_crdt() {
            schema.insert("description".into(), column.description.into());
        }
        properties.insert(column.name.to_owned(), schema.to_value());
        if !column.nullable {
            required.push(Value::from(column.name));
        }
    }
    let mut schema = schemars::json_schema!({
        "type": "object",
        "properties": properties,
        "required": required,
    });
    if !meta.description.is_empty() {
        schema.insert("description".into(), meta.description.into());
    }
    schema
}
