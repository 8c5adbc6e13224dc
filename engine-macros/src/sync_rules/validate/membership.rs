//! Membership queries: a conjunction of equalities on one table, or raw SQL, filtered by the
//! actor's claims.

use crate::support::{Diagnostics, text};
use syn::Ident;

use crate::sync_rules::model::{Bucket, ColumnRef, Condition, Literal, Membership, Operand, Rules, Source};

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

/// `while(Other)` holds a bucket through `Other`'s membership query, exactly while its actor
/// holds the bucket of `Other` with the same membership parameters: so `Other` is another bucket
/// of the module with a membership table, this bucket names no membership of its own, each of
/// its membership parameters is one of `Other`'s, and its members leave through `Other`.
pub(super) fn check_held_while(rules: &Rules, bucket: &Bucket, errors: &mut Diagnostics) {
    let Some(source) = &bucket.held_while else { return };
    let Some(held) = rules.buckets.iter().find(|b| b.ident == *source && b.ident != bucket.ident) else {
        let names: Vec<String> =
            rules.buckets.iter().filter(|b| b.ident != bucket.ident).map(|b| format!("`{}`", b.ident)).collect();
        errors.spanned(
            source,
            format!(
                "`while({source})` names no other bucket of this module; its other buckets are {}",
                if names.is_empty() { "none".to_owned() } else { names.join(", ") }
            ),
        );
        return;
    };
    if !bucket.inherits_membership {
        let why = match (&bucket.membership, &held.membership) {
            (Some(_), _) => format!(
                "bucket `{}` is held through `{source}`'s membership: remove its own `membership(...)`",
                bucket.ident
            ),
            _ => format!(
                "`{source}` has no membership table to hold `{}` through: `while(...)` names a bucket held through `membership(Member::user_id == actor.user_id)`",
                bucket.ident
            ),
        };
        errors.spanned(source, format!("`while({source})`: {why}"));
        return;
    }
    for param in &bucket.params {
        let Some(Source::Column(column)) = param.source() else { continue };
        let shared = held.params.iter().any(|p| match p.source() {
            Some(Source::Column(other)) => text(&other.path) == text(&column.path),
            _ => false,
        });
        if !shared {
            errors.spanned(
                &column.path,
                format!(
                    "bucket `{}` is held `while({source})`, exactly while its actor holds the `{source}` bucket of the same parameters: `{}` is not a parameter of `{source}`",
                    bucket.ident,
                    text(&column.path)
                ),
            );
        }
    }
    if let Some(leave) = &bucket.leave {
        errors.spanned(
            leave,
            format!(
                "bucket `{}` is held `while({source})`: its members leave `{source}` (write `leave` there), and this bucket with it",
                bucket.ident
            ),
        );
    }
}

/// `anchor(Team::id == bucket.team_id)` names the one row a bucket belongs to: equalities of one
/// table's columns with every parameter, the table one the bucket selects, on a bucket held
/// through its own membership table (whose memberships the anchor guards).
pub(super) fn check_anchor(bucket: &Bucket, errors: &mut Diagnostics) {
    let Some((keyword, anchor)) = &bucket.anchor else { return };
    if !matches!(bucket.membership, Some(Membership::Conditions { .. })) || bucket.inherits_membership {
        errors.spanned(
            keyword,
            format!(
                "`anchor(...)` guards the memberships of a bucket, and bucket `{}` has no membership table of its own: add `membership(Member::user_id == actor.user_id)`, or anchor the bucket it is held through",
                bucket.ident
            ),
        );
        return;
    }
    let mut table: Option<&ColumnRef> = None;
    for condition in &anchor.conditions {
        let Some((column, param)) = condition.as_scope() else {
            errors.spanned(
                condition.expr(),
                format!(
                    "`{}` cannot name an anchor: an anchor is equalities of one table's columns with the bucket's parameters, `Team::id == bucket.team_id`, joined by `&&`",
                    text(condition.expr())
                ),
            );
            continue;
        };
        if bucket.param(param).is_none() {
            errors.spanned(param, format!("`bucket.{param}` is not a parameter of bucket `{}`", bucket.ident));
        }
        match table {
            None => table = Some(column),
            Some(first) if first.table_key() != column.table_key() => errors.spanned(
                &column.path,
                format!("an anchor is one row of one table, and this one is in `{}`", text(&first.table)),
            ),
            Some(_) => {}
        }
    }
    let Some(table) = table else { return };
    let scoped: Vec<&Ident> = anchor.conditions.iter().filter_map(Condition::as_scope).map(|(_, p)| p).collect();
    for param in &bucket.params {
        if !scoped.contains(&&param.field) {
            errors.spanned(
                &anchor.expr,
                format!(
                    "the anchor does not compare `bucket.{}`: it names one row, by every parameter of the bucket",
                    param.field
                ),
            );
        }
    }
    let selected = bucket
        .selections()
        .iter()
        .flat_map(|s| &s.conditions)
        .flat_map(Condition::columns)
        .any(|c| c.table_key() == table.table_key());
    if !selected {
        errors.spanned(
            &table.table,
            format!(
                "bucket `{}` does not hold `{}`: its anchor is a row the bucket holds, so its members read it",
                bucket.ident,
                text(&table.table)
            ),
        );
    }
}
