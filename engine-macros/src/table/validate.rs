//! The rules a table declaration must follow, one `check_*` per rule. Rules about column types
//! are checked by the type system in the expansion, so aliases and paths work as written.

use super::model::Table;
use crate::support::{Diagnostics, RESERVED_PREFIX, derived_among, is_sql_identifier, option_inner, text};

pub(crate) fn validate(table: &Table, errors: &mut Diagnostics) {
    check_no_generics(table, errors);
    check_primary_key(table, errors);
    check_one_owner(table, errors);
    check_one_soft_delete(table, errors);
    check_table_name(table, errors);
    check_column_names(table, errors);
    check_no_row_derives(table, errors);
    check_collaborative_not_optional(table, errors);
}

/// A table is a concrete struct: rows of one shape, so no generic parameters.
fn check_no_generics(table: &Table, errors: &mut Diagnostics) {
    let generics = &table.item.generics;
    if !generics.params.is_empty() || generics.where_clause.is_some() {
        errors.spanned(
            generics,
            "a table struct cannot be generic: a table has one row type; remove the generic parameters",
        );
    }
}

/// Every table has a primary key: one or more fields marked `#[engine(primary_key)]`.
fn check_primary_key(table: &Table, errors: &mut Diagnostics) {
    if table.field_errors {
        return; // the unreadable attribute may be the key
    }
    if table.primary_key().next().is_none() && !table.columns.is_empty() {
        errors.at(
            table.item.ident.span(),
            format!("table `{}` has no primary key: mark its key field(s) with `#[engine(primary_key)]`", table.name),
        );
    } else if table.columns.is_empty() && matches!(table.item.fields, syn::Fields::Named(_)) {
        errors.at(table.item.ident.span(), format!("table `{}` has no columns", table.name));
    }
}

/// A table has at most one owner column.
fn check_one_owner(table: &Table, errors: &mut Diagnostics) {
    for extra in table.columns.iter().filter_map(|c| c.owner).skip(1) {
        errors.at(extra, "a table has at most one owner column: keep `#[engine(owner)]` on one field");
    }
}

/// A table has at most one soft-delete column.
fn check_one_soft_delete(table: &Table, errors: &mut Diagnostics) {
    for extra in table.columns.iter().filter_map(|c| c.soft_delete).skip(1) {
        errors.at(extra, "a table has at most one soft-delete column: keep `#[engine(soft_delete)]` on one field");
    }
}

/// The table's SQL name is a plain lowercase identifier outside the engine's own namespace.
fn check_table_name(table: &Table, errors: &mut Diagnostics) {
    if !is_sql_identifier(&table.name) {
        errors.at(
            table.name_span,
            format!(
                "`{}` cannot name a table: use lowercase ASCII letters, digits and `_`, starting with a letter or `_`, at most 63 bytes (`name = \"…\"`)",
                table.name
            ),
        );
    } else if table.name.starts_with(RESERVED_PREFIX) {
        errors.at(
            table.name_span,
            format!("table names starting with `{RESERVED_PREFIX}` belong to the engine: rename `{}`", table.name),
        );
    }
}

/// Column names are plain lowercase identifiers, unique in the table, outside the engine's
/// namespace.
fn check_column_names(table: &Table, errors: &mut Diagnostics) {
    for (i, column) in table.columns.iter().enumerate() {
        if !is_sql_identifier(&column.name) {
            errors.at(
                column.name_span,
                format!(
                    "`{}` cannot name a column: use lowercase ASCII letters, digits and `_`, starting with a letter or `_` (`#[engine(rename = \"…\")]`)",
                    column.name
                ),
            );
        } else if column.name.starts_with(RESERVED_PREFIX) {
            errors.at(
                column.name_span,
                format!(
                    "column names starting with `{RESERVED_PREFIX}` belong to the engine: rename `{}`",
                    column.name
                ),
            );
        }
        if table.columns[..i].iter().any(|c| c.name == column.name) {
            errors.at(
                column.name_span,
                format!(
                    "table `{}` already has a column named `{}`: give this field another `#[engine(rename = \"…\")]`",
                    table.name, column.name
                ),
            );
        }
    }
}

/// The macro derives the row's `Serialize`, `Deserialize` and `JsonSchema` (its wire form), so
/// the struct must not derive them too.
fn check_no_row_derives(table: &Table, errors: &mut Diagnostics) {
    for path in derived_among(&table.item.attrs, &["Serialize", "Deserialize", "JsonSchema"]) {
        let name = path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
        errors.spanned(
            &path,
            format!("`#[engine::table]` implements `{name}` itself, as the row's wire form: remove this derive"),
        );
    }
}

/// A collaborative column is never null: its empty value is an empty document. (Caught here when
/// written `Option<CrdtText>`; through an alias, the column-type check in the expansion says so.)
fn check_collaborative_not_optional(table: &Table, errors: &mut Diagnostics) {
    for column in &table.columns {
        let Some(syn::Type::Path(inner)) = option_inner(&column.ty) else { continue };
        let Some(kind) = inner.path.segments.last().map(|s| s.ident.to_string()) else { continue };
        if kind == "CrdtText" || kind == "CrdtMap" {
            errors.spanned(
                &column.ty,
                format!(
                    "a collaborative column is never null, its empty value is an empty document (`{kind}::new()`): write `{}: {}`",
                    column.field,
                    text(inner)
                ),
            );
        }
    }
}
