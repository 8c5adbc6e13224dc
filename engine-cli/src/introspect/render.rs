//! The Rust source of a [`Model`]: tables, starter sync rules, the app, and example mutators
//! left commented out. Every guess is said in a comment next to what it chose.

use std::fmt::Write as _;

use heck::ToSnakeCase;

use engine_kernel::SqlType;

use super::model::{Field, Model, Table, rust_type};

/// The source of `model`'s app, formatted as rustfmt would leave it for the common cases.
pub(crate) fn render(model: &Model) -> String {
    let mut out = String::new();
    header(model, &mut out);
    for table in &model.tables {
        table_source(table, &mut out);
    }
    rules(model, &mut out);
    app(model, &mut out);
    mutators(model, &mut out);
    out
}

/// Backticked `name`.
fn code(name: &str) -> String {
    format!("`{name}`")
}

fn header(model: &Model, out: &mut String) {
    let names: Vec<String> = model.tables.iter().map(|t| code(&t.sql.name)).collect();
    let _ = writeln!(out, "//! The app's model, read from schema `{}` by `engine introspect`.", model.schema);
    out.push_str("//!\n");
    let _ = writeln!(out, "//! - Tables: {}.", names.join(", "));
    let rule_names: Vec<String> = model
        .own
        .first()
        .map(|_| "`own`".to_owned())
        .into_iter()
        .chain(model.memberships.iter().map(|m| code(&m.struct_name.to_snake_case())))
        .collect();
    if rule_names.is_empty() {
        out.push_str("//! - Sync rules: none could be guessed; see the end of this file.\n");
    } else {
        let _ = writeln!(out, "//! - Sync rules ([`rules`]): {}; every guess is commented.", rule_names.join(", "));
    }
    out.push_str("//! - Mutators: none yet; an example per table is commented out at the end of this file.\n");
    let left_out: Vec<String> = model
        .tables
        .iter()
        .flat_map(|t| {
            t.left_out
                .iter()
                .map(move |l| format!("column `{}.{}` (`{}`)", t.sql.name, l.column.name, l.column.type_text))
        })
        .chain(model.skipped.iter().map(|(name, _)| format!("table `{name}`")))
        .collect();
    if !left_out.is_empty() {
        let _ = writeln!(out, "//! - Left out, the reasons next to where they would be: {}.", left_out.join(", "));
    }
    let mut crates = vec!["`engine`".to_owned()];
    if model.uses(SqlType::Uuid) {
        crates.push("`uuid` (uuid columns)".into());
    }
    if model.uses(SqlType::Json) {
        crates.push("`serde_json` (jsonb columns)".into());
    }
    let _ = writeln!(out, "//!\n//! The crate depends on {}.", crates.join(", "));
    if model.uses(SqlType::Timestamp) {
        out.push_str("\nuse engine::Timestamp;\n");
    }
    for (name, reason) in &model.skipped {
        let _ = writeln!(out, "\n// Table `{name}` is left out: {reason}.");
    }
}

/// The doc line of a field: its SQL definition.
fn column_doc(table: &Table, field: &Field) -> String {
    let column = &field.column;
    let mut doc = format!("`{} {}`", column.name, column.type_text);
    if column.not_null {
        doc.push_str(" not null");
    }
    if let Some(default) = &column.default {
        let _ = write!(doc, ", default `{default}`");
    }
    if field.primary_key {
        doc.push_str(if table.sql.primary_key.len() > 1 { ", part of the primary key" } else { ", the primary key" });
    }
    if let Some(fk) = table.sql.foreign_key_of(&column.name) {
        let _ = write!(doc, ", references `{}.{}`", fk.table, fk.references[0]);
    }
    doc.push('.');
    doc
}

fn table_source(table: &Table, out: &mut String) {
    let _ = writeln!(out, "\n/// Table `{}`.", table.sql.name);
    if table.needs_name {
        let _ = writeln!(out, "#[engine::table(name = \"{}\")]", table.sql.name);
    } else {
        out.push_str("#[engine::table]\n");
    }
    out.push_str("#[derive(Debug, Clone, PartialEq)]\n");
    let _ = writeln!(out, "pub struct {} {{", table.struct_name);
    for field in &table.fields {
        let _ = writeln!(out, "    /// {}", column_doc(table, field));
        for note in &field.notes {
            let _ = writeln!(out, "    ///\n    /// {note}");
        }
        let mut attrs = vec![];
        if field.primary_key {
            attrs.push("primary_key".to_owned());
        }
        if field.owner {
            attrs.push("owner".to_owned());
        }
        if field.soft_delete {
            attrs.push("soft_delete".to_owned());
        }
        if field.rename {
            attrs.push(format!("rename = \"{}\"", field.column.name));
        }
        if !attrs.is_empty() {
            let _ = writeln!(out, "    #[engine({})]", attrs.join(", "));
        }
        let _ = writeln!(out, "    pub {}: {},", field.ident, field.rust_type());
    }
    for left in &table.left_out {
        let column = &left.column;
        let _ = writeln!(out, "    // Left out: `{} {}`: {}.", column.name, column.type_text, left.reason);
        if column.not_null && column.default.is_none() && column.identity.is_empty() && !column.generated {
            out.push_str(
                "    // It is not null and has no default, so inserts through the engine fail until it has one.\n",
            );
        }
    }
    out.push_str("}\n");
}

fn rules(model: &Model, out: &mut String) {
    let unscoped = model.unscoped();
    if model.own.is_empty() && model.memberships.is_empty() {
        out.push_str(
            "\n// No sync rule could be guessed: no table has an owner column (`owner_id`, text) and none looks\n",
        );
        out.push_str("// like a membership (a user column and a foreign key as its primary key or a unique pair).\n");
        out.push_str("// Until the app has `#[engine::sync_rules]`, no table is synced; the server keeps them.\n");
        return;
    }
    let mut used: Vec<&str> = model.own.iter().map(|&i| model.tables[i].struct_name.as_str()).collect();
    for bucket in &model.memberships {
        used.push(&model.tables[bucket.table].struct_name);
        used.extend(bucket.data.iter().map(|&(t, _)| model.tables[t].struct_name.as_str()));
    }
    let mut used: Vec<&str> =
        model.tables.iter().map(|t| t.struct_name.as_str()).filter(|n| used.contains(n)).collect();
    used.sort_unstable();
    out.push_str("\n/// Who sees what: a first guess from the schema's keys. Read every comment before serving it.\n");
    out.push_str("#[engine::sync_rules]\npub mod rules {\n");
    let _ = writeln!(
        out,
        "    use super::{};",
        if used.len() == 1 { used[0].to_owned() } else { format!("{{{}}}", used.join(", ")) }
    );
    if !model.own.is_empty() {
        let owners: Vec<String> = model
            .own
            .iter()
            .map(|&i| {
                let t = &model.tables[i];
                let owner = t.fields.iter().find(|f| f.owner).map(|f| f.column.name.as_str()).unwrap_or_default();
                code(&format!("{}.{owner}", t.sql.name))
            })
            .collect();
        out.push_str("\n    /// Everything the actor owns.\n    ///\n");
        let _ = writeln!(out, "    /// A guess from the owner columns {}.", owners.join(", "));
        out.push_str("    #[bucket(data(\n");
        for &i in &model.own {
            let t = &model.tables[i];
            let owner = t.fields.iter().find(|f| f.owner).map(|f| f.ident.as_str()).unwrap_or_default();
            let _ = writeln!(out, "        {}::{owner} == bucket.owner_id,", t.struct_name);
        }
        out.push_str("    ))]\n    #[derive(Debug, Clone, PartialEq, Eq, Hash)]\n    pub struct Own {\n");
        out.push_str("        /// The actor's owner id.\n        #[param(actor.owner_id)]\n        pub owner_id: String,\n    }\n");
    }
    for bucket in &model.memberships {
        let table = &model.tables[bucket.table];
        let target = &model.tables[bucket.target];
        let user = &table.fields[bucket.user_field];
        let key = &table.fields[bucket.key_field];
        let _ = writeln!(
            out,
            "\n    /// Every `{}` row the actor is a member of, with the rows that reference it.",
            target.sql.name
        );
        let _ = writeln!(out, "    ///\n    /// A guess: {}.", bucket.reason);
        out.push_str("    /// The data are the rows of every table with a foreign key to the same row; a table that\n");
        out.push_str("    /// reaches it only through another table is not here (see the end of this module).\n");
        let _ = writeln!(
            out,
            "    #[bucket(\n        membership({}::{} == actor.user_id),\n        data(",
            table.struct_name, user.ident
        );
        for &(t, f) in &bucket.data {
            let selected = &model.tables[t];
            let _ = writeln!(
                out,
                "            {}::{} == bucket.{},",
                selected.struct_name, selected.fields[f].ident, bucket.param
            );
        }
        out.push_str("        ),\n    )]\n    #[derive(Debug, Clone, PartialEq, Eq, Hash)]\n");
        let _ = writeln!(out, "    pub struct {} {{", bucket.struct_name);
        let _ =
            writeln!(out, "        /// `{}.{}` of one of the actor's memberships.", table.sql.name, key.column.name);
        let _ = writeln!(out, "        #[param({}::{})]", table.struct_name, key.ident);
        let _ = writeln!(out, "        pub {}: {},", bucket.param, rust_type(bucket.param_kind));
        out.push_str("    }\n");
    }
    if !unscoped.is_empty() {
        let names: Vec<String> = unscoped.iter().map(|&i| code(&model.tables[i].sql.name)).collect();
        out.push_str("\n    // Not scoped by any rule, so not synced (the server keeps them): ");
        let _ = writeln!(out, "{}.", names.join(", "));
        out.push_str("    // None has an owner column or a foreign key to a membership's table; give each a bucket\n");
        out.push_str("    // whose data compare one of its columns with a parameter the actor vouches for.\n");
    }
    out.push_str("}\n");
}

fn app(model: &Model, out: &mut String) {
    let tables: Vec<&str> = model.tables.iter().map(|t| t.struct_name.as_str()).collect();
    let rules = !model.own.is_empty() || !model.memberships.is_empty();
    let _ = writeln!(
        out,
        "\n/// The app: its tables{}; add mutators to `mutators` as you write them.",
        if rules { " and sync rules" } else { "" }
    );
    out.push_str("pub fn app() -> engine::App {\n    engine::app! {\n");
    let line = format!("        tables: [{}],", tables.join(", "));
    if line.len() <= 120 {
        let _ = writeln!(out, "{line}");
    } else {
        out.push_str("        tables: [\n");
        for table in &tables {
            let _ = writeln!(out, "            {table},");
        }
        out.push_str("        ],\n");
    }
    out.push_str("        mutators: [],\n");
    if rules {
        out.push_str("        sync_rules: rules,\n");
    }
    out.push_str("    }\n}\n");
}

fn mutators(model: &Model, out: &mut String) {
    out.push_str("\n// The app's operations go here, one mutator per business operation, each listed in `app()`.\n");
    out.push_str("// A mutator runs in one transaction on the server and optimistically on the client; it can\n");
    out.push_str("// only write rows its actor can read. One example per table:\n");
    for table in &model.tables {
        let snake = table.struct_name.to_snake_case();
        let _ = writeln!(out, "//\n// /// Add a row to `{}` as the client wrote it.", table.sql.name);
        out.push_str("// #[engine::mutator]\n");
        let _ = writeln!(
            out,
            "// pub async fn add_{snake}(ctx: &mut engine::MutatorCtx<'_>, row: {}) -> engine::Result<engine::Outcome> {{",
            table.struct_name
        );
        out.push_str("//     ctx.insert(&row).await?;\n//     Ok(engine::Outcome::new())\n// }\n");
    }
}
