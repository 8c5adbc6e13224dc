//! The shape of a bucket struct and where each parameter's value comes from.

use quote::ToTokens;

use crate::support::{Diagnostics, option_inner, text};
use crate::sync_rules::model::{Bucket, Condition, Membership, Source};

/// A bucket is a struct with named fields, one per parameter, and no generic parameters.
pub(super) fn check_bucket_shape(bucket: &Bucket, errors: &mut Diagnostics) {
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
pub(super) fn check_param_has_one_source(bucket: &Bucket, errors: &mut Diagnostics) {
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
pub(super) fn check_param_not_optional(bucket: &Bucket, errors: &mut Diagnostics) {
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
pub(super) fn check_param_sources(bucket: &Bucket, errors: &mut Diagnostics) {
    for param in &bucket.params {
        for (expr, source) in &param.sources {
            match source {
                Source::UnknownActorField(name) => errors.spanned(expr, unknown_actor_field(name)),
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

/// What to say of `actor.<name>` that names no claim, wherever a rule compares with the actor.
pub(super) fn unknown_actor_field(name: &syn::Ident) -> String {
    format!(
        "the actor has `actor.user_id`, `actor.owner_id` and `actor.claims.<name>`, not `actor.{name}`: for a claim of the token write `actor.claims.{name}`"
    )
}

/// Membership columns come from the bucket's membership query, all from its one table (or, for a
/// raw query, as `membership.<column>`); and a membership query supplies at least one parameter.
pub(super) fn check_membership_supplies_parameters(bucket: &Bucket, errors: &mut Diagnostics) {
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
