//! Which buckets a row lies in, which a membership row grants, and which a claim-only rule gives
//! an actor: the sync rules applied to values in Rust, by the server (`engine-runtime`) and by
//! the clients' offline evaluation of the write rules alike (`docs/design.md` §4). The same
//! rules applied in SQL live in the server's store (membership queries and the change-tracking
//! triggers); both produce the same canonical bucket keys.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Claim, FilterValue, Membership, ParamSource, RuleMeta, Selection, SyncRules};
use crate::{Actor, BucketKey, Row, TableMeta};

/// One selection of a rule, with the rule it belongs to: which rows of its table a bucket of the
/// rule holds. The model both evaluations read: [`RuleSelection::bucket_of`] here, in Rust, and
/// the selection compiler of the server's Postgres store, in SQL.
#[derive(Debug, Clone)]
pub struct RuleSelection {
    /// The rule.
    pub rule: &'static RuleMeta,
    /// One of its selections.
    pub selection: &'static Selection,
    /// The column that gives each parameter its value (the first that the selection compares
    /// with it), in parameter order.
    scope: Vec<&'static str>,
    /// Every further column compared with a parameter, and the column that gives it: a row is
    /// in the bucket only when the two are equal.
    ties: Vec<(&'static str, &'static str)>,
}

impl RuleSelection {
    /// `selection` of `rule`, its columns read once.
    pub fn new(rule: &'static RuleMeta, selection: &'static Selection) -> Self {
        let mut scope = Vec::with_capacity(rule.parameters.len());
        let mut ties = Vec::new();
        for param in rule.parameters {
            let mut columns = selection.scope.iter().filter(|s| s.param == param.name).map(|s| s.column);
            let first = columns.next().expect("the lint makes every selection scope every parameter");
            scope.push(first);
            ties.extend(columns.filter(|c| *c != first).map(|c| (c, first)));
        }
        RuleSelection { rule, selection, scope, ties }
    }

    /// The column that gives each of the rule's parameters its value, in parameter order.
    pub fn scope_columns(&self) -> &[&'static str] {
        &self.scope
    }

    /// Each further column compared with a parameter, with the column of
    /// [`scope_columns`](Self::scope_columns) it must equal.
    pub fn ties(&self) -> &[(&'static str, &'static str)] {
        &self.ties
    }

    /// The bucket of `row` under this selection, if the row passes its filters. (Whether the row
    /// is live is the table's business: see [`RuleIndex::row_buckets`].)
    pub fn bucket_of(&self, row: &Row) -> Option<BucketKey> {
        let passes = self.selection.filters.iter().all(|f| f.value.matches(row.get(f.column)));
        let tied = self.ties.iter().all(|(column, first)| {
            let text = |c: &str| row.get(c).and_then(param_text);
            text(column).is_some() && text(column) == text(first)
        });
        if !passes || !tied {
            return None;
        }
        let params = self.scope.iter().map(|c| param_text(row.get(*c)?)).collect::<Option<Vec<_>>>()?;
        Some(BucketKey::new(self.rule.name, &params))
    }
}

/// The text form of a value as a bucket parameter (`ParamValue::to_param`, and Postgres' `::text`).
/// A number's is [`number_text`]'s: the canonical text the clients compute too.
pub fn param_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(number_text(n)),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The canonical text of a JSON number (`docs/protocol.md#bucket-keys`): an integer read as one
/// in decimal, exactly; any other number as ECMAScript's `Number.prototype.toString` writes the
/// `f64`, so `7.0` is `7` (as an integer column holds it) and `1e21` is `1e+21`, what the
/// TypeScript client's `String(n)` gives. Not serde_json's `7.0` and `1e21`: a claim `7.0` would
/// then name another bucket than the row `7` and fail Postgres' `'7.0'::int8`.
pub fn number_text(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() => ecmascript_text(f),
        _ => n.to_string(),
    }
}

/// ECMAScript's `Number::toString(f)` for a finite `f` (ECMA-262 §6.1.6.1.20): the shortest
/// digits that read back as `f`, in positional notation from 1e-7 up to 1e21, else exponential
/// with a sign (`1e+21`, `1.5e-7`).
fn ecmascript_text(f: f64) -> String {
    if f == 0.0 {
        return "0".to_owned();
    }
    // `{:e}` writes the shortest round-trip digits: `-1.5e-7`.
    let exponential = format!("{:e}", f.abs());
    let (mantissa, exponent) = exponential.split_once('e').expect("`{:e}` writes an exponent");
    let digits = mantissa.replace('.', "");
    let k = digits.len() as i32;
    let n = exponent.parse::<i32>().expect("`{:e}` writes a decimal exponent") + 1;
    let sign = if f < 0.0 { "-" } else { "" };
    let zeros = |count: i32| "0".repeat(count.max(0) as usize);
    let text = if k <= n && n <= 21 {
        format!("{digits}{}", zeros(n - k))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", zeros(-n))
    } else {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { String::new() } else { format!(".{rest}") };
        format!("{first}{point}e{}{}", if n > 0 { "+" } else { "-" }, (n - 1).abs())
    };
    format!("{sign}{text}")
}

/// The sync rules of an app, indexed by table.
#[derive(Debug, Clone)]
pub struct RuleIndex {
    rules: SyncRules,
    tables: Vec<(&'static TableMeta, Vec<RuleSelection>)>,
    /// Per rule, a digest of which rows its buckets hold (parameters and selections, not the
    /// membership query): when it differs from a cursor's, the cursor's rows of that rule are
    /// not what the rule selects now.
    versions: BTreeMap<&'static str, String>,
}

impl RuleIndex {
    /// The index of `rules` over `tables` (an app's: [`App::rule_index`](crate::App::rule_index)).
    pub fn new(tables: impl IntoIterator<Item = &'static TableMeta>, rules: &SyncRules) -> Self {
        let tables = tables
            .into_iter()
            .map(|meta| {
                let selections = rules
                    .rules
                    .iter()
                    .flat_map(|rule| {
                        rule.data
                            .iter()
                            .filter(move |s| s.table == meta.name)
                            .map(move |selection| RuleSelection::new(rule, selection))
                    })
                    .collect();
                (meta, selections)
            })
            .collect();
        let versions = rules.rules.iter().map(|rule| (rule.name, rule_version(rule))).collect();
        RuleIndex { rules: *rules, tables, versions }
    }

    /// The rules indexed.
    pub fn rules(&self) -> &SyncRules {
        &self.rules
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&'static TableMeta> {
        self.tables.iter().map(|(table, _)| *table).find(|table| table.name == name)
    }

    /// The version of rule `rule`: a digest of which rows its buckets hold (its parameters and
    /// selections, not its membership query). When it differs from a cursor's, the cursor's rows of
    /// that rule are not what the rule selects now.
    pub fn version(&self, rule: &str) -> Option<&str> {
        self.versions.get(rule).map(String::as_str)
    }

    /// The selections that read `table`.
    pub fn selections(&self, table: &str) -> &[RuleSelection] {
        self.tables.iter().find(|(t, _)| t.name == table).map_or(&[], |(_, s)| s.as_slice())
    }

    /// The selections of the rule named `rule`.
    pub fn rule_selections<'a>(&'a self, rule: &'a str) -> impl Iterator<Item = &'a RuleSelection> + 'a {
        self.tables.iter().flat_map(|(_, selections)| selections).filter(move |s| s.rule.name == rule)
    }

    /// The buckets `row` of `table` is in. A soft-deleted row is in none: clients see it as a
    /// tombstone.
    pub fn row_buckets(&self, table: &TableMeta, row: &Row) -> BTreeSet<BucketKey> {
        if !table.is_live(row) {
            return BTreeSet::new();
        }
        self.selections(table.name).iter().filter_map(|s| s.bucket_of(row)).collect()
    }

    /// The buckets a row of `table` counts as lying in for a write (`docs/design.md` §4): the
    /// buckets its rule selections put it in and, for a live membership row, the bucket it
    /// grants. A rule held `while(...)` another's grants nothing of its own: its grants are the
    /// other rule's.
    pub fn write_buckets(&self, table: &TableMeta, row: &Row) -> BTreeSet<BucketKey> {
        let mut buckets = self.row_buckets(table, row);
        buckets.extend(self.granting().filter_map(|rule| rule.granted_by(table, row)));
        buckets
    }

    /// The rules whose membership rows grant buckets of their own: not those held `while(...)`
    /// another's, whose buckets a membership row grants only as it grants the other's.
    pub fn granting(&self) -> impl Iterator<Item = &'static RuleMeta> + '_ {
        self.rules.rules.iter().filter(|rule| rule.held_while.is_none())
    }

    /// Whether the removal of `row` of `table` is `actor` leaving a bucket: a live membership
    /// row of a rule with `leave`, through which the actor itself holds the bucket.
    /// A pending invitation of a rule with `invite(...)` counts: removing it is declining.
    pub fn is_leaving(&self, table: &TableMeta, row: &Row, actor: &Actor) -> bool {
        self.granting()
            .any(|rule| rule.leave && rule.invited_to(table, row).is_some() && rule.is_members_own(row, actor))
    }

    /// Whether changing `before` of `table` into `after` is `actor` accepting an invitation: a
    /// live membership row of a rule with `invite(column)`, the actor's own, whose `column` goes
    /// from false to true while every other column keeps its value. Nothing else of an
    /// invitation is the member's to write: not its role, not whose it is.
    pub fn is_accepting(&self, table: &TableMeta, before: &Row, after: &Row, actor: &Actor) -> bool {
        self.granting().any(|rule| {
            let Some(column) = rule.invite else { return false };
            let flag = |row: &Row| row.get(column).and_then(Value::as_bool);
            let others_kept = table.columns.iter().all(|c| c.name == column || before.get(c.name) == after.get(c.name));
            flag(before) == Some(false)
                && flag(after) == Some(true)
                && others_kept
                && rule.invited_to(table, before).is_some()
                && rule.is_members_own(before, actor)
        })
    }

    /// The bucket whose invitation writing `after` (over `before`, none for an insert) accepts
    /// for a member other than `actor`: a membership row of a rule with `invite(column)` whose
    /// `column` is true where the same member's row was not accepted. Only the invited member
    /// accepts an invitation; a row written accepted by its own member (an owner's membership
    /// of what it creates) is not refused here.
    pub fn accepted_for_another(
        &self,
        table: &TableMeta,
        before: Option<&Row>,
        after: &Row,
        actor: &Actor,
    ) -> Option<BucketKey> {
        self.granting().find_map(|rule| {
            let column = rule.invite?;
            let bucket = rule.granted_by(table, after)?;
            let accepted = |row: &Row| row.get(column).and_then(Value::as_bool) == Some(true);
            let was_accepted = before.is_some_and(|before| {
                accepted(before)
                    && rule.granted_by(table, before).as_ref() == Some(&bucket)
                    && rule.is_same_member(before, after)
            });
            (!was_accepted && !rule.is_members_own(after, actor)).then_some(bucket)
        })
    }

    /// The columns of `table` whose values decide the buckets a row is in: scope and filter
    /// columns of its selections, and its soft-delete column.
    pub fn deciding_columns(&self, table: &TableMeta) -> Vec<&'static str> {
        let mut columns: Vec<&'static str> = table.soft_delete.into_iter().collect();
        for s in self.selections(table.name) {
            columns.extend(s.selection.scope.iter().map(|eq| eq.column));
            columns.extend(s.selection.filters.iter().map(|f| f.column));
        }
        columns.sort_unstable();
        columns.dedup();
        columns
    }

    /// The synced tables.
    pub fn synced_tables(&self) -> impl Iterator<Item = &'static TableMeta> + '_ {
        self.tables.iter().filter(|(_, s)| !s.is_empty()).map(|(t, _)| *t)
    }
}

/// A digest of what rows a rule's buckets hold: its parameters' names and types, and each
/// selection's table, scope, filters, in a canonical order.
fn rule_version(rule: &RuleMeta) -> String {
    use sha2::{Digest, Sha256};
    let mut selections: Vec<String> = rule
        .data
        .iter()
        .map(|s| {
            let mut scope: Vec<String> = s.scope.iter().map(|eq| format!("{}={}", eq.column, eq.param)).collect();
            scope.sort();
            let mut filters: Vec<String> = s.filters.iter().map(|f| format!("{}={:?}", f.column, f.value)).collect();
            filters.sort();
            format!("{}({};{})", s.table, scope.join(","), filters.join(","))
        })
        .collect();
    selections.sort();
    let params: Vec<String> = rule.parameters.iter().map(|p| format!("{}:{}", p.name, p.sql_type.name())).collect();
    let text = format!("{}|{}|{}", rule.name, params.join(","), selections.join("|"));
    Sha256::digest(text.as_bytes())[..6].iter().map(|b| format!("{b:02x}")).collect()
}

/// The bucket a rule whose parameters all come from claims gives `actor`, if the actor has every
/// claim it needs.
pub fn claim_bucket(rule: &RuleMeta, actor: &Actor) -> Option<BucketKey> {
    let params = rule
        .parameters
        .iter()
        .map(|p| match p.source {
            ParamSource::Claim(claim) => param_text(&claim.value(actor)?),
            ParamSource::Membership { .. } => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(BucketKey::new(rule.name, &params))
}

/// The actor whose claims give bucket `key` of `rule`: the bucket's one holder, as far as the
/// rule's claim parameters tell its claims (the others are empty). A claim bucket, or one held
/// `while(...)` another's (by the actor its claims name, through that one's memberships).
/// `None` for another rule with a membership query, or a key that does not fit the rule.
pub fn claim_actor(rule: &RuleMeta, key: &BucketKey) -> Option<Actor> {
    if rule.membership.is_some() && rule.held_while.is_none() {
        return None;
    }
    let params = key.params();
    if params.len() != rule.parameters.len() {
        return None;
    }
    let mut actor = Actor::new("", "");
    for (param, value) in rule.parameters.iter().zip(params) {
        match param.source {
            ParamSource::Claim(Claim::UserId) => actor.user_id = value,
            ParamSource::Claim(Claim::OwnerId) => actor.owner_id = value,
            ParamSource::Claim(Claim::Custom(name)) => actor = actor.with_claim(name, value),
            ParamSource::Membership { .. } if rule.held_while.is_some() => {}
            ParamSource::Membership { .. } => return None,
        }
    }
    Some(actor)
}

impl RuleMeta {
    /// The bucket of this rule a row of `table` makes its member hold, if it is a live row of
    /// the rule's membership table matching its constant filters: its parameters are read from
    /// the row (a claim parameter from the column the query compares with that claim). `None`
    /// for a rule without a membership table, another table, or a row that grants nothing. A
    /// rule held `while(...)` another's is answered too: whether its grants count is the
    /// caller's business.
    pub fn granted_by(&self, table: &TableMeta, row: &Row) -> Option<BucketKey> {
        let Some(Membership::Table { table: members, filters }) = self.membership else { return None };
        if members != table.name || !table.is_live(row) {
            return None;
        }
        for filter in filters {
            if let FilterValue::Const(value) = filter.value
                && row.get(filter.column) != Some(&value.to_json())
            {
                return None;
            }
        }
        let mut params = Vec::with_capacity(self.parameters.len());
        for param in self.parameters {
            let column = match param.source {
                ParamSource::Membership { column } => column,
                ParamSource::Claim(claim) => {
                    filters.iter().find(|f| matches!(f.value, FilterValue::Claim(c) if c == claim))?.column
                }
            };
            params.push(param_text(row.get(column)?)?);
        }
        Some(BucketKey::new(self.name, &params))
    }

    /// The bucket a row of `table` grants or, for a pending invitation of a rule with
    /// `invite(column)`, would grant once accepted: [`granted_by`](Self::granted_by) without
    /// the invitation column's filter.
    pub fn invited_to(&self, table: &TableMeta, row: &Row) -> Option<BucketKey> {
        let Some(column) = self.invite else { return self.granted_by(table, row) };
        let mut accepted = row.clone();
        accepted.insert(column.to_owned(), Value::Bool(true));
        self.granted_by(table, &accepted)
    }

    /// Whether `row` of the rule's membership table is the membership row of `actor` itself:
    /// every column the membership query compares with a claim holds the actor's claim
    /// ([`claim_equals`]: a null or missing column is no one's, even for an actor that lacks
    /// the claim). Never for a rule without a membership table.
    pub fn is_members_own(&self, row: &Row, actor: &Actor) -> bool {
        let Some(Membership::Table { filters, .. }) = self.membership else { return false };
        filters.iter().all(|filter| match filter.value {
            FilterValue::Claim(claim) => claim_equals(row.get(filter.column), claim, actor),
            FilterValue::Const(_) => true,
        })
    }

    /// Whether two rows of the rule's membership table are memberships of the same member:
    /// every column the membership query compares with a claim holds the same value.
    pub fn is_same_member(&self, one: &Row, other: &Row) -> bool {
        let Some(Membership::Table { filters, .. }) = self.membership else { return false };
        filters.iter().all(|filter| match filter.value {
            FilterValue::Claim(_) => one.get(filter.column) == other.get(filter.column),
            FilterValue::Const(_) => true,
        })
    }
}

/// The text of `actor`'s claim, as a bucket parameter and as bound into a membership query.
pub fn claim_text(claim: Claim, actor: &Actor) -> Option<String> {
    param_text(&claim.value(actor)?)
}

/// Whether a column's `value` equals `actor`'s claim, as a membership query compares them: the
/// same text. A null or missing value, or a claim the actor lacks, equals nothing (not each
/// other: SQL's `NULL = NULL` is not true either).
pub fn claim_equals(value: Option<&Value>, claim: Claim, actor: &Actor) -> bool {
    let text = value.and_then(param_text);
    text.is_some() && text == claim_text(claim, actor)
}

#[cfg(test)]
mod tests {
    use crate::SqlType;
    use crate::rules::{MembershipFilter, ParamMeta, ScopeEq};
    use serde_json::json;

    use super::*;

    /// `data(Msg::sender == bucket.u && Msg::recipient == bucket.u)`: a parameter compared with
    /// two columns.
    static SELECTION: Selection = Selection {
        table: "msgs",
        scope: &[ScopeEq { column: "sender", param: "u" }, ScopeEq { column: "recipient", param: "u" }],
        filters: &[],
    };
    static RULE: RuleMeta = RuleMeta {
        name: "self",
        description: "",
        parameters: &[ParamMeta { name: "u", sql_type: SqlType::Text, source: ParamSource::Claim(Claim::UserId) }],
        membership: None,
        data: std::slice::from_ref(&SELECTION),
        writes: &[],
        accepts: &[],
        leave: false,
        invite: None,
        held_while: None,
        anchor: None,
    };

    /// `membership(Member::org == actor.claims.org && Member::user == actor.user_id)`.
    static MEMBER_FILTERS: [MembershipFilter; 2] = [
        MembershipFilter { column: "org", value: FilterValue::Claim(Claim::Custom("org")) },
        MembershipFilter { column: "user", value: FilterValue::Claim(Claim::UserId) },
    ];
    static MEMBERS: RuleMeta = RuleMeta {
        name: "members",
        description: "",
        parameters: &[ParamMeta {
            name: "org",
            sql_type: SqlType::Text,
            source: ParamSource::Claim(Claim::Custom("org")),
        }],
        membership: Some(Membership::Table { table: "members", filters: &MEMBER_FILTERS }),
        data: &[],
        writes: &[],
        accepts: &[],
        leave: true,
        invite: None,
        held_while: None,
        anchor: None,
    };

    #[test]
    fn a_membership_row_is_the_actors_own_only_where_every_claim_column_holds_its_claim() {
        let ann = Actor::new("ann", "ann");
        let acme = Actor::new("ann", "ann").with_claim("org", "acme");
        let seven = Actor::new("ann", "ann").with_claim("org", 7.0);
        let row = |value: Value| json!({"org": value, "user": "ann"}).as_object().unwrap().clone();
        let mut missing = row(Value::Null);
        missing.remove("org");
        let table: [(&str, Row, &Actor, bool); 8] = [
            ("the claim's text", row(json!("acme")), &acme, true),
            ("another text", row(json!("other")), &acme, false),
            ("a number and the claim's text", row(json!(7)), &seven, true),
            ("a null column, a claim", row(Value::Null), &acme, false),
            ("a column, a claim the actor lacks", row(json!("acme")), &ann, false),
            ("a null column, a claim the actor lacks", row(Value::Null), &ann, false),
            ("a missing column, a claim the actor lacks", missing, &ann, false),
            ("another user", json!({"org": "acme", "user": "bob"}).as_object().unwrap().clone(), &acme, false),
        ];
        for (what, row, actor, own) in table {
            assert_eq!(MEMBERS.is_members_own(&row, actor), own, "{what}");
        }
    }

    #[test]
    fn a_parameter_compared_with_two_columns_needs_both() {
        let selection = RuleSelection::new(&RULE, &SELECTION);
        assert_eq!(selection.scope_columns(), ["sender"]);
        assert_eq!(selection.ties(), [("recipient", "sender")]);
        let row = |sender: &str, recipient: &str| {
            json!({"sender": sender, "recipient": recipient}).as_object().unwrap().clone()
        };
        assert_eq!(selection.bucket_of(&row("ann", "ann")), Some(BucketKey::new("self", &["ann"])));
        assert_eq!(selection.bucket_of(&row("ann", "bob")), None);
        let mut missing = row("ann", "ann");
        missing.insert("recipient".into(), serde_json::Value::Null);
        assert_eq!(selection.bucket_of(&missing), None);
    }
}
