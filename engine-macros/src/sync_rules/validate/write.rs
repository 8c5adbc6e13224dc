//! Who may write: nothing is writable that no `write(...)` names. `write(Table)` lets every holder
//! of a bucket write the table; `write(Table: …)` decides by the actor's membership row and by
//! the row written; `leave` lets a member delete its own membership row.

use crate::support::{Diagnostics, text};
use crate::sync_rules::model::{Bucket, Compared, Condition, Literal, Membership, Rules, Source};

/// `write(Table)` and `write(Table: condition)` speak of a table the bucket selects, once per
/// table; a condition decides by the actor's membership row (equalities of the membership
/// table's columns with constants) and by the row written (`row.column == constant`, or
/// `row.column == actor.<claim>`, or `!=`), joined by `&&` and `||`.
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
        if write.any_of.len() > 64 {
            errors.spanned(
                &write.table,
                format!(
                    "`write({}: …)` has {} alternatives joined by `||`; a write condition has at most 64",
                    text(&write.table),
                    write.any_of.len()
                ),
            );
        }
        if write.expr.is_none() {
            continue;
        }
        for condition in write.any_of.iter().flatten() {
            if let Some((_, compared, _, expr)) = condition.as_row_term() {
                match compared {
                    Compared::Literal(Literal::Unsupported) => errors.spanned(
                        expr,
                        "a write condition compares the row with a boolean, integer or string constant, or with an actor claim",
                    ),
                    Compared::Actor(Source::UnknownActorField(name)) => {
                        errors.spanned(expr, super::params::unknown_actor_field(&name));
                    }
                    _ => {}
                }
                continue;
            }
            let Some((members_key, members)) = &membership_table else {
                errors.spanned(condition.expr(),
                    format!(
                        "`{}`: a condition in `write(...)` compares the row written (`row.<column> == <constant>` or `row.<column> == actor.user_id`, or `!=`) or the actor's membership row, and this bucket has no membership table: write `write({})` to let every holder of the bucket write it, or add `membership(Member::user_id == actor.user_id)`",
                        text(condition.expr()),
                        text(&write.table)
                    ),
                );
                continue;
            };
            match condition.as_const() {
                Some((column, literal, _)) => {
                    if column.table_key() != *members_key {
                        errors.spanned(&column.path,
                            format!(
                                "`{}` is not a column of the membership table `{}`: `write(...)` decides by the actor's membership row, e.g. `{}::role == \"editor\"`, and by the row written, `row.<column>`",
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
                        "`{}` cannot say who may write: compare columns of the membership table with constants (`{}::role == \"editor\"`) and the row written with constants or actor claims (`row.role != \"owner\"`, `row.author_id == actor.user_id`), joined by `&&` and `||`",
                        text(condition.expr()),
                        text(members)
                    ),
                ),
            }
        }
    }
}

/// `leave` lets a member delete the membership row it holds the bucket through, so the bucket
/// has a membership table.
pub(super) fn check_leave(bucket: &Bucket, errors: &mut Diagnostics) {
    if let Some(leave) = &bucket.leave
        && !matches!(bucket.membership, Some(Membership::Conditions { .. }))
    {
        errors.spanned(
            leave,
            format!(
                "`leave` lets a member delete its own membership row, and bucket `{}` has no membership table: add `membership(Member::user_id == actor.user_id)`",
                bucket.ident
            ),
        );
    }
}

/// `invite(Member::accepted)` makes the bucket's membership rows invitations their member
/// accepts by setting that column: the bucket has a membership table of its own (not raw SQL,
/// not another bucket's through `while(...)`), and the column is one of that table.
pub(super) fn check_invite(bucket: &Bucket, errors: &mut Diagnostics) {
    let Some((keyword, column)) = &bucket.invite else { return };
    if bucket.inherits_invite {
        return; // said of the bucket it is held through
    }
    let members = match &bucket.membership {
        Some(Membership::Conditions { conditions, .. }) if !bucket.inherits_membership => {
            conditions.iter().flat_map(Condition::columns).next().map(|c| c.table.clone())
        }
        _ => None,
    };
    let Some(members) = members else {
        errors.spanned(
            keyword,
            format!(
                "`invite(...)` makes the membership rows of bucket `{}` invitations its members accept, and it has no membership table of its own: add `membership(Member::user_id == actor.user_id)`",
                bucket.ident
            ),
        );
        return;
    };
    if text(&column.table) != text(&members) {
        errors.spanned(
            &column.path,
            format!(
                "a member accepts an invitation by setting a column of its own membership row, and `{}` is a column of `{}`, not of the membership table `{}`: name a `bool` column of `{}`",
                text(&column.path),
                text(&column.table),
                text(&members),
                text(&members)
            ),
        );
    }
}

/// A table declared `server_only(...)`, or read by a raw membership query, is written by server
/// code only: no `write(...)` lets clients write it.
pub(super) fn check_server_only_not_written(rules: &Rules, errors: &mut Diagnostics) {
    for bucket in &rules.buckets {
        for write in &bucket.writes {
            let reader = rules.buckets.iter().find(|b| match &b.membership {
                Some(Membership::Raw { reads, .. }) => reads.iter().any(|t| text(t) == text(&write.table)),
                _ => false,
            });
            if let Some(reader) = reader {
                errors.spanned(
                    &write.table,
                    format!(
                        "`{}` is read by the raw membership query of bucket `{}`, and whom a change to it grants cannot be told from raw SQL: only server code writes it, so no `write(...)` may let clients write it",
                        text(&write.table),
                        reader.ident
                    ),
                );
            }
            if rules.server_only.iter().any(|t| text(t) == text(&write.table)) {
                errors.spanned(
                    &write.table,
                    format!(
                        "`{}` is declared `server_only(...)`: only server code writes it, so no `write(...)` may let clients write it",
                        text(&write.table)
                    ),
                );
            }
        }
    }
}

/// A membership table is selected by some bucket, so members read the rows that give them their
/// buckets and every client write to it is checked against a bucket; or it is declared
/// `server_only(...)`, so clients do not write it at all.
pub(super) fn check_membership_tables_selected(rules: &Rules, errors: &mut Diagnostics) {
    let selected: Vec<String> = rules
        .buckets
        .iter()
        .flat_map(|b| b.selections())
        .flat_map(|s| &s.conditions)
        .flat_map(Condition::columns)
        .map(|c| c.table_key())
        .collect();
    for bucket in &rules.buckets {
        let Some(Membership::Conditions { conditions, expr }) = &bucket.membership else { continue };
        if bucket.inherits_membership {
            continue; // said of the bucket it is held through
        }
        let Some(column) = conditions.iter().flat_map(Condition::columns).next() else { continue };
        let table = column.table_key();
        if selected.contains(&table) || rules.server_only.iter().any(|t| text(t) == text(&column.table)) {
            continue;
        }
        errors.spanned(
            expr,
            format!(
                "no bucket selects the membership table `{0}`: a write to it could grant or revoke buckets unseen; select it in a bucket (`data({0}::<column> == bucket.<param>)`) so members read what they write, or declare it `#[engine::sync_rules(server_only({0}))]` if only server code writes it",
                text(&column.table)
            ),
        );
    }
}
