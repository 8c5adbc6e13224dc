//! The no-leak lint: the rules a sync-rules module must follow, one `check_*` per rule. Together
//! they guarantee that every row a bucket holds is tied, by equality, to a parameter the actor
//! vouches for. Whether columns and parameters agree in type is checked by the type system in
//! the expansion.

mod data;
mod membership;
mod params;
mod write;

use super::model::Rules;
use crate::support::Diagnostics;
use data::{
    check_bucket_params_known, check_data_equalities, check_data_present, check_no_negation_in_data,
    check_no_or_in_data, check_no_raw_sql_in_data, check_one_table_per_selection, check_selection_scoped,
    check_selection_scopes_every_parameter,
};
use membership::{check_membership_conditions, check_membership_filtered_by_actor, check_raw_membership_placeholders};
use params::{
    check_bucket_shape, check_membership_supplies_parameters, check_param_has_one_source, check_param_not_optional,
    check_param_sources,
};
use write::check_write_rules;

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
