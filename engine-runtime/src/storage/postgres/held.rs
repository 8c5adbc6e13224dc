//! Which buckets an actor holds: claim-only rules from the actor's claims, membership rules by a
//! query filtered by the actor's claims, evaluated per request inside the caller's transaction.

use std::collections::BTreeSet;
use std::sync::Arc;

use engine_kernel::rules::{FilterValue, Membership, ParamSource, RuleMeta};
use engine_kernel::{Actor, App, BucketKey, SqlType};
use sqlx::PgConnection;

use super::sql::{constant, ident};
use crate::buckets::{claim_bucket, param_text};
use crate::error::Result;

/// A rule's membership query, compiled once per app.
#[derive(Debug, Clone)]
pub(crate) struct MembershipQuery {
    rule: &'static RuleMeta,
    /// The query; it returns one text column per membership-sourced parameter, in order.
    sql: Arc<str>,
    /// Whether the actor holds one given bucket: the query, narrowed to its parameters.
    holds_sql: Arc<str>,
    /// The claims bound as `$1, $2, …`, as text.
    binds: Vec<engine_kernel::rules::Claim>,
}

impl MembershipQuery {
    fn new(rule: &'static RuleMeta, sql: String, binds: Vec<engine_kernel::rules::Claim>) -> Self {
        let membership_params =
            rule.parameters.iter().filter(|p| matches!(p.source, ParamSource::Membership { .. })).count();
        let conditions: Vec<String> =
            (0..membership_params).map(|i| format!("h.p{i} = ${}", binds.len() + i + 1)).collect();
        let holds_sql = format!("SELECT EXISTS (SELECT 1 FROM ({sql}) AS h WHERE {})", conditions.join(" AND "));
        MembershipQuery { rule, sql: sql.into(), holds_sql: holds_sql.into(), binds }
    }
}

/// Compile the membership queries of `app`'s rules.
pub(crate) fn compile(app: &App) -> Vec<MembershipQuery> {
    app.sync_rules().rules.iter().filter_map(|rule| compile_rule(app, rule)).collect()
}

fn compile_rule(app: &App, rule: &'static RuleMeta) -> Option<MembershipQuery> {
    let columns: Vec<&str> = rule
        .parameters
        .iter()
        .filter_map(|p| match p.source {
            ParamSource::Membership { column } => Some(column),
            ParamSource::Claim(_) => None,
        })
        .collect();
    match rule.membership? {
        Membership::Table { table, filters } => {
            let meta = app.table(table).expect("the app lists every rule table");
            let mut binds = Vec::new();
            let mut conditions = Vec::new();
            for filter in filters {
                let column = meta.column(filter.column).expect("rule columns exist");
                match filter.value {
                    FilterValue::Claim(claim) => {
                        binds.push(claim);
                        let placeholder = match column.sql_type {
                            SqlType::Text => format!("${}", binds.len()),
                            other => format!("${}::text::{}", binds.len(), other.postgres()),
                        };
                        conditions.push(format!("m.{} = {placeholder}", ident(filter.column)));
                    }
                    FilterValue::Const(value) => {
                        conditions.push(format!("m.{} = {}", ident(filter.column), constant(value)))
                    }
                }
            }
            if let Some(deleted) = meta.soft_delete {
                conditions.push(format!("m.{} IS NULL", ident(deleted)));
            }
            let select: Vec<String> =
                columns.iter().enumerate().map(|(i, c)| format!("m.{}::text AS p{i}", ident(c))).collect();
            let sql = format!(
                "SELECT DISTINCT {} FROM {} AS m WHERE {}",
                select.join(", "),
                ident(table),
                conditions.join(" AND ")
            );
            Some(MembershipQuery::new(rule, sql, binds))
        }
        Membership::Raw { sql } => {
            let (sql, binds) = number_placeholders(sql);
            let select: Vec<String> =
                columns.iter().enumerate().map(|(i, c)| format!("m.{}::text AS p{i}", ident(c))).collect();
            let sql = format!("SELECT DISTINCT {} FROM ({sql}) AS m", select.join(", "));
            Some(MembershipQuery::new(rule, sql, binds))
        }
    }
}

/// Raw membership SQL with its named placeholders (`$user_id`, `$owner_id`, `$claims.<name>`)
/// replaced by numbered ones, and the claims to bind.
fn number_placeholders(sql: &'static str) -> (String, Vec<engine_kernel::rules::Claim>) {
    use engine_kernel::rules::Claim;
    let mut out = String::with_capacity(sql.len());
    let mut binds: Vec<Claim> = Vec::new();
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let len = after.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.').count();
        let name = after[..len].trim_end_matches('.');
        let claim = match name {
            "user_id" => Some(Claim::UserId),
            "owner_id" => Some(Claim::OwnerId),
            other => other.strip_prefix("claims.").map(Claim::Custom),
        };
        match claim {
            Some(claim) => {
                let n = match binds.iter().position(|b| *b == claim) {
                    Some(i) => i + 1,
                    None => {
                        binds.push(claim);
                        binds.len()
                    }
                };
                out.push_str(&format!("${n}"));
                rest = &after[name.len()..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    (out, binds)
}

impl MembershipQuery {
    /// The rule the query belongs to.
    pub(crate) fn rule(&self) -> &'static RuleMeta {
        self.rule
    }

    /// Whether `actor` holds bucket `key` of this query's rule now (as the connection sees it,
    /// its own transaction's writes included).
    pub(crate) async fn holds(&self, conn: &mut PgConnection, actor: &Actor, key: &BucketKey) -> Result<bool> {
        let params = key.params();
        if params.len() != self.rule.parameters.len() {
            return Ok(false);
        }
        let mut membership_params = Vec::new();
        for (param, value) in self.rule.parameters.iter().zip(params) {
            match param.source {
                ParamSource::Claim(claim) => {
                    if claim.value(actor).and_then(|v| param_text(&v)).as_deref() != Some(value.as_str()) {
                        return Ok(false);
                    }
                }
                ParamSource::Membership { .. } => membership_params.push(value),
            }
        }
        let Some(claims) = self.binds.iter().map(|c| param_text(&c.value(actor)?)).collect::<Option<Vec<_>>>() else {
            return Ok(false);
        };
        let mut query = sqlx::query_scalar::<_, bool>(sqlx::AssertSqlSafe(Arc::clone(&self.holds_sql)));
        for value in claims.into_iter().chain(membership_params) {
            query = query.bind(value);
        }
        Ok(query.fetch_one(&mut *conn).await?)
    }
}

/// Every bucket `actor` holds.
pub(crate) async fn held_buckets(
    conn: &mut PgConnection,
    app: &App,
    queries: &[MembershipQuery],
    actor: &Actor,
) -> Result<BTreeSet<BucketKey>> {
    let mut held = BTreeSet::new();
    for rule in app.sync_rules().rules {
        if rule.membership.is_none() {
            held.extend(claim_bucket(rule, actor));
        }
    }
    for query in queries {
        let Some(claims) = query.binds.iter().map(|c| param_text(&c.value(actor)?)).collect::<Option<Vec<_>>>() else {
            continue; // the actor lacks a claim the query needs: it holds none of these buckets
        };
        let mut q = sqlx::query(sqlx::AssertSqlSafe(Arc::clone(&query.sql)));
        for claim in claims {
            q = q.bind(claim);
        }
        let rows = q.fetch_all(&mut *conn).await?;
        for row in rows {
            if let Some(key) = bucket_of_member(query.rule, actor, &row) {
                held.insert(key);
            }
        }
    }
    Ok(held)
}

fn bucket_of_member(rule: &RuleMeta, actor: &Actor, row: &sqlx::postgres::PgRow) -> Option<BucketKey> {
    use sqlx::Row;
    let mut index = 0;
    let mut params = Vec::with_capacity(rule.parameters.len());
    for param in rule.parameters {
        match param.source {
            ParamSource::Claim(claim) => params.push(param_text(&claim.value(actor)?)?),
            ParamSource::Membership { .. } => {
                let value: Option<String> = row.try_get(index).ok()?;
                params.push(value?);
                index += 1;
            }
        }
    }
    Some(BucketKey::new(rule.name, &params))
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine_kernel::rules::Claim;

    #[test]
    fn named_placeholders_become_numbered_binds() {
        let (sql, binds) =
            number_placeholders("SELECT x FROM t WHERE a = $user_id AND b = $claims.org AND c = $user_id AND d = '$'");
        assert_eq!(sql, "SELECT x FROM t WHERE a = $1 AND b = $2 AND c = $1 AND d = '$'");
        assert_eq!(binds, vec![Claim::UserId, Claim::Custom("org")]);
    }
}
