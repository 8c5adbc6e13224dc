//! Membership queries: a conjunction of equalities on one table, or raw SQL, filtered by the
//! actor's claims.

use crate::support::{Diagnostics, text};
use crate::sync_rules::model::{Bucket, Condition, Literal, Membership, Operand, Source};

/// A membership query is a conjunction (`&&`) of equalities on one table, each comparing a column
/// with an actor claim or a constant.
pub(super) fn check_membership_conditions(bucket: &Bucket, errors: &mut Diagnostics) {
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
pub(super) fn check_membership_filtered_by_actor(bucket: &Bucket, errors: &mut Diagnostics) {
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
pub(super) fn check_raw_membership_placeholders(bucket: &Bucket, errors: &mut Diagnostics) {
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
