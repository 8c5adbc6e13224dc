//! From the catalog to an app: which tables and columns the engine can carry and in which Rust
//! types, and the guesses (owner and soft-delete columns, memberships) a starter app is built on.
//! Every guess keeps the reason it was made, for the generated source to say.

use engine_kernel::SqlType;
use engine_kernel::table::{default_table_name, is_sql_identifier};
use heck::ToUpperCamelCase;

use super::catalog::{Catalog, SqlColumn, SqlTable};

/// The Rust type of a non-null value of `sql_type`.
pub(crate) const fn rust_type(sql_type: SqlType) -> &'static str {
    match sql_type {
        SqlType::Text => "String",
        SqlType::SmallInt => "i16",
        SqlType::Integer => "i32",
        SqlType::BigInt => "i64",
        SqlType::Real => "f32",
        SqlType::Double => "f64",
        SqlType::Boolean => "bool",
        SqlType::Uuid => "uuid::Uuid",
        SqlType::Timestamp => "Timestamp",
        SqlType::Json => "serde_json::Value",
        SqlType::Bytes => "Vec<u8>",
        SqlType::CrdtText => "engine::CrdtText",
        SqlType::CrdtMap => "engine::CrdtMap",
    }
}

/// Whether a primary key may have this type.
const fn is_key(sql_type: SqlType) -> bool {
    match sql_type {
        SqlType::Text
        | SqlType::SmallInt
        | SqlType::Integer
        | SqlType::BigInt
        | SqlType::Uuid
        | SqlType::Timestamp
        | SqlType::Bytes => true,
        SqlType::Real | SqlType::Double | SqlType::Boolean | SqlType::Json | SqlType::CrdtText | SqlType::CrdtMap => {
            false
        }
    }
}

/// Whether a bucket parameter may have this type.
const fn is_param(sql_type: SqlType) -> bool {
    match sql_type {
        SqlType::Text | SqlType::SmallInt | SqlType::Integer | SqlType::BigInt | SqlType::Boolean | SqlType::Uuid => {
            true
        }
        SqlType::Real
        | SqlType::Double
        | SqlType::Timestamp
        | SqlType::Json
        | SqlType::Bytes
        | SqlType::CrdtText
        | SqlType::CrdtMap => false,
    }
}

/// The engine's type for `column`, or why it has none.
fn kind_of(column: &SqlColumn) -> Result<SqlType, String> {
    let carried = "the engine carries text, varchar, smallint, integer, bigint, real, double precision, boolean, uuid, timestamptz, jsonb and bytea";
    match column.type_kind.as_str() {
        "b" => {}
        "e" => {
            return Err(format!(
                "an enum type; {carried} (a text column with a check constraint carries the same values)"
            ));
        }
        "d" => return Err(format!("a domain type; {carried}")),
        "c" => return Err(format!("a composite type; {carried}")),
        _ => return Err(format!("a range type; {carried}")),
    }
    Ok(match column.type_name.as_str() {
        "text" | "varchar" => SqlType::Text,
        "int2" => SqlType::SmallInt,
        "int4" => SqlType::Integer,
        "int8" => SqlType::BigInt,
        "float4" => SqlType::Real,
        "float8" => SqlType::Double,
        "bool" => SqlType::Boolean,
        "uuid" => SqlType::Uuid,
        "timestamptz" => SqlType::Timestamp,
        "jsonb" => SqlType::Json,
        "bytea" => SqlType::Bytes,
        "timestamp" => return Err("a timestamp without time zone; the engine carries `timestamptz`".into()),
        "json" => return Err("`json`; the engine carries `jsonb`".into()),
        "numeric" => return Err(format!("exact decimals; {carried} (integers of the smallest unit carry money)")),
        name if name.starts_with('_') => return Err(format!("an array; {carried}")),
        _ => return Err(carried.into()),
    })
}

/// The starter app read from a catalog.
#[derive(Debug)]
pub(crate) struct Model {
    pub(crate) schema: String,
    /// The tables the app carries, in the catalog's order.
    pub(crate) tables: Vec<Table>,
    /// Tables left out, with the reason.
    pub(crate) skipped: Vec<(String, String)>,
    /// The per-owner bucket's tables (indexes into `tables`), empty when no owner column exists.
    pub(crate) own: Vec<usize>,
    /// The membership buckets.
    pub(crate) memberships: Vec<MembershipBucket>,
}

/// One table of the app.
#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) sql: SqlTable,
    pub(crate) struct_name: String,
    /// Whether `name = "…"` must say the SQL name (it is not the struct's default).
    pub(crate) needs_name: bool,
    pub(crate) fields: Vec<Field>,
    /// Columns left out, with the reason.
    pub(crate) left_out: Vec<LeftOut>,
}

/// One carried column.
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) column: SqlColumn,
    /// The Rust identifier as written (`r#type` for a keyword).
    pub(crate) ident: String,
    /// Whether `rename = "…"` must say the SQL name.
    pub(crate) rename: bool,
    pub(crate) kind: SqlType,
    pub(crate) primary_key: bool,
    pub(crate) owner: bool,
    pub(crate) soft_delete: bool,
    /// Why a role was or was not chosen.
    pub(crate) notes: Vec<String>,
}

impl Field {
    /// The Rust type, `Option<…>` when the column may be null.
    pub(crate) fn rust_type(&self) -> String {
        if self.column.not_null { rust_type(self.kind).to_owned() } else { format!("Option<{}>", rust_type(self.kind)) }
    }
}

/// A column the app does not carry.
#[derive(Debug)]
pub(crate) struct LeftOut {
    pub(crate) column: SqlColumn,
    pub(crate) reason: String,
}

/// A bucket per row of a table the actor is a member of: its parameter comes from the
/// membership table's foreign key, its data are the rows referencing the same row.
#[derive(Debug)]
pub(crate) struct MembershipBucket {
    pub(crate) struct_name: String,
    /// The membership table (index into `tables`) and its user and foreign-key fields.
    pub(crate) table: usize,
    pub(crate) user_field: usize,
    pub(crate) key_field: usize,
    /// The table a membership grants (index into `tables`).
    pub(crate) target: usize,
    pub(crate) param: String,
    pub(crate) param_kind: SqlType,
    /// Every selection: table index and field index, the target's own row first.
    pub(crate) data: Vec<(usize, usize)>,
    /// Why the membership table was taken for one.
    pub(crate) reason: String,
}

impl Model {
    /// The indexes of the tables no bucket selects.
    pub(crate) fn unscoped(&self) -> Vec<usize> {
        (0..self.tables.len())
            .filter(|i| !self.own.contains(i) && !self.memberships.iter().any(|m| m.data.iter().any(|(t, _)| t == i)))
            .collect()
    }

    /// The table named `name`.
    fn table(&self, name: &str) -> Option<usize> {
        self.tables.iter().position(|t| t.sql.name == name)
    }

    pub(crate) fn uses(&self, kind: SqlType) -> bool {
        self.tables.iter().flat_map(|t| &t.fields).any(|f| f.kind == kind)
    }
}

/// The starter app for `catalog`.
pub(crate) fn model(catalog: &Catalog) -> Model {
    let mut model =
        Model { schema: catalog.schema.clone(), tables: vec![], skipped: vec![], own: vec![], memberships: vec![] };
    let mut taken: Vec<String> = RESERVED_STRUCTS.iter().map(|s| (*s).to_owned()).collect();
    for sql in &catalog.tables {
        match table(sql, &mut taken) {
            Ok(table) => model.tables.push(table),
            Err(reason) => model.skipped.push((sql.name.clone(), reason)),
        }
    }
    model.own = (0..model.tables.len()).filter(|&i| model.tables[i].fields.iter().any(|f| f.owner)).collect();
    for i in 0..model.tables.len() {
        if let Some(bucket) = membership(&model, i)
            && !model.memberships.iter().any(|m| m.struct_name == bucket.struct_name)
        {
            model.memberships.push(bucket);
        }
    }
    model
}

/// Names a table struct may not take: the types and buckets the generated source names.
const RESERVED_STRUCTS: &[&str] =
    &["Option", "String", "Vec", "Box", "Result", "Timestamp", "Value", "Own", "App", "Self"];

/// The table `sql` as the app carries it, or why it cannot.
fn table(sql: &SqlTable, taken: &mut Vec<String>) -> Result<Table, String> {
    if !is_sql_identifier(&sql.name) {
        return Err("its name is not a lowercase SQL identifier, which the engine requires of table names".into());
    }
    if sql.primary_key.is_empty() {
        return Err("it has no primary key, and the engine identifies every row by one".into());
    }
    let mut fields = vec![];
    let mut left_out = vec![];
    for column in &sql.columns {
        let primary_key = sql.primary_key.contains(&column.name);
        let kind = if !is_sql_identifier(&column.name) {
            Err("its name is not a lowercase SQL identifier, which the engine requires of column names".to_owned())
        } else if column.generated {
            Err("the database computes it, and the engine writes every column it carries".to_owned())
        } else if column.identity == "a" && !primary_key {
            Err("the database numbers it (`GENERATED ALWAYS AS IDENTITY`) and refuses values written to it".to_owned())
        } else {
            kind_of(column)
        };
        let kind = match kind {
            Ok(kind) if primary_key && !is_key(kind) => {
                return Err(format!(
                    "its primary key column `{}` is `{}`, which cannot key a row (keys are text, integers, uuid, timestamptz or bytea)",
                    column.name, column.type_text
                ));
            }
            Ok(kind) => kind,
            Err(reason) if primary_key => {
                return Err(format!("its primary key column `{}` is `{}`: {reason}", column.name, column.type_text));
            }
            Err(reason) => {
                left_out.push(LeftOut { column: column.clone(), reason });
                continue;
            }
        };
        let (ident, rename) = field_ident(&column.name);
        fields.push(Field {
            column: column.clone(),
            ident,
            rename,
            kind,
            primary_key,
            owner: false,
            soft_delete: false,
            notes: numbering_notes(column, primary_key),
        });
    }
    guess_owner(&mut fields);
    guess_soft_delete(&mut fields);
    let singular = singular(&sql.name);
    let mut struct_name = singular.to_upper_camel_case();
    while taken.contains(&struct_name) || struct_name.starts_with("MemberOf") {
        struct_name.push_str("Row");
    }
    taken.push(struct_name.clone());
    let needs_name = default_table_name(&struct_name) != sql.name;
    Ok(Table { sql: sql.clone(), struct_name, needs_name, fields, left_out })
}

/// What a column numbered by the database means for rows inserted through the engine, which
/// writes every column it carries.
fn numbering_notes(column: &SqlColumn, primary_key: bool) -> Vec<String> {
    let sequence = column.default.as_deref().is_some_and(|d| d.starts_with("nextval("));
    if column.identity == "a" && primary_key {
        vec!["The database numbers it (`GENERATED ALWAYS AS IDENTITY`) and refuses the values the engine writes: inserts through the engine need it `GENERATED BY DEFAULT`, with ids that cannot collide with the database's (a uuid column is simpler).".into()]
    } else if sequence || column.identity == "d" {
        vec!["The database numbers rows inserted by SQL; rows inserted through the engine carry the value their mutator gives them, which must not collide with the database's numbers.".into()]
    } else {
        vec![]
    }
}

/// The owner column: named `owner_id` or `owner`, of type text.
fn guess_owner(fields: &mut [Field]) {
    let Some(field) = fields.iter_mut().find(|f| matches!(f.column.name.as_str(), "owner_id" | "owner")) else {
        return;
    };
    if field.kind == SqlType::Text {
        field.owner = true;
        field.notes.push(format!(
            "Owner column (a guess: named `{}` and of type text): the engine fills it with the actor's owner id on insert, and the `own` bucket syncs the actor's rows by it.",
            field.column.name
        ));
    } else {
        field.notes.push(format!(
            "Named like an owner column, but the engine's owner column is text and this one is `{}`: kept as a plain column.",
            field.column.type_text
        ));
    }
}

/// The soft-delete column: `deleted_at`, a nullable timestamptz.
fn guess_soft_delete(fields: &mut [Field]) {
    let Some(field) = fields.iter_mut().find(|f| f.column.name == "deleted_at") else { return };
    if field.kind == SqlType::Timestamp && !field.column.not_null && !field.primary_key {
        field.soft_delete = true;
        field.notes.push(
            "Soft-delete column (a guess: named `deleted_at`, a nullable timestamptz): a delete sets it, and a row with it set leaves its buckets.".into(),
        );
    } else {
        field.notes.push(format!(
            "Named like a soft-delete column, but that is a nullable timestamptz and this one is `{}`{}: kept as a plain column.",
            field.column.type_text,
            if field.column.not_null { " not null" } else { "" }
        ));
    }
}

/// Whether a column names a user: `user_id`, `member_id`, `account_id` or `…_user_id`, of type text.
fn is_user_column(field: &Field) -> bool {
    let name = field.column.name.as_str();
    field.kind == SqlType::Text
        && (matches!(name, "user_id" | "member_id" | "account_id") || name.ends_with("_user_id"))
}

/// The membership bucket of table `i`, when it looks like a membership: its primary key or a
/// unique constraint is exactly a user column and a column with a foreign key to another table.
fn membership(model: &Model, i: usize) -> Option<MembershipBucket> {
    let table = &model.tables[i];
    let field_index = |name: &str| table.fields.iter().position(|f| f.column.name == name);
    let keys = std::iter::once(&table.sql.primary_key).chain(&table.sql.uniques).filter(|k| k.len() == 2);
    for key in keys {
        for (user, other) in [(&key[0], &key[1]), (&key[1], &key[0])] {
            let (Some(user_field), Some(key_field)) = (field_index(user), field_index(other)) else { continue };
            if !is_user_column(&table.fields[user_field]) || is_user_column(&table.fields[key_field]) {
                continue;
            }
            let Some(fk) = table.sql.foreign_key_of(other) else { continue };
            let Some(target) = model.table(&fk.table) else { continue };
            let target_table = &model.tables[target];
            let Some(target_field) = target_table.fields.iter().position(|f| f.column.name == fk.references[0]) else {
                continue;
            };
            let param_kind = table.fields[key_field].kind;
            if target == i || !is_param(param_kind) || target_table.fields[target_field].kind != param_kind {
                continue;
            }
            let mut data = vec![(target, target_field)];
            for (x, other_table) in model.tables.iter().enumerate() {
                let scoped = other_table.sql.foreign_keys.iter().find_map(|fk| {
                    let references = fk.columns.len() == 1
                        && fk.table == target_table.sql.name
                        && fk.references[0] == target_table.fields[target_field].column.name;
                    let field = other_table.fields.iter().position(|f| f.column.name == fk.columns[0])?;
                    (references && other_table.fields[field].kind == param_kind).then_some(field)
                });
                if let Some(field) = scoped
                    && x != target
                {
                    data.push((x, field));
                }
            }
            let unique = if *key == table.sql.primary_key { "primary key" } else { "unique constraint" };
            let reason = format!(
                "`{}` looks like a membership: its {unique} is (`{}`, `{}`), `{user}` names a user and `{other}` references `{}.{}`",
                table.sql.name, key[0], key[1], target_table.sql.name, fk.references[0]
            );
            let param = table.fields[key_field].ident.clone();
            return Some(MembershipBucket {
                struct_name: format!("MemberOf{}", target_table.struct_name),
                table: i,
                user_field,
                key_field,
                target,
                param,
                param_kind,
                data,
                reason,
            });
        }
    }
    None
}

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "else", "enum", "extern", "false", "fn", "for", "if", "impl", "in", "let",
    "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait", "true", "type",
    "unsafe", "use", "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// The Rust field for column `name` and whether it needs `rename`.
fn field_ident(name: &str) -> (String, bool) {
    if matches!(name, "self" | "super" | "crate" | "_") {
        (format!("{name}_"), true)
    } else if KEYWORDS.contains(&name) {
        (format!("r#{name}"), false)
    } else {
        (name.to_owned(), false)
    }
}

/// A table name's singular by English's regular rule, the inverse of [`default_table_name`]
/// for most names.
fn singular(name: &str) -> String {
    if let Some(stem) = name.strip_suffix("ies") {
        format!("{stem}y")
    } else if ["sses", "ches", "shes", "xes", "zes", "uses"].iter().any(|end| name.ends_with(end)) {
        name[..name.len() - 2].to_owned()
    } else if name.ends_with('s') && !name.ends_with("ss") {
        name[..name.len() - 1].to_owned()
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn singular_names_pluralize_back() {
        for table in ["notes", "list_members", "categories", "boxes", "statuses", "matches", "houses", "task_labels"] {
            assert_eq!(default_table_name(&singular(table).to_upper_camel_case()), table, "{table}");
        }
        assert_eq!(singular("people"), "people");
        assert_eq!(default_table_name("People"), "peoples", "an irregular plural needs `name`");
    }

    #[test]
    fn keywords_become_raw_identifiers() {
        assert_eq!(field_ident("type"), ("r#type".to_owned(), false));
        assert_eq!(field_ident("self"), ("self_".to_owned(), true));
        assert_eq!(field_ident("title"), ("title".to_owned(), false));
    }
}
