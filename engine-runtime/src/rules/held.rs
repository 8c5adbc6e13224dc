//! Which buckets an actor holds: claim-only rules from the actor's claims, membership rules by a
//! query filtered by the actor's claims, evaluated per request inside the caller's transaction
//! (so a mutation sees its own writes).

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::rules::buckets::{claim_bucket, claim_text};
use engine_kernel::rules::{ConstFilter, FilterValue, Membership, MembershipFilter, ParamSource, RawPiece, RuleMeta};
use engine_kernel::{Actor, App, BucketKey, Row, TableMeta};
use sqlx::PgConnection;

pub(crate) mod sqlite;

use super::selection::{column, live, push_as_column};
use crate::error::Result;
use crate::pg::sql::Sql;
use crate::pg::sql::{constant, ident};

/// A rule's membership query: the parameter values of the rule's buckets the actor holds.
#[derive(Debug, Clone)]
pub(crate) struct MembershipQuery {
    rule: &'static RuleMeta,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    /// Rows of a membership table matching its filters; `tracked` when the table is synced, so
    /// its rows carry the transaction that last wrote them (`_engine_xid`).
    Table { table: &'static TableMeta, filters: &'static [MembershipFilter], tracked: bool },
    /// Raw SQL, split at its actor placeholders.
    Raw(Vec<RawPiece<'static>>),
}

/// The membership queries of `app`'s rules.
pub(crate) fn compile(app: &App) -> Vec<MembershipQuery> {
    let mut queries = Vec::new();
    for rule in app.sync_rules().rules {
        let source = match rule.membership {
            None => continue,
            Some(Membership::Table { table, filters }) => Source::Table {
                table: app.table(table).expect("the app lists every rule table"),
                filters,
                tracked: !app.rule_index().selections(table).is_empty(),
            },
            Some(Membership::Raw { sql, .. }) => match engine_kernel::rules::split_raw_sql(sql) {
                Ok(pieces) => Source::Raw(pieces),
                Err(bad) => {
                    // `App::build` refuses such SQL; an app that got here holds nobody these buckets.
                    tracing::error!(
                        rule = rule.name,
                        placeholder = bad,
                        "raw membership SQL with an unknown placeholder"
                    );
                    continue;
                }
            },
        };
        queries.push(MembershipQuery { rule, source });
    }
    queries
}

impl MembershipQuery {
    /// The rule the query belongs to.
    pub(crate) fn rule(&self) -> &'static RuleMeta {
        self.rule
    }

    /// Whether the query reads a membership table (not raw SQL).
    pub(crate) fn is_raw(&self) -> bool {
        matches!(self.source, Source::Raw(_))
    }

    /// The bucket a row of `table` makes its member hold ([`RuleMeta::granted_by`]).
    pub(crate) fn granted_by(&self, table: &TableMeta, row: &Row) -> Option<BucketKey> {
        self.rule.granted_by(table, row)
    }

    /// `EXISTS (…)`: some live membership row grants bucket `key` (to anyone); `None` for a raw
    /// query, or a key that does not fit the rule.
    pub(crate) fn push_any_grant(&self, sql: &mut Sql, key: &BucketKey) -> Option<()> {
        let Source::Table { table, filters, .. } = &self.source else { return None };
        let params = key.params();
        if params.len() != self.rule.parameters.len() {
            return None;
        }
        let mut conditions = Vec::new();
        for (param, value) in self.rule.parameters.iter().zip(params) {
            let name = match param.source {
                ParamSource::Membership { column } => column,
                ParamSource::Claim(claim) => {
                    filters.iter().find(|f| matches!(f.value, FilterValue::Claim(c) if c == claim))?.column
                }
            };
            conditions.push((table.column(name)?, value));
        }
        sql.push(format_args!("EXISTS (SELECT 1 FROM {} AS m WHERE true", ident(table.name)));
        for filter in *filters {
            if let FilterValue::Const(value) = filter.value {
                sql.push(format_args!(" AND {} = {}", column("m", filter.column), constant(value)));
            }
        }
        for (member_column, value) in conditions {
            sql.push(format_args!(" AND {} = ", column("m", member_column.name)));
            push_as_column(sql, member_column, value);
        }
        if let Some(live) = live("m", table) {
            sql.push(" AND ").push(live);
        }
        sql.push(")");
        Some(())
    }

    /// Whether a membership row of this query's table matches one of `any_of`.
    pub(crate) fn row_matches(row: &Row, any_of: &[&[ConstFilter]]) -> bool {
        any_of.iter().any(|all| all.iter().all(|f| row.get(f.column) == Some(&f.value.to_json())))
    }

    /// `SELECT DISTINCT` of the membership-sourced parameters as text (`p0, p1, …`) of every
    /// bucket of the rule `actor` holds, through a membership row matching one of `write` when
    /// given; `None` when the actor lacks a claim the query needs (it then holds none of them).
    fn memberships(&self, sql: &mut Sql, actor: &Actor, write: Option<&[&[ConstFilter]]>) -> Option<()> {
        self.memberships_since(sql, actor, write, false)
    }

    /// [`memberships`](Self::memberships), and with `since` a last column `since`: for a synced
    /// membership table, the transaction that last wrote the oldest row giving the bucket (the
    /// actor has held it since then), as text; null otherwise.
    fn memberships_since(
        &self,
        sql: &mut Sql,
        actor: &Actor,
        write: Option<&[&[ConstFilter]]>,
        since: bool,
    ) -> Option<()> {
        let parameters: Vec<String> = self
            .rule
            .parameters
            .iter()
            .filter_map(|p| match p.source {
                ParamSource::Membership { column: name } => Some(name),
                ParamSource::Claim(_) => None,
            })
            .enumerate()
            .map(|(i, name)| format!("{}::text AS p{i}", column("m", name)))
            .collect();
        let grouped = since && matches!(self.source, Source::Table { tracked: true, .. });
        if grouped {
            sql.push(format_args!("SELECT {}, min(m._engine_xid)::text AS since FROM ", parameters.join(", ")));
        } else if since {
            sql.push(format_args!("SELECT DISTINCT {}, NULL::text AS since FROM ", parameters.join(", ")));
        } else {
            sql.push(format_args!("SELECT DISTINCT {} FROM ", parameters.join(", ")));
        }
        match &self.source {
            Source::Table { table, filters, .. } => {
                sql.push(format_args!("{} AS m WHERE true", ident(table.name)));
                for filter in *filters {
                    sql.push(format_args!(" AND {} = ", column("m", filter.column)));
                    match filter.value {
                        FilterValue::Claim(claim) => {
                            let filtered = table.column(filter.column).expect("rule columns exist");
                            push_as_column(sql, filtered, claim_text(claim, actor)?);
                        }
                        FilterValue::Const(value) => {
                            sql.push(constant(value));
                        }
                    }
                }
                if let Some(live) = live("m", table) {
                    sql.push(" AND ").push(live);
                }
                if let Some(any_of) = write {
                    let alternatives: Vec<String> = any_of
                        .iter()
                        .map(|all| {
                            let equalities: Vec<String> = all
                                .iter()
                                .map(|f| format!("{} = {}", column("m", f.column), constant(f.value)))
                                .chain(std::iter::once("true".to_owned()))
                                .collect();
                            format!("({})", equalities.join(" AND "))
                        })
                        .chain(std::iter::once("false".to_owned()))
                        .collect();
                    sql.push(format_args!(" AND ({})", alternatives.join(" OR ")));
                }
                if grouped {
                    let columns: Vec<String> = (1..=parameters.len()).map(|i| i.to_string()).collect();
                    sql.push(format_args!(" GROUP BY {}", columns.join(", ")));
                }
            }
            Source::Raw(_) if write.is_some() => return None,
            Source::Raw(pieces) => {
                sql.push("(");
                for piece in pieces {
                    match piece {
                        RawPiece::Sql(text) => sql.push(text),
                        placeholder => sql.push_bind(claim_text(placeholder.claim()?, actor)?),
                    };
                }
                sql.push(") AS m");
            }
        }
        Some(())
    }

    /// Whether `actor` holds bucket `key` of this query's rule now (as the connection sees it,
    /// its own transaction's writes included).
    pub(crate) async fn holds(&self, conn: &mut PgConnection, actor: &Actor, key: &BucketKey) -> Result<bool> {
        self.holds_through(conn, actor, key, None).await
    }

    /// Whether `actor` holds bucket `key` of this query's rule now through a membership row
    /// matching one of `write` (any row when `None`).
    pub(crate) async fn holds_through(
        &self,
        conn: &mut PgConnection,
        actor: &Actor,
        key: &BucketKey,
        write: Option<&[&[ConstFilter]]>,
    ) -> Result<bool> {
        let Some(params) = self.membership_params(actor, key) else { return Ok(false) };
        let mut sql = Sql::new("SELECT ");
        if self.push_exists(&mut sql, actor, &params, write).is_none() {
            return Ok(false);
        }
        Ok(sql.build_query_scalar::<bool>().fetch_one(&mut *conn).await?)
    }

    /// Whether `actor` holds bucket `key` now, and whether through a membership row matching one
    /// of `write`: [`holds`](Self::holds) and [`holds_through`](Self::holds_through) in one
    /// statement (one snapshot, one round trip) where the memberships are a table's rows.
    pub(crate) async fn holds_and_through(
        &self,
        conn: &mut PgConnection,
        actor: &Actor,
        key: &BucketKey,
        write: &[&[ConstFilter]],
    ) -> Result<(bool, bool)> {
        if !matches!(self.source, Source::Table { .. }) {
            let holds = self.holds(conn, actor, key).await?;
            let through = holds && self.holds_through(conn, actor, key, Some(write)).await?;
            return Ok((holds, through));
        }
        let Some(params) = self.membership_params(actor, key) else { return Ok((false, false)) };
        let mut sql = Sql::new("SELECT ");
        // A table's rows filtered by claims the actor lacks hold nothing, with or without `write`.
        if self.push_exists(&mut sql, actor, &params, None).is_none() {
            return Ok((false, false));
        }
        sql.push(", ");
        if self.push_exists(&mut sql, actor, &params, Some(write)).is_none() {
            return Ok((false, false));
        }
        Ok(sql.build_query_as::<(bool, bool)>().fetch_one(&mut *conn).await?)
    }

    /// Whether [`push_holds`](Self::push_holds) can ask, inside another statement, whether
    /// `actor` holds bucket `key`: the memberships are a table's rows, the bucket can be the
    /// actor's and the actor has every claim the query filters by.
    pub(crate) fn can_ask_within(&self, actor: &Actor, key: &BucketKey, write: Option<&[&[ConstFilter]]>) -> bool {
        self.push_holds(&mut Sql::new(""), actor, key, write).is_some()
    }

    /// `EXISTS (…)`: [`holds_through`](Self::holds_through) as a condition of another
    /// statement, evaluated in that statement's snapshot; `None` where
    /// [`can_ask_within`](Self::can_ask_within) is false.
    pub(crate) fn push_holds(
        &self,
        sql: &mut Sql,
        actor: &Actor,
        key: &BucketKey,
        write: Option<&[&[ConstFilter]]>,
    ) -> Option<()> {
        if !matches!(self.source, Source::Table { .. }) {
            return None;
        }
        let params = self.membership_params(actor, key)?;
        self.push_exists(sql, actor, &params, write)
    }

    /// The parameters of bucket `key` that memberships give, in order; `None` when the bucket
    /// cannot be the actor's (its parameters do not fit the rule, or a claim parameter is not the
    /// actor's).
    fn membership_params(&self, actor: &Actor, key: &BucketKey) -> Option<Vec<String>> {
        let params = key.params();
        if params.len() != self.rule.parameters.len() {
            return None;
        }
        let mut membership_params = Vec::new();
        for (param, value) in self.rule.parameters.iter().zip(params) {
            match param.source {
                ParamSource::Claim(claim) => {
                    if claim_text(claim, actor).as_deref() != Some(value.as_str()) {
                        return None;
                    }
                }
                ParamSource::Membership { .. } => membership_params.push(value),
            }
        }
        Some(membership_params)
    }

    /// `EXISTS (…)`: a membership row (matching one of `write`, when given) gives `actor` the
    /// bucket whose membership parameters are `params`; `None` when none can.
    fn push_exists(
        &self,
        sql: &mut Sql,
        actor: &Actor,
        params: &[String],
        write: Option<&[&[ConstFilter]]>,
    ) -> Option<()> {
        sql.push("EXISTS (SELECT 1 FROM (");
        self.memberships(sql, actor, write)?;
        sql.push(") AS h WHERE true");
        for (i, value) in params.iter().enumerate() {
            sql.push(format_args!(" AND h.p{i} = ")).push_bind(value.clone());
        }
        sql.push(")");
        Some(())
    }
}

/// Refuse an app whose raw membership query reads, as Postgres plans it, one of the app's tables
/// its `reads(...)` does not name: clients could write that table, and whom a change to it grants
/// cannot be told from raw SQL. The query is planned with every placeholder an empty text; a
/// table read only inside a function it calls is not seen.
pub(crate) async fn check_raw_reads(conn: &mut PgConnection, app: &App, queries: &[MembershipQuery]) -> Result<()> {
    for query in queries {
        let Source::Raw(pieces) = &query.source else { continue };
        let Some(Membership::Raw { reads, .. }) = query.rule.membership else { continue };
        let mut sql = Sql::new("EXPLAIN (FORMAT JSON) ");
        for piece in pieces {
            match piece {
                RawPiece::Sql(text) => sql.push(*text),
                _ => sql.push_bind(String::new()),
            };
        }
        let plan: serde_json::Value = sql.build_query_scalar().fetch_one(&mut *conn).await.map_err(|e| {
            crate::error::Error::config_from(
                format!("the raw membership query of sync rule `{}` cannot be planned", query.rule.name),
                e,
            )
        })?;
        let mut relations = BTreeSet::new();
        relations_of(&plan, &mut relations);
        let table =
            app.tables().iter().map(|def| def.meta()).find(|t| relations.contains(t.name) && !reads.contains(&t.name));
        if let Some(table) = table {
            return Err(crate::error::Error::config(format!(
                "the raw membership query of sync rule `{}` reads `{}`, which its `reads(...)` does not name: name it (`raw(\"…\", reads({}))`), so that only server code writes it",
                query.rule.name, table.name, table.name
            )));
        }
    }
    Ok(())
}

/// Every `"Relation Name"` of a plan in JSON.
fn relations_of<'a>(plan: &'a serde_json::Value, out: &mut BTreeSet<&'a str>) {
    match plan {
        serde_json::Value::Object(fields) => {
            for (key, value) in fields {
                match (key.as_str(), value) {
                    ("Relation Name", serde_json::Value::String(name)) => {
                        out.insert(name);
                    }
                    _ => relations_of(value, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| relations_of(item, out)),
        _ => {}
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
        held.extend(query.held_through(conn, actor, None).await?);
    }
    Ok(held)
}

impl MembershipQuery {
    /// Every bucket of this query's rule `actor` holds through a membership row matching one of
    /// `write` (any row when `None`).
    pub(crate) async fn held_through(
        &self,
        conn: &mut PgConnection,
        actor: &Actor,
        write: Option<&[&[ConstFilter]]>,
    ) -> Result<BTreeSet<BucketKey>> {
        let mut sql = Sql::new("");
        if self.memberships(&mut sql, actor, write).is_none() {
            return Ok(BTreeSet::new());
        }
        let rows = sql.build().fetch_all(&mut *conn).await?;
        Ok(rows.iter().filter_map(|row| bucket_of_member(self.rule, actor, row)).collect())
    }
}

fn bucket_of_member(rule: &RuleMeta, actor: &Actor, row: &sqlx::postgres::PgRow) -> Option<BucketKey> {
    use sqlx::Row;
    let values = (0..).map(|index| row.try_get::<Option<String>, _>(index).ok().flatten());
    bucket_of_values(rule, actor, values)
}

/// The bucket of `rule` whose membership-sourced parameters are `values`, in order (a `None`
/// makes none), and whose claim parameters are the actor's.
fn bucket_of_values(
    rule: &RuleMeta,
    actor: &Actor,
    mut values: impl Iterator<Item = Option<String>>,
) -> Option<BucketKey> {
    let mut params = Vec::with_capacity(rule.parameters.len());
    for param in rule.parameters {
        match param.source {
            ParamSource::Claim(claim) => params.push(claim_text(claim, actor)?),
            ParamSource::Membership { .. } => params.push(values.next()??),
        }
    }
    Some(BucketKey::new(rule.name, &params))
}

/// Every bucket `actor` holds through the membership `queries`, as one scalar subquery pushed
/// into `sql`: the text of a JSON array of `[query, parameter…, since]`, one per bucket, however
/// many membership rules the app has (`since` as [`memberships_since`](MembershipQuery::memberships_since)
/// gives it). [`held_from_json`] reads it back.
pub(crate) fn push_held_json(sql: &mut Sql, queries: &[MembershipQuery], actor: &Actor) {
    sql.push("(SELECT coalesce(json_agg(held.x), '[]')::text FROM (");
    let mut parts = 0;
    for (index, query) in queries.iter().enumerate() {
        // A query that needs a claim the actor lacks holds nothing (and stops part-way through
        // writing itself, so it is tried on a statement of its own first).
        if query.memberships_since(&mut Sql::new(""), actor, None, true).is_none() {
            continue;
        }
        if parts > 0 {
            sql.push(" UNION ALL ");
        }
        let count = query.rule.parameters.iter().filter(|p| matches!(p.source, ParamSource::Membership { .. })).count();
        let columns: String = (0..count).map(|p| format!(", q.p{p}")).collect();
        sql.push(format_args!("SELECT json_build_array({index}{columns}, q.since) AS x FROM ("));
        let _ = query.memberships_since(sql, actor, None, true);
        sql.push(") AS q");
        parts += 1;
    }
    if parts == 0 {
        sql.push("SELECT NULL::json AS x WHERE false");
    }
    sql.push(") AS held)");
}

/// The buckets `actor` holds: the claim buckets of the rules without memberships, and those of
/// [`push_held_json`]'s answer `json`; and for each bucket held through a synced membership
/// table, the transaction since which it is held.
pub(crate) fn held_from_json(
    app: &App,
    queries: &[MembershipQuery],
    actor: &Actor,
    json: &str,
) -> Result<(BTreeSet<BucketKey>, BTreeMap<BucketKey, u64>)> {
    let mut held: BTreeSet<BucketKey> = app
        .sync_rules()
        .rules
        .iter()
        .filter(|r| r.membership.is_none())
        .filter_map(|r| claim_bucket(r, actor))
        .collect();
    let mut since = BTreeMap::new();
    let rows: Vec<Vec<serde_json::Value>> = serde_json::from_str(json)
        .map_err(|err| crate::error::Error::internal(format!("reading the actor's memberships: {err}")))?;
    for row in rows {
        let Some((index, rest)) = row.split_first() else { continue };
        let Some((written, values)) = rest.split_last() else { continue };
        let Some(query) = index.as_u64().and_then(|i| queries.get(usize::try_from(i).ok()?)) else { continue };
        let values = values.iter().map(|v| v.as_str().map(str::to_owned));
        let Some(bucket) = bucket_of_values(query.rule, actor, values) else { continue };
        if let Some(xid) = written.as_str().and_then(|x| x.parse::<u64>().ok()) {
            since.insert(bucket.clone(), xid);
        }
        held.insert(bucket);
    }
    Ok((held, since))
}

/// The buckets `actor` is served (`docs/protocol.md#the-bucket-bound`): every bucket it holds,
/// or the part [`within_bound`] picks when it holds more than `bound`.
pub(crate) async fn served_buckets(
    conn: &mut PgConnection,
    app: &App,
    queries: &[MembershipQuery],
    actor: &Actor,
    bound: usize,
) -> Result<BTreeSet<BucketKey>> {
    let mut sql = Sql::new("SELECT ");
    push_held_json(&mut sql, queries, actor);
    let json: String = sql.build_query_scalar().fetch_one(&mut *conn).await?;
    let (held, since) = held_from_json(app, queries, actor, &json)?;
    Ok(within_bound(&held, &since, bound).map_or(held, |(served, _)| served))
}

/// The buckets served to an actor holding `held`, when it holds more than `bound`: the claim
/// buckets and those held through queries that tell no `since` first (the actor's own), then the
/// most recently granted (`since`, descending), ties by key; with how many of how many. `None`
/// when every held bucket is served. Deterministic, so consecutive pulls and the stream agree
/// on the part served until a grant or a revocation changes it (`docs/protocol.md#the-bucket-bound`).
pub(crate) fn within_bound(
    held: &BTreeSet<BucketKey>,
    since: &BTreeMap<BucketKey, u64>,
    bound: usize,
) -> Option<(BTreeSet<BucketKey>, engine_kernel::wire::Bounded)> {
    if held.len() <= bound {
        return None;
    }
    let mut order: Vec<&BucketKey> = held.iter().collect();
    order.sort_by_key(|bucket| (since.get(*bucket).map(|s| std::cmp::Reverse(*s)), *bucket));
    let served: BTreeSet<BucketKey> = order.into_iter().take(bound).cloned().collect();
    let bounded = engine_kernel::wire::Bounded { held: held.len() as u64, served: served.len() as u64 };
    Some((served, bounded))
}

#[cfg(test)]
mod bound_tests {
    use super::*;

    #[test]
    fn past_the_bound_the_own_and_the_most_recently_granted_buckets_are_served() {
        let key = |k: &str| BucketKey::parse(k).unwrap();
        let held: BTreeSet<BucketKey> =
            ["own/a", "shared/l1", "shared/l2", "shared/l3", "shared/l4"].into_iter().map(key).collect();
        let since: BTreeMap<BucketKey, u64> =
            [("shared/l1", 40), ("shared/l2", 10), ("shared/l3", 30), ("shared/l4", 30)]
                .into_iter()
                .map(|(k, s)| (key(k), s))
                .collect();
        assert_eq!(within_bound(&held, &since, 5), None, "within the bound, everything");
        let (served, bounded) = within_bound(&held, &since, 3).unwrap();
        assert_eq!(served, ["own/a", "shared/l1", "shared/l3"].into_iter().map(key).collect());
        assert_eq!((bounded.held, bounded.served), (5, 3));
        let (served, _) = within_bound(&held, &since, 4).unwrap();
        assert!(served.contains(&key("shared/l4")) && !served.contains(&key("shared/l2")), "ties by key");
    }
}
