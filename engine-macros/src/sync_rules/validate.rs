//! The no-leak lint: the rules a sync-rules module must follow, one `check_*` per rule. Together
//! they guarantee that every row a bucket holds is tied, by equality, to a parameter the actor
//! vouches for. Whether columns and parameters agree in type is checked by the type system in
//! the expansion.

use quote::ToTokens;

use super::model::{Bucket, Condition, Literal, Membership, Operand, Rules, Source};
use crate::support::{Diagnostics, option_inner, text};

pub(crate) fn validate(rules: &Rules, errors: &mut Diagnostics) {
    check_buckets_exist(rules, errors);
    check_unique_rule_names(rules, errors);
    check_accepted_buckets_exist(rules, errors);
    for bucket in &rules.buckets {
        check_bucket_shape(bucket, errors);
        check_param_has_one_source(bucket, errors);
        check_param_not_optional(bucket, errors);
        check_param_sources(bucket, errors);
        check_membership_supplies_parameters(bucket, errors);
        check_membership_conditions(bucket, errors);
        check_membership_filtered_by_actor(bucket, errors);
        check_raw_membership_placeholders(bucket, errors);
        check_data_present(bucket, errors);
        check_no_or_in_data(bucket, errors);
        check_no_negation_in_data(bucket, errors);
        check_no_raw_sql_in_data(bucket, errors);
        check_data_equalities(bucket, errors);
        check_one_table_per_selection(bucket, errors);
        check_selection_scoped(bucket, errors);
        check_bucket_params_known(bucket, errors);
        check_selection_scopes_every_parameter(bucket, errors);
        check_write_rules(bucket, errors);
    }
}

/// `accept(...)` names other buckets of the module: their holders may put rows into this one.
fn check_accepted_buckets_exist(rules: &Rules, errors: &mut Diagnostics) {
    for bucket in &rules.buckets {
        for accepted in &bucket.accepts {
            if *accepted == bucket.ident {
                errors.spanned(accepted,
                    format!("a bucket always accepts rows from its own holders: `accept(...)` names the other buckets whose holders may put rows into `{}`", bucket.ident),
                );
            } else if !rules.buckets.iter().any(|b| b.ident == *accepted) {
                let names: Vec<String> = rules.buckets.iter().map(|b| format!("`{}`", b.ident)).collect();
                errors.spanned(
                    accepted,
                    format!(
                        "`accept({accepted})` names no bucket of this module; its buckets are {}",
                        names.join(", ")
                    ),
                );
            }
        }
    }
}

/// `write(Table: condition)` speaks of a table the bucket selects, once per table, and decides
/// by the actor's membership row: equalities of the membership table's columns with constants,
/// joined by `&&` and `||`.
fn check_write_rules(bucket: &Bucket, errors: &mut Diagnostics) {
    let selected: Vec<String> = bucket
        .selections()
        .iter()
        .flat_map(|s| &s.conditions)
        .flat_map(Condition::columns)
        .map(|c| c.table_key())
        .collect();
    let membership_table = match &bucket.membership {
        Some(Membership::Conditions { conditions, .. }) => {
            conditions.iter().flat_map(Condition::columns).next().map(|c| (c.table_key(), c.table.clone()))
        }
        _ => None,
    };
    for (i, write) in bucket.writes.iter().enumerate() {
        if bucket.writes[..i].iter().any(|w| w.table_key() == write.table_key()) {
            errors.spanned(
                &write.table,
                format!("`write({}: …)` is given twice: join the alternatives with `||`", text(&write.table)),
            );
        }
        if !selected.contains(&write.table_key()) {
            errors.spanned(&write.table,
                format!(
                    "bucket `{}` does not hold `{}`: `write(...)` says who may write the tables of the bucket's `data(...)`",
                    bucket.ident,
                    text(&write.table)
                ),
            );
        }
        let Some((members_key, members)) = &membership_table else {
            errors.spanned(&write.expr,
                "`write(...)` decides by the actor's membership row, and this bucket has no membership table: add `membership(Member::user_id == actor.user_id)`",
            );
            continue;
        };
        for condition in write.any_of.iter().flatten() {
            match condition.as_const() {
                Some((column, literal, _)) => {
                    if column.table_key() != *members_key {
                        errors.spanned(&column.path,
                            format!(
                                "`{}` is not a column of the membership table `{}`: `write(...)` decides by the actor's membership row, e.g. `{}::role == \"editor\"`",
                                text(&column.path),
                                text(members),
                                text(members)
                            ),
                        );
                    }
                    if matches!(literal, Literal::Unsupported) {
                        errors.spanned(condition.expr(), "a write condition compares with a boolean, integer or string constant");
                    }
                }
                None => errors.spanned(condition.expr(),
                    format!(
                        "`{}` cannot say who may write: compare columns of the membership table with constants (`{}::role == \"editor\"`), joined by `&&` and `||`",
                        text(condition.expr()),
                        text(members)
                    ),
                ),
            }
        }
    }
}

/// A sync-rules module defines at least one bucket: a struct marked `#[bucket(...)]`.
fn check_buckets_exist(rules: &Rules, errors: &mut Diagnostics) {
    if rules.buckets.is_empty() && rules.item.content.is_some() && !rules.unreadable_buckets {
        errors.spanned(
            &rules.item.ident,
            "this sync-rules module defines no bucket: add a struct marked `#[bucket(data(…))]`",
        );
    }
}

/// Rule names are identifiers, unique in the module: they are the first segment of every bucket
/// key, which keeps the buckets of different rules apart.
fn check_unique_rule_names(rules: &Rules, errors: &mut Diagnostics) {
    for (i, bucket) in rules.buckets.iter().enumerate() {
        let mut bytes = bucket.name.bytes();
        let valid = matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            errors.at(
                bucket.name_span,
                format!(
                    "`{}` cannot name a rule: use ASCII letters, digits and `_`, not starting with a digit",
                    bucket.name
                ),
            );
        }
        if rules.buckets[..i].iter().any(|b| b.name == bucket.name) {
            errors.at(
                bucket.name_span,
                format!("a rule named `{}` is already defined: give this bucket `name = \"…\"`", bucket.name),
            );
        }
    }
}

/// A bucket is a struct with named fields, one per parameter, and no generic parameters.
fn check_bucket_shape(bucket: &Bucket, errors: &mut Diagnostics) {
    if !bucket.named_fields {
        errors.spanned(
            &bucket.ident,
            "a bucket is a struct with named fields, one per parameter: `struct Shared { list_id: String }`",
        );
    } else if bucket.params.is_empty() {
        errors.spanned(&bucket.ident,
            "a bucket without parameters would hold the same rows for everyone: give it a parameter taken from the actor, e.g. `#[param(actor.owner_id)] owner_id: String`",
        );
    }
    if !bucket.generics.params.is_empty() {
        errors.spanned(&bucket.generics, "a bucket struct cannot be generic: its fields are the bucket's parameters");
    }
}

/// Every bucket parameter says, once, where its value comes from: `#[param(...)]`.
fn check_param_has_one_source(bucket: &Bucket, errors: &mut Diagnostics) {
    for param in &bucket.params {
        match param.sources.as_slice() {
            [] => errors.spanned(&param.field,
                format!(
                    "bucket parameter `{}` has no source: add `#[param(actor.user_id)]`, `#[param(actor.owner_id)]`, `#[param(actor.claims.<name>)]` or `#[param(Table::column)]` of the membership table",
                    param.field
                ),
            ),
            [_] => {}
            [_, rest @ ..] => {
                for (expr, _) in rest {
                    errors.spanned(expr, format!("bucket parameter `{}` already has a source: keep one `#[param(...)]`", param.field));
                }
            }
        }
    }
}

/// A bucket parameter always has a value: a bucket key names one for each parameter. A nullable
/// column may still scope a selection; its null rows belong to no bucket.
fn check_param_not_optional(bucket: &Bucket, errors: &mut Diagnostics) {
    for param in &bucket.params {
        if let Some(inner) = option_inner(&param.ty) {
            errors.spanned(
                &param.ty,
                format!(
                    "bucket parameter `{}` cannot be an `Option`: every bucket key holds a value for each parameter. Declare `{}: {}`; rows whose column is null belong to no bucket of this rule",
                    param.field,
                    param.field,
                    text(inner)
                ),
            );
        }
    }
}

/// A parameter's value comes from the actor, never from the client: an actor claim
/// (`actor.user_id`, `actor.owner_id`, `actor.claims.<name>`) or a column of a membership query
/// that is itself filtered by a claim.
fn check_param_sources(bucket: &Bucket, errors: &mut Diagnostics) {
    for param in &bucket.params {
        for (expr, source) in &param.sources {
            match source {
                Source::UnknownActorField(name) => errors.spanned(expr,
                    format!(
                        "the actor has `actor.user_id`, `actor.owner_id` and `actor.claims.<name>`, not `actor.{name}`: for a claim of the token write `actor.claims.{name}`"
                    ),
                ),
                Source::Other => errors.spanned(expr,
                    format!(
                        "bucket parameter `{}` takes its value from `{}`, which the actor does not vouch for: a value the client supplies never scopes data. Take it from an actor claim (`actor.user_id`, `actor.owner_id`, `actor.claims.<name>`) or from a membership column (`Table::column` with `membership(…)`)",
                        param.field,
                        text(expr)
                    ),
                ),
                Source::Claim(_) | Source::Column(_) | Source::RawColumn(_) => {}
            }
        }
    }
}

/// Membership columns come from the bucket's membership query, all from its one table (or, for a
/// raw query, as `membership.<column>`); and a membership query supplies at least one parameter.
fn check_membership_supplies_parameters(bucket: &Bucket, errors: &mut Diagnostics) {
    let membership_table = match &bucket.membership {
        Some(Membership::Conditions { conditions, .. }) => {
            conditions.iter().flat_map(Condition::columns).next().map(|c| (c.table_key(), c.table.clone()))
        }
        _ => None,
    };
    let mut supplied = false;
    for param in &bucket.params {
        for (expr, source) in &param.sources {
            match (source, &bucket.membership) {
                (Source::Column(column), Some(Membership::Conditions { .. })) => {
                    supplied = true;
                    if let Some((key, table)) = &membership_table
                        && column.table_key() != *key
                    {
                        errors.spanned(expr,
                            format!(
                                "bucket parameter `{}` reads `{}`, but the membership query reads `{}`: take it from a column of `{}`",
                                param.field,
                                text(&column.table),
                                text(table),
                                text(table)
                            ),
                        );
                    }
                }
                (Source::Column(column), None) => errors.spanned(expr,
                    format!(
                        "bucket parameter `{}` reads column `{}` but the bucket has no membership query to read it from: add `membership({}::<column> == actor.user_id)`",
                        param.field,
                        text(&column.path),
                        text(&column.table)
                    ),
                ),
                (Source::Column(_), Some(Membership::Raw { .. })) => errors.spanned(expr,
                    format!("with a raw membership query, read its result columns as `membership.<column>`, e.g. `#[param(membership.{})]`", param.field),
                ),
                (Source::RawColumn(_), Some(Membership::Raw { .. })) => supplied = true,
                (Source::RawColumn(column), _) => errors.spanned(expr,
                    format!(
                        "`membership.{column}` reads a column of a raw membership query, and this bucket has none: write `membership(raw(\"SELECT {column} FROM … WHERE user_id = $user_id\"))` or read a table column (`Table::{column}`)"
                    ),
                ),
                _ => {}
            }
        }
    }
    if let Some(membership) = &bucket.membership
        && !supplied
    {
        let tokens = match membership {
            Membership::Raw { keyword, .. } => keyword.to_token_stream(),
            Membership::Conditions { expr, .. } => expr.to_token_stream(),
        };
        errors.spanned(&tokens,
            "this membership query supplies no bucket parameter: take a parameter from it (`#[param(Table::column)]`) or remove `membership(…)`",
        );
    }
}

/// A membership query is a conjunction (`&&`) of equalities on one table, each comparing a column
/// with an actor claim or a constant.
fn check_membership_conditions(bucket: &Bucket, errors: &mut Diagnostics) {
    let Some(Membership::Conditions { conditions, .. }) = &bucket.membership else { return };
    let mut table: Option<String> = None;
    for condition in conditions {
        let ok = match condition {
            Condition::Eq { left, right, .. } => {
                let column = matches!(left, Operand::Column(_)) || matches!(right, Operand::Column(_));
                let value = |o: &Operand| {
                    matches!(
                        o,
                        Operand::Actor(Source::Claim(_))
                            | Operand::Literal(Literal::Bool(_) | Literal::Int(_) | Literal::Text(_))
                    )
                };
                column && (value(left) || value(right))
            }
            _ => false,
        };
        if !ok {
            errors.spanned(condition.expr(),
                format!(
                    "`{}` cannot filter a membership query: write equalities joined by `&&`, each a column against an actor claim or a constant (`ListMember::user_id == actor.user_id`); for anything else use `membership(raw(\"…\"))`",
                    text(condition.expr())
                ),
            );
        }
        for column in condition.columns() {
            match &table {
                None => table = Some(column.table_key()),
                Some(t) if *t != column.table_key() => errors.spanned(&column.path,
                    format!("a membership query reads one table, and this one already reads `{t}`: use `membership(raw(\"…\"))` to join tables"),
                ),
                Some(_) => {}
            }
        }
    }
}

/// A membership query is filtered by an actor claim, so it yields only the actor's memberships.
fn check_membership_filtered_by_actor(bucket: &Bucket, errors: &mut Diagnostics) {
    let Some(Membership::Conditions { expr, conditions }) = &bucket.membership else { return };
    if !conditions.iter().all(|c| matches!(c, Condition::Eq { .. })) {
        return; // the shape is wrong, and that error says so
    }
    if !conditions.iter().any(|c| c.as_claim().is_some()) {
        errors.spanned(expr,
            "this membership query is not filtered by an actor claim, so it would hand every actor everyone's memberships: add `&& <Table>::<column> == actor.user_id` (or another claim)",
        );
    }
}

/// Raw membership SQL binds actor claims through named placeholders (`$user_id`, `$owner_id`,
/// `$claims.<name>`) and uses at least one, so it too yields only the actor's memberships.
fn check_raw_membership_placeholders(bucket: &Bucket, errors: &mut Diagnostics) {
    let Some(Membership::Raw { sql, .. }) = &bucket.membership else { return };
    let text = sql.value();
    let pieces = match engine_kernel::rules::split_raw_sql(&text) {
        Ok(pieces) => pieces,
        Err(bad) => {
            errors.spanned(sql,
                format!("`${bad}` is not a placeholder of raw membership SQL: use `$user_id`, `$owner_id` or `$claims.<name>`"),
            );
            return;
        }
    };
    if pieces.iter().all(|p| matches!(p, engine_kernel::rules::RawPiece::Sql(_))) {
        errors.spanned(sql,
            "this raw membership query is not filtered by an actor claim, so it would hand every actor everyone's memberships: filter it with `$user_id`, `$owner_id` or `$claims.<name>`",
        );
    }
}

/// A bucket holds data: `data(...)` lists at least one table selection.
fn check_data_present(bucket: &Bucket, errors: &mut Diagnostics) {
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
fn check_no_or_in_data(bucket: &Bucket, errors: &mut Diagnostics) {
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
fn check_no_negation_in_data(bucket: &Bucket, errors: &mut Diagnostics) {
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
fn check_no_raw_sql_in_data(bucket: &Bucket, errors: &mut Diagnostics) {
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
fn check_data_equalities(bucket: &Bucket, errors: &mut Diagnostics) {
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
fn check_one_table_per_selection(bucket: &Bucket, errors: &mut Diagnostics) {
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
fn check_selection_scoped(bucket: &Bucket, errors: &mut Diagnostics) {
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
fn check_bucket_params_known(bucket: &Bucket, errors: &mut Diagnostics) {
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
fn check_selection_scopes_every_parameter(bucket: &Bucket, errors: &mut Diagnostics) {
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
