//! `engine introspect`: read an existing database's tables and write the Rust source of a
//! starter app for them (the README's "Adopting an existing database").
//!
//! Layers: [`catalog`] reads Postgres' catalog, [`model`] decides what the engine can carry and
//! guesses the roles and sync rules, [`render`] writes the source.

mod catalog;
mod model;
mod render;

use std::path::Path;

use crate::error::{Error, Result};

/// What `engine introspect` was asked.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) url: &'a str,
    pub(crate) schema: &'a str,
    pub(crate) tables: Option<&'a [String]>,
    pub(crate) out: Option<&'a Path>,
}

/// The source of the starter app for the tables of `request`, or (with `out`) where it went and
/// what was left out.
pub(crate) async fn introspect(request: Request<'_>) -> Result<String> {
    let catalog = catalog::read(request.url, request.schema, request.tables).await?;
    if let Some(wanted) = request.tables {
        // The catalog holds names escaped, and the error quotes them so.
        let missing: Vec<String> = wanted
            .iter()
            .map(|name| catalog::escaped(name))
            .filter(|name| !catalog.tables.iter().any(|t| &t.name == name))
            .collect();
        if !missing.is_empty() {
            return Err(Error::NothingUsable {
                reason: format!("schema `{}` has no table {}", catalog.schema, missing.join(", ")),
            });
        }
    }
    let model = model::model(&catalog);
    if model.tables.is_empty() {
        let mut reason = format!("schema `{}` has no table the engine can carry", catalog.schema);
        for (name, why) in &model.skipped {
            reason.push_str(&format!("\n  table `{name}`: {why}"));
        }
        return Err(Error::NothingUsable { reason });
    }
    let source = render::render(&model);
    let Some(path) = request.out else { return Ok(source) };
    std::fs::write(path, &source).map_err(|source| Error::Write { path: path.display().to_string(), source })?;
    Ok(summary(&model, path))
}

/// What was written and what was left out.
fn summary(model: &model::Model, path: &Path) -> String {
    let rules = usize::from(!model.own.is_empty()) + model.memberships.len();
    let mut report = format!("wrote {}: {} tables, {rules} sync rules\n", path.display(), model.tables.len());
    for table in &model.tables {
        for left in &table.left_out {
            report.push_str(&format!(
                "left out column {}.{} ({}): {}\n",
                table.sql.name, left.column.name, left.column.type_text, left.reason
            ));
        }
    }
    for (name, reason) in &model.skipped {
        report.push_str(&format!("left out table {name}: {reason}\n"));
    }
    let unscoped: Vec<&str> = model.unscoped().into_iter().map(|i| model.tables[i].sql.name.as_str()).collect();
    if !unscoped.is_empty() {
        report.push_str(&format!("not synced (no sync rule could scope them): {}\n", unscoped.join(", ")));
    }
    report
}
