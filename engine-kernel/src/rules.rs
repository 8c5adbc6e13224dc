//! Sync-rule metadata: what `#[engine::sync_rules]` records of each bucket definition, for the
//! server to turn into queries and the contract to describe. The no-leak lint has already run by
//! the time this exists: every selection here is scoped by equality to a bucket parameter, and
//! every parameter comes from an actor claim or an actor-scoped membership query.
//!
//! [`buckets`] applies the rules to rows and actors, and [`refusal`] words the writes they
//! refuse: both for the server and the clients alike.

use crate::column::SqlType;
use crate::table::Row;

pub mod buckets;
pub mod refusal;

/// Every bucket definition of an app.
#[derive(Debug, Clone, Copy)]
pub struct SyncRules {
    /// The rules, in declaration order.
    pub rules: &'static [RuleMeta],
    /// Tables only server code writes (jobs, admin code): client mutations may not write them,
    /// and their rows may lie in no bucket (`server_only(Table)`).
    pub server_only: &'static [&'static str],
}

impl SyncRules {
    /// The rule named `name`.
    pub fn rule(&self, name: &str) -> Option<&'static RuleMeta> {
        self.rules.iter().find(|r| r.name == name)
    }

    /// Whether only server code writes `table`.
    pub fn is_server_only(&self, table: &str) -> bool {
        self.server_only.contains(&table)
    }

    /// The rule whose raw membership query reads `table`, if one does: only server code writes
    /// such a table.
    pub fn raw_reader(&self, table: &str) -> Option<&'static RuleMeta> {
        self.rules
            .iter()
            .find(|rule| matches!(rule.membership, Some(Membership::Raw { reads, .. }) if reads.contains(&table)))
    }

    /// Every table some rule selects from (deduplicated, in first-use order).
    pub fn tables(&self) -> Vec<&'static str> {
        let mut tables = Vec::new();
        for rule in self.rules {
            for table in rule.tables() {
                if !tables.contains(&table) {
                    tables.push(table);
                }
            }
        }
        tables
    }
}

/// One bucket definition.
#[derive(Debug, Clone, Copy)]
pub struct RuleMeta {
    /// The rule's name: the first segment of its bucket keys.
    pub name: &'static str,
    /// The doc comment of the bucket definition.
    pub description: &'static str,
    /// The parameters, in key order.
    pub parameters: &'static [ParamMeta],
    /// Where membership-sourced parameters come from, if any do.
    pub membership: Option<Membership>,
    /// The rows a bucket holds.
    pub data: &'static [Selection],
    /// Which holders of a bucket may write which of its tables. A table with no entry is not
    /// written through this rule's buckets: nothing is writable that no rule says is.
    pub writes: &'static [WriteRule],
    /// The rules whose holders may put a row into a bucket of this rule they do not hold, when
    /// the row also lies in a bucket of theirs of that rule (which they may write).
    pub accepts: &'static [Accept],
    /// Whether a holder may delete its own membership row (leave the bucket) without any other
    /// write permission (`leave`).
    pub leave: bool,
    /// `invite(Member::accepted)`: a membership row is an invitation until its member accepts
    /// it. The column is a boolean of the membership table, and the membership query's filters
    /// include `column == true`, so a row grants nothing before. The member may change that one
    /// column of its own membership row from false to true, and nothing else
    /// ([`RuleIndex::is_accepting`](buckets::RuleIndex::is_accepting)); with `leave`, it may
    /// also delete a pending row (decline).
    pub invite: Option<&'static str>,
    /// `while(Other)`: the rule's buckets are held through rule `Other`'s membership query, so a
    /// bucket is held exactly while its actor holds the bucket of `Other` with the same
    /// membership parameters, and its rows (accepted from `Other`) leave with that membership.
    /// A membership row grants such a bucket only as it grants `Other`'s.
    pub held_while: Option<&'static str>,
    /// `anchor(Team::id == bucket.team_id)`: the row a bucket of the rule belongs to, one row of
    /// a table the rule selects, named by every parameter. No membership of a bucket whose
    /// anchor does not exist is written, nor a row put into it through `accept(...)`, unless the
    /// same mutation writes the anchor, and a new bucket's first rows include its anchor.
    pub anchor: Option<Selection>,
}

impl RuleMeta {
    /// The tables the rule's selections read (deduplicated, in order).
    pub fn tables(&self) -> Vec<&'static str> {
        let mut tables: Vec<&'static str> = Vec::new();
        for selection in self.data {
            if !tables.contains(&selection.table) {
                tables.push(selection.table);
            }
        }
        tables
    }

    /// The parameter named `name`.
    pub fn parameter(&self, name: &str) -> Option<&'static ParamMeta> {
        self.parameters.iter().find(|p| p.name == name)
    }

    /// Which memberships may write rows of `table` in a bucket of this rule; `None` when every
    /// holder may.
    pub fn write_rule(&self, table: &str) -> Option<&'static WriteRule> {
        self.writes.iter().find(|w| w.table == table)
    }
}

/// `write(Table)` or `write(Table: Member::role == "editor" || …)`: the holders of a bucket that
/// may write the bucket's rows of `table`, and which rows.
#[derive(Debug, Clone, Copy)]
pub struct WriteRule {
    /// The table the permission is about.
    pub table: &'static str,
    /// Alternatives, any of which suffices. One with no terms (`write(Table)`): every holder,
    /// every row.
    pub any_of: &'static [WriteAlternative],
}

impl WriteRule {
    /// Whether every holder of the bucket may write every row of the table (`write(Table)`).
    pub fn is_unconditional(&self) -> bool {
        self.any_of.iter().any(|alternative| alternative.member.is_empty() && alternative.row.is_empty())
    }

    /// The alternatives whose row terms hold on every one of `images` (the row before and after
    /// the write, as far as it has them) for `actor`: those left to decide by the actor's
    /// membership.
    pub fn applying_to<'a>(
        &self,
        images: &'a [&'a Row],
        actor: &'a crate::Actor,
    ) -> impl Iterator<Item = &'static WriteAlternative> + 'a {
        self.any_of.iter().filter(move |alternative| images.iter().all(|row| alternative.holds_on(row, actor)))
    }

    /// Whether some alternative looks at the row written (`row.column == …`).
    pub fn reads_rows(&self) -> bool {
        self.any_of.iter().any(|alternative| !alternative.row.is_empty())
    }
}

/// One alternative of a `write(...)` condition: a conjunction of equalities on the actor's
/// membership row (`Member::role == "admin"`) and of comparisons of the row written with
/// constants (`row.role != "owner"`) or with the actor's claims (`row.author_id ==
/// actor.user_id`), which must hold on the row both before and after the write.
#[derive(Debug, Clone, Copy)]
pub struct WriteAlternative {
    /// Equalities on columns of the rule's membership table (the actor's membership row).
    pub member: &'static [ConstFilter],
    /// Comparisons of the row written with constants and claims.
    pub row: &'static [RowTerm],
}

impl WriteAlternative {
    /// Whether every row term holds on `row` for `actor`.
    pub fn holds_on(&self, row: &Row, actor: &crate::Actor) -> bool {
        self.row.iter().all(|term| term.holds_on(row, actor))
    }
}

/// `row.column == value` or `row.column != value` in a `write(...)` condition, the value a
/// constant (`row.role != "owner"`) or an actor claim (`row.author_id == actor.user_id`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowTerm {
    /// The written table's column.
    pub column: &'static str,
    /// The constant or claim.
    pub value: FilterValue,
    /// `==` (true) or `!=` (false). A missing or null value equals nothing: no constant, no
    /// claim, and a claim the actor lacks equals no column.
    pub equal: bool,
}

impl RowTerm {
    /// Whether the term holds on `row` for `actor`. A claim equals a column whose value has the
    /// claim's text ([`buckets::claim_text`]), as a membership query compares them.
    pub fn holds_on(&self, row: &Row, actor: &crate::Actor) -> bool {
        let equals = match self.value {
            FilterValue::Const(value) => value.matches(row.get(self.column)),
            FilterValue::Claim(claim) => buckets::claim_equals(row.get(self.column), claim, actor),
        };
        equals == self.equal
    }

    /// The term as written in a rule (`row.role != "owner"`, `row.author_id == actor.user_id`).
    pub fn describe(&self) -> String {
        let op = if self.equal { "==" } else { "!=" };
        let value = match self.value {
            FilterValue::Const(value) => value.to_json().to_string(),
            FilterValue::Claim(claim) => claim.describe(),
        };
        format!("row.{} {op} {value}", self.column)
    }
}

/// `accept(Other)` or `accept(open(Other))`: the holders of `rule`'s buckets may put a row into a
/// bucket of the accepting rule they do not hold, when the row also lies in one of theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accept {
    /// The rule whose holders may put rows in.
    pub rule: &'static str,
    /// Whether any such holder may (an inbox); otherwise the bucket's own actor must hold the
    /// same bucket of `rule` the row lies in (a task assigned to a teammate).
    pub open: bool,
}

/// A bucket parameter.
#[derive(Debug, Clone, Copy)]
pub struct ParamMeta {
    /// The parameter's name.
    pub name: &'static str,
    /// Its type.
    pub sql_type: SqlType,
    /// Where its value comes from.
    pub source: ParamSource,
}

/// Where a bucket parameter's value comes from: never from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamSource {
    /// An actor claim.
    Claim(Claim),
    /// A column of the rule's membership query.
    Membership {
        /// The column (of the membership table, or of the raw query's result).
        column: &'static str,
    },
}

/// A claim of the actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// `actor.user_id`.
    UserId,
    /// `actor.owner_id`.
    OwnerId,
    /// `actor.claims.<name>`.
    Custom(&'static str),
}

impl Claim {
    /// The claim as written in a rule (`actor.user_id`, `actor.claims.org`).
    pub fn describe(self) -> String {
        match self {
            Claim::UserId => "actor.user_id".into(),
            Claim::OwnerId => "actor.owner_id".into(),
            Claim::Custom(name) => format!("actor.claims.{name}"),
        }
    }

    /// The claim written as [`describe`](Claim::describe) writes it. A custom claim's name is
    /// given by `intern`, which makes it live as long as the rules.
    pub fn parse(text: &str, intern: impl FnOnce(&str) -> &'static str) -> Option<Claim> {
        match text {
            "actor.user_id" => Some(Claim::UserId),
            "actor.owner_id" => Some(Claim::OwnerId),
            _ => match text.strip_prefix("actor.claims.") {
                Some(name) if !name.is_empty() => Some(Claim::Custom(intern(name))),
                _ => None,
            },
        }
    }

    /// The claim's value for `actor`, in JSON.
    pub fn value(self, actor: &crate::Actor) -> Option<serde_json::Value> {
        match self {
            Claim::UserId => Some(actor.user_id.clone().into()),
            Claim::OwnerId => Some(actor.owner_id.clone().into()),
            Claim::Custom(name) => actor.claims.get(name).cloned(),
        }
    }
}

/// The membership query of a rule: which parameter values the actor holds.
#[derive(Debug, Clone, Copy)]
pub enum Membership {
    /// Rows of `table` matching every filter; parameters are read from its columns.
    Table {
        /// The membership table.
        table: &'static str,
        /// Equalities, at least one against an actor claim.
        filters: &'static [MembershipFilter],
    },
    /// Raw SQL with actor placeholders (`$user_id`, `$owner_id`, `$claims.<name>`) bound as
    /// parameters; result columns named after the bucket parameters.
    Raw {
        /// The query.
        sql: &'static str,
        /// The app's tables it reads (`raw("…", reads(Table, …))`): whom a change to one grants
        /// cannot be told from raw SQL, so only server code writes them. The server refuses to
        /// start when the query reads an app table not named here.
        reads: &'static [&'static str],
    },
}

/// One piece of raw membership SQL, as [`split_raw_sql`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawPiece<'a> {
    /// SQL text, as written.
    Sql(&'a str),
    /// `$user_id`.
    UserId,
    /// `$owner_id`.
    OwnerId,
    /// `$claims.<name>`, with the claim's name.
    Claim(&'a str),
}

impl RawPiece<'static> {
    /// The actor claim a placeholder stands for (none for SQL text).
    pub fn claim(self) -> Option<Claim> {
        match self {
            RawPiece::Sql(_) => None,
            RawPiece::UserId => Some(Claim::UserId),
            RawPiece::OwnerId => Some(Claim::OwnerId),
            RawPiece::Claim(name) => Some(Claim::Custom(name)),
        }
    }
}

/// Raw membership SQL split into SQL text and actor placeholders: `$user_id`, `$owner_id` and
/// `$claims.<name>` (a name of letters, digits and `_`). Every `$` must start one of them; the
/// error is the text after the first `$` that does not (`1` for `$1`, `claims.a.b`, or empty
/// for a lone `$`). The grammar both the `#[engine::sync_rules]` lint and the server use.
///
/// ```
/// use engine_kernel::rules::{RawPiece, split_raw_sql};
/// assert_eq!(
///     split_raw_sql("SELECT team_id FROM members WHERE user_id = $user_id AND org = $claims.org."),
///     Ok(vec![
///         RawPiece::Sql("SELECT team_id FROM members WHERE user_id = "),
///         RawPiece::UserId,
///         RawPiece::Sql(" AND org = "),
///         RawPiece::Claim("org"),
///         RawPiece::Sql("."),
///     ])
/// );
/// assert_eq!(split_raw_sql("WHERE a = $1"), Err("1"));
/// assert_eq!(split_raw_sql("WHERE a = $claims.a.b"), Err("claims.a.b"));
/// ```
pub fn split_raw_sql(sql: &str) -> Result<Vec<RawPiece<'_>>, &str> {
    let mut pieces = Vec::new();
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        if at > 0 {
            pieces.push(RawPiece::Sql(&rest[..at]));
        }
        let after = &rest[at + 1..];
        let len = after.bytes().take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.').count();
        let name = after[..len].trim_end_matches('.');
        pieces.push(match name {
            "user_id" => RawPiece::UserId,
            "owner_id" => RawPiece::OwnerId,
            _ => match name.strip_prefix("claims.") {
                Some(claim) if !claim.is_empty() && !claim.contains('.') => RawPiece::Claim(claim),
                _ => return Err(name),
            },
        });
        rest = &after[name.len()..];
    }
    if !rest.is_empty() {
        pieces.push(RawPiece::Sql(rest));
    }
    Ok(pieces)
}

/// Whether a checked `accept(source)` on `rule` can be checked: the bucket's own actor (the
/// receiver) must hold the same bucket of `source` the row lies in, so `rule`'s parameters are
/// all claims (they name the receiver), `source` has a membership query, and every claim that
/// query reads is one of those. `Err` says what to write instead. An open accept needs nothing.
pub fn receiver_check(rule: &RuleMeta, source: &RuleMeta, accepted: &Accept) -> Result<(), String> {
    if accepted.open {
        return Ok(());
    }
    let open = format!("`accept(open({}))`", source.name);
    // A bucket held `while(source)` is held through the source's memberships by the actor its
    // claim parameters name: that actor is the receiver.
    if rule.membership.is_some() && rule.held_while != Some(source.name) {
        return Err(format!(
            "sync rule `{}` accepts rows from `{}` checked against the receiver, but its buckets are held through memberships, not by one actor: write {open} to let any holder of `{}` put rows in",
            rule.name, source.name, source.name
        ));
    }
    let provided: Vec<Claim> = rule
        .parameters
        .iter()
        .filter_map(|p| match p.source {
            ParamSource::Claim(claim) => Some(claim),
            ParamSource::Membership { .. } => None,
        })
        .collect();
    let needed: Vec<Claim> = match source.membership {
        None => {
            return Err(format!(
                "sync rule `{}` accepts rows from `{}` checked against the receiver, but `{}` has no membership: only its own actor holds its buckets; write {open} for an inbox anyone may write to",
                rule.name, source.name, source.name
            ));
        }
        Some(Membership::Table { filters, .. }) => filters
            .iter()
            .filter_map(|f| match f.value {
                FilterValue::Claim(claim) => Some(claim),
                FilterValue::Const(_) => None,
            })
            .collect(),
        Some(Membership::Raw { sql, .. }) => {
            split_raw_sql(sql).unwrap_or_default().into_iter().filter_map(RawPiece::claim).collect()
        }
    };
    let source_claims = source.parameters.iter().filter_map(|p| match p.source {
        ParamSource::Claim(claim) => Some(claim),
        ParamSource::Membership { .. } => None,
    });
    match needed.into_iter().chain(source_claims).find(|claim| !provided.contains(claim)) {
        None => Ok(()),
        Some(missing) => Err(format!(
            "sync rule `{}` accepts rows from `{}` checked against the receiver, but its parameters do not give the receiver's `{}`, which `{}`'s membership reads: write {open} to let any holder of `{}` put rows in",
            rule.name,
            source.name,
            missing.describe(),
            source.name,
            source.name
        )),
    }
}

/// `column == value` in a membership query.
#[derive(Debug, Clone, Copy)]
pub struct MembershipFilter {
    /// The membership table's column.
    pub column: &'static str,
    /// What it must equal.
    pub value: FilterValue,
}

/// The right-hand side of a membership equality, or of a row term of a `write(...)` condition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FilterValue {
    /// An actor claim.
    Claim(Claim),
    /// A constant.
    Const(ConstValue),
}

/// A constant in a rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ConstValue {
    /// `true` / `false`.
    Bool(bool),
    /// An integer literal.
    Int(i64),
    /// A string literal.
    Text(&'static str),
}

impl ConstValue {
    /// Whether `value` (a column's value in JSON) equals the constant: of the same kind and
    /// value; null or missing equals no constant.
    pub fn matches(self, value: Option<&serde_json::Value>) -> bool {
        use serde_json::Value;
        match (self, value) {
            (ConstValue::Bool(b), Some(Value::Bool(v))) => b == *v,
            (ConstValue::Int(i), Some(Value::Number(n))) => n.as_i64() == Some(i),
            (ConstValue::Text(t), Some(Value::String(s))) => t == s,
            _ => false,
        }
    }

    /// The constant in JSON.
    pub fn to_json(self) -> serde_json::Value {
        match self {
            ConstValue::Bool(b) => b.into(),
            ConstValue::Int(i) => i.into(),
            ConstValue::Text(s) => s.into(),
        }
    }
}

/// One table selection of a bucket: rows of `table` whose scope columns equal the bucket's
/// parameters and whose filter columns equal constants.
#[derive(Debug, Clone, Copy)]
pub struct Selection {
    /// The table.
    pub table: &'static str,
    /// `column == bucket.parameter` equalities (at least one).
    pub scope: &'static [ScopeEq],
    /// `column == constant` equalities.
    pub filters: &'static [ConstFilter],
}

/// `column == bucket.parameter`.
#[derive(Debug, Clone, Copy)]
pub struct ScopeEq {
    /// The table's column.
    pub column: &'static str,
    /// The bucket parameter.
    pub param: &'static str,
}

/// `column == constant`.
#[derive(Debug, Clone, Copy)]
pub struct ConstFilter {
    /// The table's column.
    pub column: &'static str,
    /// The constant.
    pub value: ConstValue,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_term_compares_the_row_with_the_actor() {
        let own = RowTerm { column: "author_id", value: FilterValue::Claim(Claim::UserId), equal: true };
        let not_own = RowTerm { equal: false, ..own };
        let team = RowTerm { column: "team", value: FilterValue::Claim(Claim::Custom("team")), equal: true };
        let ann = crate::Actor::new("ann", "ann-owner").with_claim("team", 7);
        let row = |value: serde_json::Value| -> Row {
            [("author_id".to_owned(), value.clone()), ("team".to_owned(), value)].into_iter().collect()
        };
        assert!(own.holds_on(&row("ann".into()), &ann) && !not_own.holds_on(&row("ann".into()), &ann));
        assert!(!own.holds_on(&row("bob".into()), &ann) && not_own.holds_on(&row("bob".into()), &ann));
        // A null or missing column equals no claim.
        assert!(!own.holds_on(&row(serde_json::Value::Null), &ann) && not_own.holds_on(&Row::new(), &ann));
        // A custom claim compares by its text, as a membership query does; one the actor lacks
        // equals nothing, not even a missing column.
        assert!(team.holds_on(&row(7.into()), &ann) && !team.holds_on(&row(8.into()), &ann));
        assert!(!team.holds_on(&Row::new(), &crate::Actor::new("bob", "bob")));
        assert_eq!(own.describe(), "row.author_id == actor.user_id");
        assert_eq!(RowTerm { equal: false, ..team }.describe(), "row.team != actor.claims.team");
    }

    #[test]
    fn raw_sql_has_only_actor_placeholders() {
        use RawPiece::{Claim as C, OwnerId, Sql, UserId};
        assert_eq!(split_raw_sql("select 1"), Ok(vec![Sql("select 1")]));
        assert_eq!(split_raw_sql("$user_id$owner_id"), Ok(vec![UserId, OwnerId]));
        assert_eq!(split_raw_sql("a = $claims.org_id)"), Ok(vec![Sql("a = "), C("org_id"), Sql(")")]));
        for bad in ["where a = $1", "where a = $team", "where a = $claims.a.b", "where a = $claims.", "d = '$'"] {
            assert!(split_raw_sql(bad).is_err(), "{bad}");
        }
        assert_eq!(split_raw_sql("d = '$'"), Err(""));
        let pieces = split_raw_sql("x = $claims.team").unwrap();
        assert_eq!(pieces[1].claim(), Some(Claim::Custom("team")));
        assert_eq!(pieces[0].claim(), None);
    }
}
