//! Who may write: `write(Table: …)` decides by the actor's membership row.

use crate::support::{Diagnostics, text};
use crate::sync_rules::model::{Bucket, Condition, Literal, Membership};

/// `write(Table: condition)` speaks of a table the bucket selects, once per table, and decides
/// by the actor's membership row: equalities of the membership table's columns with constants,
/// joined by `&&` and `||`.
pub(super) fn check_write_rules(bucket: &Bucket, errors: &mut Diagnostics) {
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
