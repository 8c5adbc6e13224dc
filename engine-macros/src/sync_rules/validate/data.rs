//! Data selections: each scoped by equality to every bucket parameter, with no OR, negation or
//! raw SQL.

use crate::support::{Diagnostics, text};
use crate::sync_rules::model::{Bucket, Condition, Literal, Operand};

/// A bucket holds data: `data(...)` lists at least one table selection.
pub(super) fn check_data_present(bucket: &Bucket, errors: &mut Diagnostics) {
    match &bucket.data {
        None => {
            errors.at(bucket.attr_span, "a bucket needs its data: add `data(Table::column == bucket.<parameter>, …)`")
        }
        Some((keyword, selections)) if selections.is_empty() => {
            errors.spanned(
                keyword,
                "`data()` is empty: list the tables the bucket holds, e.g. `data(Note::list_id == bucket.list_id)`",
            );
        }
        Some(_) => {}
    }
}

/// A data selection has no OR: a row reached through the other branch is not scoped to the
/// bucket. Write each alternative as its own selection.
pub(super) fn check_no_or_in_data(bucket: &Bucket, errors: &mut Diagnostics) {
    for condition in bucket.selections().iter().flat_map(|s| &s.conditions) {
        if let Condition::Or(expr) = condition {
            errors.spanned(expr,
                "`||` in a data selection can reach rows outside the bucket: write each alternative as its own selection, each scoped by `Table::column == bucket.<parameter>`",
            );
        }
    }
}

/// A data selection has no negation (`!`, `!=`): a negated condition selects the rows of every
/// other bucket.
pub(super) fn check_no_negation_in_data(bucket: &Bucket, errors: &mut Diagnostics) {
    for condition in bucket.selections().iter().flat_map(|s| &s.conditions) {
        if let Condition::Not(expr) = condition {
            errors.spanned(expr,
                "negation in a data selection selects the rows of every other bucket: scope rows with `==` only (`Table::column == bucket.<parameter>`), and filter with `== <constant>`",
            );
        }
    }
}

/// Raw SQL (and any call) is allowed in membership queries only: the lint cannot see what raw
/// data SQL selects.
pub(super) fn check_no_raw_sql_in_data(bucket: &Bucket, errors: &mut Diagnostics) {
    for condition in bucket.selections().iter().flat_map(|s| &s.conditions) {
        if let Condition::Raw(expr) = condition {
            errors.spanned(expr,
                "raw SQL and calls are allowed only in `membership(…)`, where the lint checks the actor filter: a data selection is equalities, `Table::column == bucket.<parameter>` and `Table::column == <constant>`",
            );
        }
    }
}

/// A data condition compares one column with a bucket parameter or a constant (a string, an
/// integer or a boolean literal).
pub(super) fn check_data_equalities(bucket: &Bucket, errors: &mut Diagnostics) {
    for condition in bucket.selections().iter().flat_map(|s| &s.conditions) {
        let message = match condition {
            Condition::Eq { left, right, .. } => match (left, right) {
                (Operand::Column(_), Operand::BucketParam(_)) | (Operand::BucketParam(_), Operand::Column(_)) => None,
                (Operand::Column(_), Operand::Literal(Literal::Unsupported))
                | (Operand::Literal(Literal::Unsupported), Operand::Column(_)) => Some(
                    "a data filter compares a column with a string, an integer (that fits `i64`) or a boolean constant".to_owned(),
                ),
                (Operand::Column(_), Operand::Literal(_)) | (Operand::Literal(_), Operand::Column(_)) => None,
                (Operand::Column(_), Operand::Actor(_)) | (Operand::Actor(_), Operand::Column(_)) => Some(format!(
                    "a data selection compares columns with bucket parameters, not the actor: make `{}` a bucket parameter (`#[param({})] name: Type`) and compare with `bucket.name`",
                    text(condition_actor(condition)),
                    text(condition_actor(condition)),
                )),
                (Operand::Column(_), Operand::Column(_)) => {
                    Some("a data selection compares a column with a bucket parameter or a constant, not with another column".to_owned())
                }
                _ => Some(
                    "a data condition compares a column (`Table::column`) with a bucket parameter (`bucket.<parameter>`) or a constant".to_owned(),
                ),
            },
            Condition::Other(_) => Some(
                "a data selection is equalities joined by `&&`: `Table::column == bucket.<parameter>`, optionally `&& Table::column == <constant>`".to_owned(),
            ),
            Condition::Or(_) | Condition::Not(_) | Condition::Raw(_) => None,
        };
        if let Some(message) = message {
            errors.spanned(condition.expr(), format!("`{}`: {message}", text(condition.expr())));
        }
    }
}

fn condition_actor(condition: &Condition) -> &syn::Expr {
    match condition {
        Condition::Eq { expr: syn::Expr::Binary(b), left, .. } => {
            if matches!(left, Operand::Actor(_)) {
                &b.left
            } else {
                &b.right
            }
        }
        other => other.expr(),
    }
}

/// A selection reads one table: every column it names belongs to the same table.
pub(super) fn check_one_table_per_selection(bucket: &Bucket, errors: &mut Diagnostics) {
    for selection in bucket.selections() {
        let mut columns = selection.conditions.iter().flat_map(Condition::columns);
        let Some(first) = columns.next() else { continue };
        for other in columns {
            if other.table_key() != first.table_key() {
                errors.spanned(
                    &other.path,
                    format!(
                        "a selection reads one table, and this one reads `{}`: list `{}` as its own selection",
                        text(&first.table),
                        text(&other.table)
                    ),
                );
            }
        }
    }
}

/// Every data selection is scoped by equality to a bucket parameter, so each row it selects
/// belongs to the bucket and to no one else's.
pub(super) fn check_selection_scoped(bucket: &Bucket, errors: &mut Diagnostics) {
    if bucket.params.is_empty() {
        return; // nothing to scope by, and that error says so
    }
    for selection in bucket.selections() {
        if selection.conditions.iter().any(|c| c.as_scope().is_some()) {
            continue;
        }
        let clean = selection.conditions.iter().all(|c| matches!(c, Condition::Eq { .. }));
        if !clean {
            continue; // the shape errors above already explain this selection
        }
        let example = match (selection.conditions.iter().flat_map(Condition::columns).next(), bucket.params.first()) {
            (Some(column), Some(param)) => format!("`{}::<column> == bucket.{}`", text(&column.table), param.field),
            _ => "`Table::column == bucket.<parameter>`".to_owned(),
        };
        errors.spanned(&selection.expr,
            format!(
                "this sync rule can expose rows outside its bucket: `{}` is not scoped to a bucket parameter; add {example}",
                text(&selection.expr)
            ),
        );
    }
}

/// `bucket.<name>` names a parameter of the bucket.
pub(super) fn check_bucket_params_known(bucket: &Bucket, errors: &mut Diagnostics) {
    let names: Vec<String> = bucket.params.iter().map(|p| format!("`{}`", p.field)).collect();
    for condition in bucket.selections().iter().flat_map(|s| &s.conditions) {
        if let Condition::Eq { left, right, .. } = condition {
            for operand in [left, right] {
                if let Operand::BucketParam(name) = operand
                    && bucket.param(name).is_none()
                {
                    errors.spanned(
                        name,
                        format!(
                            "bucket `{}` has no parameter `{name}`; its parameters are {}",
                            bucket.ident,
                            names.join(", ")
                        ),
                    );
                }
            }
        }
    }
}

/// Every selection scopes every bucket parameter, so the buckets a row is in follow from the row
/// alone: the store can tell, for each row it writes or deletes, exactly which buckets it enters
/// and leaves.
pub(super) fn check_selection_scopes_every_parameter(bucket: &Bucket, errors: &mut Diagnostics) {
    if bucket.data.is_none() || !bucket.data_is_well_formed() {
        return;
    }
    for selection in bucket.selections() {
        let scoped: Vec<&syn::Ident> =
            selection.conditions.iter().filter_map(Condition::as_scope).map(|(_, p)| p).collect();
        let missing: Vec<String> = bucket
            .params
            .iter()
            .filter(|p| !scoped.contains(&&p.field))
            .map(|p| format!("`bucket.{}`", p.field))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let table = selection.conditions.iter().flat_map(Condition::columns).next().map(|c| text(&c.table));
        errors.spanned(
            &selection.expr,
            format!(
                "this selection does not scope {}: every selection compares a column with every bucket parameter (`{}::<column> == {}`), so each row names its buckets completely",
                missing.join(" and "),
                table.unwrap_or_else(|| "Table".to_owned()),
                missing[0].trim_matches('`'),
            ),
        );
    }
}
