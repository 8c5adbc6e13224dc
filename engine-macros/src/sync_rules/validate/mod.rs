//! The no-leak lint: the rules a sync-rules module must follow, one `check_*` per rule. Together
//! they guarantee that every row a bucket holds is tied, by equality, to a parameter the actor
//! vouches for. Whether columns and parameters agree in type is checked by the type system in
//! the expansion.

mod data;
mod membership;
mod params;
mod write;

use super::model::{Bucket, Claim, Condition, Membership, Operand, Rules, Source};
use crate::support::Diagnostics;
use data::{
    check_bucket_params_known, check_data_equalities, check_data_present, check_no_negation_in_data,
    check_no_or_in_data, check_no_raw_sql_in_data, check_one_table_per_selection, check_selection_scoped,
    check_selection_scopes_every_parameter,
};
use membership::{
    check_anchor, check_held_while, check_membership_conditions, check_membership_filtered_by_actor,
    check_raw_membership_placeholders,
};
use params::{
    check_bucket_shape, check_membership_supplies_parameters, check_param_has_one_source, check_param_not_optional,
    check_param_sources,
};
use write::{
    check_invite, check_leave, check_membership_tables_selected, check_server_only_not_written, check_write_rules,
};

pub(crate) fn validate(rules: &Rules, errors: &mut Diagnostics) {
    check_buckets_exist(rules, errors);
    check_unique_rule_names(rules, errors);
    check_accepted_buckets_exist(rules, errors);
    check_membership_tables_selected(rules, errors);
    check_server_only_not_written(rules, errors);
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
        check_leave(bucket, errors);
        check_invite(bucket, errors);
        check_held_while(rules, bucket, errors);
        check_anchor(bucket, errors);
    }
}
/// `accept(...)` names other buckets of the module: their holders may put rows into this one.
fn check_accepted_buckets_exist(rules: &Rules, errors: &mut Diagnostics) {
    for bucket in &rules.buckets {
        for accept in &bucket.accepts {
            let accepted = &accept.bucket;
            if *accepted == bucket.ident {
                errors.spanned(accepted,
                    format!("a bucket always accepts rows from its own holders: `accept(...)` names the other buckets whose holders may put rows into `{}`", bucket.ident),
                );
            } else if let Some(source) = rules.buckets.iter().find(|b| b.ident == *accepted) {
                if !accept.open {
                    check_receiver_can_be_checked(bucket, source, accepted, errors);
                }
            } else {
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
/// `accept(Other)` admits a row into another actor's bucket only when that actor (the receiver)
/// holds the same bucket of `Other` the row lies in, which the server checks with the receiver's
/// claims: so the accepting bucket's parameters are all claims, `Other` has a membership query,
/// and that query reads only claims the parameters give. `accept(open(Other))` admits rows from
/// any holder of `Other` (an inbox), and needs none of it.
fn check_receiver_can_be_checked(bucket: &Bucket, source: &Bucket, accepted: &syn::Ident, errors: &mut Diagnostics) {
    let open = format!("`accept(open({accepted}))`");
    // Held `while(accepted)`, a bucket is held by the actor its claims name through the
    // membership that gives the row's bucket of `accepted`.
    if bucket.membership.is_some() && bucket.held_while.as_ref() != Some(accepted) {
        errors.spanned(accepted, format!(
            "`accept({accepted})` checks that the receiving actor holds the row's `{accepted}` bucket, and the buckets of `{}` are held through memberships, not by one actor: write {open} to let any holder of `{accepted}` put rows in, or hold `{}` `while({accepted})`",
            bucket.ident, bucket.ident
        ));
        return;
    }
    let provided: Vec<Claim> = bucket.params.iter().flat_map(|p| &p.sources).filter_map(|(_, s)| claim(s)).collect();
    let mut needed: Vec<Claim> = source.params.iter().flat_map(|p| &p.sources).filter_map(|(_, s)| claim(s)).collect();
    match &source.membership {
        None => {
            errors.spanned(accepted, format!(
                "`accept({accepted})` checks that the receiving actor holds the row's `{accepted}` bucket, and only its own actor holds a bucket of `{accepted}` (it has no membership): write {open} for a bucket anyone holding `{accepted}` may put rows into, like an inbox"
            ));
            return;
        }
        Some(Membership::Conditions { conditions, .. }) => {
            for condition in conditions {
                if let Condition::Eq { left, right, .. } = condition {
                    for operand in [left, right] {
                        if let Operand::Actor(source) = operand {
                            needed.extend(claim(source));
                        }
                    }
                }
            }
        }
        Some(Membership::Raw { sql, .. }) => {
            let sql = sql.value();
            for piece in engine_kernel::rules::split_raw_sql(&sql).unwrap_or_default() {
                match piece {
                    engine_kernel::rules::RawPiece::UserId => needed.push(Claim::UserId),
                    engine_kernel::rules::RawPiece::OwnerId => needed.push(Claim::OwnerId),
                    engine_kernel::rules::RawPiece::Claim(name) => needed.push(Claim::Custom(name.to_owned())),
                    engine_kernel::rules::RawPiece::Sql(_) => {}
                }
            }
        }
    }
    if let Some(missing) = needed.iter().find(|c| !provided.contains(c)) {
        errors.spanned(accepted, format!(
            "`accept({accepted})` checks that the receiving actor holds the row's `{accepted}` bucket, which `{accepted}`'s membership decides by `{}`, and the parameters of `{}` do not give it: write {open} to let any holder of `{accepted}` put rows in",
            missing.describe(),
            bucket.ident
        ));
    }
}

fn claim(source: &Source) -> Option<Claim> {
    match source {
        Source::Claim(claim) => Some(claim.clone()),
        _ => None,
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
