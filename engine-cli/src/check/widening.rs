//! `engine check --against`: how a new app's sync rules change who may read or write rows, next
//! to an old app's. A [`Change`] widens when someone may read or write rows they could not
//! before, and narrows when someone may no longer.
//!
//! Rules are matched by name, then compared part by part: parameters, membership query,
//! selections per table, `write` per table, `leave`, `accept`, and the app's `server_only`
//! tables. A change whose effect cannot be told from the rules alone (a rewritten membership
//! query) counts as a widening to review. A gate that misses a widening costs more than one that
//! asks. `docs/design.md` §4 states what each part permits.

use std::collections::BTreeSet;
use std::fmt;

use engine_kernel::rules::{
    Accept, ConstFilter, FilterValue, Membership, MembershipFilter, ParamSource, RuleMeta, Selection, SyncRules,
    WriteRule,
};

/// Whether a change lets more or fewer actors read or write rows.
///
/// Widenings sort first, so a report leads with what needs review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Effect {
    /// Someone may read or write rows they could not before.
    Widens,
    /// Someone may no longer read or write rows they could.
    Narrows,
}

/// What a change is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Access {
    /// Which rows an actor's buckets hold.
    Read,
    /// Which rows a client mutation may write.
    Write,
}

/// One change between two apps' sync rules, as one line of the report.
///
/// The field order is the report's order: widenings first, then by rule and table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Change {
    /// Widening or narrowing.
    pub(crate) effect: Effect,
    /// The rule it is in; none for `server_only`, which is the app's.
    pub(crate) rule: Option<&'static str>,
    /// The table it is about; none for what concerns a whole rule.
    pub(crate) table: Option<&'static str>,
    /// Reading or writing.
    pub(crate) access: Access,
    /// What changed, with the rules' own syntax in backticks.
    pub(crate) what: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let effect = match self.effect {
            Effect::Widens => "widens",
            Effect::Narrows => "narrows",
        };
        let access = match self.access {
            Access::Read => "read",
            Access::Write => "write",
        };
        write!(f, "{effect} {access}")?;
        if let Some(table) = self.table {
            write!(f, " of `{table}`")?;
        }
        if let Some(rule) = self.rule {
            write!(f, " in rule `{rule}`")?;
        }
        write!(f, ": {}", self.what)
    }
}

/// Every change from `old` to `new`, in report order, each once.
pub(crate) fn compare(old: &SyncRules, new: &SyncRules) -> Vec<Change> {
    let mut changes = Changes::default();
    for &table in new.server_only {
        if !old.is_server_only(table) {
            changes.at(None, Some(table)).narrows(Access::Write, "now server-only");
        }
    }
    for &table in old.server_only {
        if !new.is_server_only(table) {
            changes.at(None, Some(table)).widens(Access::Write, "no longer server-only");
        }
    }
    for rule in new.rules {
        match old.rule(rule.name) {
            Some(before) => compare_rule(before, rule, &mut changes),
            None => {
                changes.at(Some(rule.name), None).widens(Access::Read, "new rule");
                // A new rule is compared with itself emptied of everything it grants, so each
                // table it selects or writes gets its own line.
                let empty = RuleMeta { data: &[], writes: &[], accepts: &[], leave: false, ..*rule };
                compare_rule(&empty, rule, &mut changes);
            }
        }
    }
    for rule in old.rules {
        if new.rule(rule.name).is_none() {
            changes.at(Some(rule.name), None).narrows(Access::Read, "rule removed");
        }
    }
    let mut list = changes.list;
    list.sort();
    list.dedup();
    list
}

// Every field of the rule types, named: a field added to one (a new way to grant reads or
// writes) does not compile until `compare` compares it. A rule's `description` grants nothing.
const _: fn(&SyncRules, &RuleMeta, &Selection, &WriteRule, &Accept) = |rules, rule, selection, write, accept| {
    let SyncRules { rules: _, server_only: _ } = rules;
    let RuleMeta {
        name: _,
        description: _,
        parameters: _,
        membership: _,
        data: _,
        writes: _,
        accepts: _,
        leave: _,
        invite: _,
        held_while: _,
        anchor: _,
    } = rule;
    let Selection { table: _, scope: _, filters: _ } = selection;
    let WriteRule { table: _, any_of: _ } = write;
    let Accept { rule: _, open: _ } = accept;
};

/// The changes found so far.
#[derive(Default)]
struct Changes {
    list: Vec<Change>,
}

impl Changes {
    /// Where the next change is: `rule` and `table`.
    fn at(&mut self, rule: Option<&'static str>, table: Option<&'static str>) -> At<'_> {
        At { changes: self, rule, table }
    }
}

/// A rule and table that changes are recorded against.
struct At<'a> {
    changes: &'a mut Changes,
    rule: Option<&'static str>,
    table: Option<&'static str>,
}

impl At<'_> {
    fn record(&mut self, effect: Effect, access: Access, what: impl Into<String>) {
        let change = Change { effect, rule: self.rule, table: self.table, access, what: what.into() };
        self.changes.list.push(change);
    }

    fn widens(&mut self, access: Access, what: impl Into<String>) {
        self.record(Effect::Widens, access, what);
    }

    fn narrows(&mut self, access: Access, what: impl Into<String>) {
        self.record(Effect::Narrows, access, what);
    }
}

fn compare_rule(old: &RuleMeta, new: &RuleMeta, changes: &mut Changes) {
    parameters(old, new, &mut changes.at(Some(new.name), None));
    membership(old.membership, new.membership, &mut changes.at(Some(new.name), None));
    let tables: BTreeSet<&'static str> = old.tables().into_iter().chain(new.tables()).collect();
    for table in tables {
        let of =
            |rule: &RuleMeta| -> Vec<&'static Selection> { rule.data.iter().filter(|s| s.table == table).collect() };
        selections(&of(old), &of(new), &mut changes.at(Some(new.name), Some(table)));
    }
    let written: BTreeSet<&'static str> = old.writes.iter().chain(new.writes).map(|w| w.table).collect();
    for table in written {
        writes(old.write_rule(table), new.write_rule(table), &mut changes.at(Some(new.name), Some(table)));
    }
    let members = match new.membership.or(old.membership) {
        Some(Membership::Table { table, .. }) => Some(table),
        _ => None,
    };
    match (old.leave, new.leave) {
        (false, true) => changes.at(Some(new.name), members).widens(Access::Write, "`leave` turned on"),
        (true, false) => changes.at(Some(new.name), members).narrows(Access::Write, "`leave` turned off"),
        _ => {}
    }
    match (old.invite, new.invite) {
        (Some(column), None) => changes
            .at(Some(new.name), members)
            .widens(Access::Read, format!("`invite({column})` turned off: pending memberships grant")),
        (None, Some(column)) => changes
            .at(Some(new.name), members)
            .narrows(Access::Read, format!("`invite({column})` turned on: memberships grant once accepted")),
        (Some(was), Some(now)) if was != now => {
            changes.at(Some(new.name), members).widens(Access::Write, format!("`invite({was})` became `invite({now})`"))
        }
        _ => {}
    }
    accepts(old.accepts, new.accepts, &mut changes.at(Some(new.name), None));
    match (old.held_while, new.held_while) {
        (Some(source), None) => {
            changes.at(Some(new.name), None).widens(Access::Read, format!("no longer held only `while({source})`"))
        }
        (None, Some(source)) => {
            changes.at(Some(new.name), None).narrows(Access::Read, format!("held only `while({source})`"))
        }
        _ => {}
    }
    match (old.anchor, new.anchor) {
        (Some(anchor), None) => changes
            .at(Some(new.name), members)
            .widens(Access::Write, format!("anchor in `{}` removed: memberships no longer need it", anchor.table)),
        (None, Some(anchor)) => changes
            .at(Some(new.name), members)
            .narrows(Access::Write, format!("anchor in `{}` added: memberships need it", anchor.table)),
        _ => {}
    }
}

/// A parameter read from another claim or column gives actors other buckets than before. A
/// parameter removed takes its equality out of every selection's scope. A parameter added puts
/// one in (the no-leak rule makes every selection scope it), so each bucket holds fewer rows.
fn parameters(old: &RuleMeta, new: &RuleMeta, at: &mut At<'_>) {
    for param in new.parameters {
        match old.parameter(param.name) {
            None => at.narrows(Access::Read, format!("parameter `{}` added", param.name)),
            Some(before) if before.source != param.source => at.widens(
                Access::Read,
                format!(
                    "parameter `{}` now comes from `{}`, was `{}`",
                    param.name,
                    source(param.source),
                    source(before.source)
                ),
            ),
            Some(_) => {}
        }
    }
    for param in old.parameters {
        if new.parameter(param.name).is_none() {
            at.widens(Access::Read, format!("parameter `{}` removed", param.name));
        }
    }
}

/// A parameter's source as the contract writes it.
fn source(source: ParamSource) -> String {
    match source {
        ParamSource::Claim(claim) => claim.describe(),
        ParamSource::Membership { column } => format!("membership.{column}"),
    }
}

/// Only a membership filter added (one more equality on the same table) surely narrows. Any
/// other change decides anew who holds which buckets, and through them who writes.
fn membership(old: Option<Membership>, new: Option<Membership>, at: &mut At<'_>) {
    let review = |why: String| format!("membership changed: review ({why})");
    match (old, new) {
        (None, None) => {}
        (Some(_), None) => at.widens(Access::Read, review("it has none now".into())),
        (None | Some(Membership::Table { .. }), Some(Membership::Raw { .. })) => {
            at.widens(Access::Read, review("now raw SQL".into()));
        }
        (None | Some(Membership::Raw { .. }), Some(Membership::Table { table, .. })) => {
            at.widens(Access::Read, review(format!("now read from `{table}`")));
        }
        (Some(Membership::Raw { sql: before, reads: read_before }), Some(Membership::Raw { sql, reads })) => {
            if before != sql {
                at.widens(Access::Read, review("raw SQL changed".into()));
            }
            for table in read_before.iter().filter(|t| !reads.contains(t)) {
                at.widens(
                    Access::Write,
                    format!("`{table}` no longer read by the raw membership: clients may write it"),
                );
            }
        }
        (Some(Membership::Table { table: before, filters: was }), Some(Membership::Table { table, filters })) => {
            if before != table {
                at.widens(Access::Read, review(format!("table `{before}` is now `{table}`")));
                return;
            }
            let old: Vec<(&str, String)> = was.iter().map(membership_filter).collect();
            let new: Vec<(&str, String)> = filters.iter().map(membership_filter).collect();
            for (what, effect) in equalities(&old, &new) {
                match effect {
                    Effect::Widens => at.widens(Access::Read, review(format!("filter {what}"))),
                    Effect::Narrows => at.narrows(Access::Read, format!("membership filter {what}")),
                }
            }
        }
    }
}

fn membership_filter(filter: &MembershipFilter) -> (&'static str, String) {
    let value = match filter.value {
        FilterValue::Claim(claim) => claim.describe(),
        FilterValue::Const(value) => value.to_json().to_string(),
    };
    (filter.column, format!("{} == {value}", filter.column))
}

fn const_filter(filter: &ConstFilter) -> (&'static str, String) {
    (filter.column, format!("{} == {}", filter.column, filter.value.to_json()))
}

/// How a list of equalities (column, text) changed, each change with its effect: one removed or
/// given another value widens, one added on a new column narrows.
fn equalities(old: &[(&str, String)], new: &[(&str, String)]) -> Vec<(String, Effect)> {
    let mut out = Vec::new();
    let removed: Vec<&(&str, String)> = old.iter().filter(|o| !new.contains(o)).collect();
    let added: Vec<&(&str, String)> = new.iter().filter(|n| !old.contains(n)).collect();
    for (column, text) in &removed {
        match added.iter().find(|(c, _)| c == column) {
            Some((_, now)) => out.push((format!("changed: `{text}` is now `{now}`"), Effect::Widens)),
            None => out.push((format!("removed: `{text}`"), Effect::Widens)),
        }
    }
    for (column, text) in added {
        if !removed.iter().any(|(c, _)| c == column) {
            out.push((format!("added: `{text}`"), Effect::Narrows));
        }
    }
    out
}

/// A selection as written in `data(...)`, its scope then its filters.
fn describe_selection(selection: &Selection) -> String {
    let all: Vec<String> = scope_of(selection).into_iter().chain(filters_of(selection)).map(|(_, text)| text).collect();
    format!("`{}`", all.join(" && "))
}

/// A selection's `column == bucket.parameter` equalities, as written.
fn scope_of(selection: &Selection) -> Vec<(&'static str, String)> {
    selection.scope.iter().map(|eq| (eq.column, format!("{} == bucket.{}", eq.column, eq.param))).collect()
}

fn filters_of(selection: &Selection) -> Vec<(&'static str, String)> {
    selection.filters.iter().map(const_filter).collect()
}

fn is_subset<T: PartialEq>(small: &[T], large: &[T]) -> bool {
    small.iter().all(|item| large.contains(item))
}

/// A table's selections in one rule. A selection holds the rows matching all its equalities, so
/// each equality added narrows it and each removed widens it. A new selection is paired with the
/// old one whose scope contains its scope or is contained in it, preferring one it adds
/// equalities to (nothing widened), then one with the same scope. A new selection without such a
/// partner reads rows the rule did not (another scope column), and an old one without one is gone.
fn selections(old: &[&Selection], new: &[&Selection], at: &mut At<'_>) {
    let mut paired = vec![false; old.len()];
    for selection in new {
        let (scope, filters) = (scope_of(selection), filters_of(selection));
        let partner = (0..old.len())
            .filter(|&i| is_subset(&scope_of(old[i]), &scope) || is_subset(&scope, &scope_of(old[i])))
            .min_by_key(|&i| {
                let (was_scope, was_filters) = (scope_of(old[i]), filters_of(old[i]));
                let narrowed = is_subset(&was_scope, &scope) && is_subset(&was_filters, &filters);
                (!narrowed, was_scope != scope)
            });
        let Some(i) = partner else {
            at.widens(Access::Read, format!("selection added: {}", describe_selection(selection)));
            continue;
        };
        paired[i] = true;
        let was_scope = scope_of(old[i]);
        for (_, text) in was_scope.iter().filter(|eq| !scope.contains(eq)) {
            at.widens(Access::Read, format!("scope removed: `{text}`"));
        }
        for (_, text) in scope.iter().filter(|eq| !was_scope.contains(eq)) {
            at.narrows(Access::Read, format!("scope added: `{text}`"));
        }
        for (what, effect) in equalities(&filters_of(old[i]), &filters) {
            at.record(effect, Access::Read, format!("filter {what}"));
        }
    }
    for (selection, paired) in old.iter().zip(paired) {
        if !paired {
            at.narrows(Access::Read, format!("selection removed: {}", describe_selection(selection)));
        }
    }
}

/// One alternative of a `write`: its equalities, or every holder when it has none.
fn describe_alternative(all: &[(&str, String)]) -> String {
    if all.is_empty() {
        return "every holder".into();
    }
    let texts: Vec<&str> = all.iter().map(|(_, text)| text.as_str()).collect();
    format!("`{}`", texts.join(" && "))
}

/// A table's `write` in one rule. Each alternative admits the memberships and rows matching all
/// its terms (membership equalities, row comparisons), so a new alternative widens unless an old
/// one already admitted everything it admits (an old alternative whose terms it all has).
fn writes(old: Option<&WriteRule>, new: Option<&WriteRule>, at: &mut At<'_>) {
    let alternatives = |rule: &WriteRule| -> Vec<Vec<(&'static str, String)>> {
        rule.any_of
            .iter()
            .map(|alternative| {
                let member = alternative.member.iter().map(const_filter);
                member.chain(alternative.row.iter().map(|term| (term.column, term.describe()))).collect()
            })
            .collect()
    };
    let (old, new) = match (old, new) {
        (None, None) => return,
        (Some(_), None) => {
            at.narrows(Access::Write, "write removed");
            return;
        }
        (None, Some(new)) => {
            let all: Vec<String> = alternatives(new).iter().map(|all| describe_alternative(all)).collect();
            let who = if all.is_empty() { "no holder".to_owned() } else { all.join(" or ") };
            at.widens(Access::Write, format!("write added: {who}"));
            return;
        }
        (Some(old), Some(new)) => (alternatives(old), alternatives(new)),
    };
    for alternative in &new {
        if old.iter().any(|before| is_subset(before, alternative)) {
            continue;
        }
        let what = if alternative.is_empty() {
            "write made unconditional: every holder".to_owned()
        } else if let Some(before) = old.iter().find(|before| is_subset(alternative, before)) {
            let dropped: Vec<(&str, String)> = before.iter().filter(|e| !alternative.contains(e)).cloned().collect();
            format!("equality dropped: {} from {}", describe_alternative(&dropped), describe_alternative(before))
        } else {
            format!("alternative added: {}", describe_alternative(alternative))
        };
        at.widens(Access::Write, what);
    }
    for before in &old {
        if new.iter().any(|alternative| is_subset(alternative, before)) {
            continue;
        }
        let what = match new.iter().find(|alternative| is_subset(before, alternative)) {
            Some(_) if before.is_empty() => {
                let all: Vec<String> = new.iter().map(|all| describe_alternative(all)).collect();
                format!("write made conditional: {}", all.join(" or "))
            }
            Some(alternative) => {
                let added: Vec<(&str, String)> = alternative.iter().filter(|e| !before.contains(e)).cloned().collect();
                format!("equality added: {} to {}", describe_alternative(&added), describe_alternative(before))
            }
            None => format!("alternative removed: {}", describe_alternative(before)),
        };
        at.narrows(Access::Write, what);
    }
}

/// `accept(Other)` as written in the rule.
fn describe_accept(accept: &Accept) -> String {
    if accept.open { format!("`accept(open({}))`", accept.rule) } else { format!("`accept({})`", accept.rule) }
}

/// An `accept` lets rows into buckets their writers do not hold; an open one into any actor's.
fn accepts(old: &[Accept], new: &[Accept], at: &mut At<'_>) {
    for accept in new {
        match old.iter().find(|before| before.rule == accept.rule) {
            None => at.widens(Access::Write, format!("{} added", describe_accept(accept))),
            Some(before) if !before.open && accept.open => {
                at.widens(Access::Write, format!("{} made open: {}", describe_accept(before), describe_accept(accept)));
            }
            Some(before) if before.open && !accept.open => {
                at.narrows(
                    Access::Write,
                    format!("{} made checked: {}", describe_accept(before), describe_accept(accept)),
                );
            }
            Some(_) => {}
        }
    }
    for before in old {
        if !new.iter().any(|accept| accept.rule == before.rule) {
            at.narrows(Access::Write, format!("{} removed", describe_accept(before)));
        }
    }
}

#[cfg(test)]
mod tests {
    //! One test per kind of change, each on a task board: `team` buckets held through
    //! `team_members`, and `assigned` buckets of one user, into which teammates put tasks.

    use engine_kernel::SqlType;
    use engine_kernel::rules::{Claim, ConstValue, ParamMeta, RowTerm, ScopeEq, WriteAlternative};

    use super::*;

    const BY_TEAM: &[ScopeEq] = &[ScopeEq { column: "team_id", param: "team_id" }];
    const MEMBER: WriteAlternative = members(&[ConstFilter { column: "role", value: ConstValue::Text("member") }]);
    const OWNER: WriteAlternative = members(&[ConstFilter { column: "role", value: ConstValue::Text("owner") }]);
    const ACTIVE: ConstFilter = ConstFilter { column: "active", value: ConstValue::Bool(true) };
    const ACTIVE_MEMBER: WriteAlternative =
        members(&[ConstFilter { column: "role", value: ConstValue::Text("member") }, ACTIVE]);
    const EVERY: WriteAlternative = members(&[]);

    /// An alternative deciding by membership equalities only.
    const fn members(member: &'static [ConstFilter]) -> WriteAlternative {
        WriteAlternative { member, row: &[] }
    }
    const OPEN: ConstFilter = ConstFilter { column: "archived", value: ConstValue::Bool(false) };

    const TASKS_BY_MEMBERS: WriteRule = WriteRule { table: "tasks", any_of: &[MEMBER, OWNER] };
    const USER: ParamMeta =
        ParamMeta { name: "user_id", sql_type: SqlType::Text, source: ParamSource::Claim(Claim::UserId) };

    const TEAM: RuleMeta = RuleMeta {
        name: "team",
        description: "",
        parameters: &[ParamMeta {
            name: "team_id",
            sql_type: SqlType::Text,
            source: ParamSource::Membership { column: "team_id" },
        }],
        membership: Some(Membership::Table {
            table: "team_members",
            filters: &[MembershipFilter { column: "user_id", value: FilterValue::Claim(Claim::UserId) }],
        }),
        data: &[
            Selection { table: "tasks", scope: BY_TEAM, filters: &[OPEN] },
            Selection { table: "team_members", scope: BY_TEAM, filters: &[] },
        ],
        writes: &[TASKS_BY_MEMBERS],
        accepts: &[],
        leave: false,
        invite: None,
        held_while: None,
        anchor: None,
    };

    const ASSIGNED: RuleMeta = RuleMeta {
        name: "assigned",
        description: "",
        parameters: &[ParamMeta {
            name: "user_id",
            sql_type: SqlType::Text,
            source: ParamSource::Claim(Claim::UserId),
        }],
        membership: None,
        data: &[Selection {
            table: "tasks",
            scope: &[ScopeEq { column: "assignee_id", param: "user_id" }],
            filters: &[],
        }],
        writes: &[WriteRule { table: "tasks", any_of: &[EVERY] }],
        accepts: &[Accept { rule: "team", open: false }],
        leave: false,
        invite: None,
        held_while: None,
        anchor: None,
    };

    fn rules(rules: &[RuleMeta], server_only: &[&'static str]) -> SyncRules {
        SyncRules { rules: Box::leak(rules.into()), server_only: Box::leak(server_only.into()) }
    }

    /// The report's lines from `old` to `new`, neither with server-only tables.
    fn report(old: &[RuleMeta], new: &[RuleMeta]) -> Vec<String> {
        compare(&rules(old, &[]), &rules(new, &[])).iter().map(ToString::to_string).collect()
    }

    /// The report's lines when `team` changes to `new`.
    fn team_becomes(new: RuleMeta) -> Vec<String> {
        report(&[TEAM, ASSIGNED], &[new, ASSIGNED])
    }

    /// The report's lines when `team` changes from `old`.
    fn team_was(old: RuleMeta) -> Vec<String> {
        report(&[old, ASSIGNED], &[TEAM, ASSIGNED])
    }

    #[test]
    fn the_same_rules_report_nothing() {
        assert_eq!(report(&[TEAM, ASSIGNED], &[ASSIGNED, TEAM]), Vec::<String>::new());
    }

    #[test]
    fn a_new_rule_widens_reads_and_each_of_its_grants() {
        assert_eq!(
            report(&[TEAM], &[TEAM, ASSIGNED]),
            [
                "widens read in rule `assigned`: new rule",
                "widens write in rule `assigned`: `accept(team)` added",
                "widens read of `tasks` in rule `assigned`: selection added: `assignee_id == bucket.user_id`",
                "widens write of `tasks` in rule `assigned`: write added: every holder",
            ]
        );
    }

    #[test]
    fn a_removed_rule_narrows() {
        assert_eq!(report(&[TEAM, ASSIGNED], &[TEAM]), ["narrows read in rule `assigned`: rule removed"]);
    }

    #[test]
    fn a_selection_added_for_a_table_widens() {
        let data = &[
            Selection { table: "tasks", scope: BY_TEAM, filters: &[OPEN] },
            Selection { table: "team_members", scope: BY_TEAM, filters: &[] },
            Selection { table: "comments", scope: BY_TEAM, filters: &[] },
        ];
        assert_eq!(
            team_becomes(RuleMeta { data, ..TEAM }),
            ["widens read of `comments` in rule `team`: selection added: `team_id == bucket.team_id`"]
        );
    }

    #[test]
    fn a_selection_removed_narrows() {
        let data = &[Selection { table: "tasks", scope: BY_TEAM, filters: &[OPEN] }];
        assert_eq!(
            team_becomes(RuleMeta { data, ..TEAM }),
            ["narrows read of `team_members` in rule `team`: selection removed: `team_id == bucket.team_id`"]
        );
    }

    #[test]
    fn a_selection_scoped_by_another_column_widens_and_narrows() {
        let data = &[
            Selection {
                table: "tasks",
                scope: &[ScopeEq { column: "owner_team_id", param: "team_id" }],
                filters: &[OPEN],
            },
            Selection { table: "team_members", scope: BY_TEAM, filters: &[] },
        ];
        assert_eq!(
            team_becomes(RuleMeta { data, ..TEAM }),
            [
                "widens read of `tasks` in rule `team`: selection added: `owner_team_id == bucket.team_id && archived == false`",
                "narrows read of `tasks` in rule `team`: selection removed: `team_id == bucket.team_id && archived == false`",
            ]
        );
    }

    #[test]
    fn a_selection_filter_removed_widens() {
        let data = &[
            Selection { table: "tasks", scope: BY_TEAM, filters: &[] },
            Selection { table: "team_members", scope: BY_TEAM, filters: &[] },
        ];
        assert_eq!(
            team_becomes(RuleMeta { data, ..TEAM }),
            ["widens read of `tasks` in rule `team`: filter removed: `archived == false`"]
        );
    }

    #[test]
    fn a_selection_filter_changed_widens() {
        const ARCHIVED: ConstFilter = ConstFilter { column: "archived", value: ConstValue::Bool(true) };
        let data = &[
            Selection { table: "tasks", scope: BY_TEAM, filters: &[ARCHIVED] },
            Selection { table: "team_members", scope: BY_TEAM, filters: &[] },
        ];
        assert_eq!(
            team_becomes(RuleMeta { data, ..TEAM }),
            ["widens read of `tasks` in rule `team`: filter changed: `archived == false` is now `archived == true`"]
        );
    }

    #[test]
    fn a_selection_filter_added_narrows() {
        let data = &[
            Selection { table: "tasks", scope: BY_TEAM, filters: &[OPEN] },
            Selection { table: "team_members", scope: BY_TEAM, filters: &[ACTIVE] },
        ];
        assert_eq!(
            team_becomes(RuleMeta { data, ..TEAM }),
            ["narrows read of `team_members` in rule `team`: filter added: `active == true`"]
        );
    }

    /// `team`'s membership with a filter added: active members only.
    const ACTIVE_MEMBERSHIP: Option<Membership> = Some(Membership::Table {
        table: "team_members",
        filters: &[
            MembershipFilter { column: "user_id", value: FilterValue::Claim(Claim::UserId) },
            MembershipFilter { column: "active", value: FilterValue::Const(ConstValue::Bool(true)) },
        ],
    });

    #[test]
    fn a_membership_filter_removed_widens_for_review() {
        let membership = ACTIVE_MEMBERSHIP;
        assert_eq!(
            team_was(RuleMeta { membership, ..TEAM }),
            ["widens read in rule `team`: membership changed: review (filter removed: `active == true`)"]
        );
    }

    #[test]
    fn a_membership_filter_added_narrows() {
        let membership = ACTIVE_MEMBERSHIP;
        assert_eq!(
            team_becomes(RuleMeta { membership, ..TEAM }),
            ["narrows read in rule `team`: membership filter added: `active == true`"]
        );
    }

    #[test]
    fn a_membership_filter_changed_widens_for_review() {
        let membership = Some(Membership::Table {
            table: "team_members",
            filters: &[MembershipFilter { column: "user_id", value: FilterValue::Claim(Claim::OwnerId) }],
        });
        assert_eq!(
            team_becomes(RuleMeta { membership, ..TEAM }),
            [
                "widens read in rule `team`: membership changed: review (filter changed: `user_id == actor.user_id` is now `user_id == actor.owner_id`)"
            ]
        );
    }

    #[test]
    fn a_membership_table_changed_widens_for_review() {
        let membership = Some(Membership::Table {
            table: "team_admins",
            filters: &[MembershipFilter { column: "user_id", value: FilterValue::Claim(Claim::UserId) }],
        });
        assert_eq!(
            team_becomes(RuleMeta { membership, ..TEAM }),
            ["widens read in rule `team`: membership changed: review (table `team_members` is now `team_admins`)"]
        );
    }

    #[test]
    fn a_raw_membership_changed_widens_for_review() {
        let raw = |sql| RuleMeta { membership: Some(Membership::Raw { sql, reads: &[] }), ..TEAM };
        let old = raw("SELECT team_id FROM team_members WHERE user_id = $user_id AND active");
        let new = raw("SELECT team_id FROM team_members WHERE user_id = $user_id");
        assert_eq!(
            report(&[old, ASSIGNED], &[new, ASSIGNED]),
            ["widens read in rule `team`: membership changed: review (raw SQL changed)"]
        );
        assert_eq!(team_becomes(new), ["widens read in rule `team`: membership changed: review (now raw SQL)"]);
    }

    #[test]
    fn a_table_a_raw_membership_no_longer_reads_widens_writes() {
        const SQL: &str = "SELECT team_id FROM team_members WHERE user_id = $user_id";
        let old = RuleMeta { membership: Some(Membership::Raw { sql: SQL, reads: &["team_members"] }), ..TEAM };
        let new = RuleMeta { membership: Some(Membership::Raw { sql: SQL, reads: &[] }), ..TEAM };
        assert_eq!(
            report(&[old, ASSIGNED], &[new, ASSIGNED]),
            ["widens write in rule `team`: `team_members` no longer read by the raw membership: clients may write it"]
        );
    }

    #[test]
    fn a_parameter_read_from_another_source_widens() {
        let parameters =
            &[ParamMeta { name: "user_id", sql_type: SqlType::Text, source: ParamSource::Claim(Claim::OwnerId) }];
        assert_eq!(
            report(&[TEAM, ASSIGNED], &[TEAM, RuleMeta { parameters, ..ASSIGNED }]),
            [
                "widens read in rule `assigned`: parameter `user_id` now comes from `actor.owner_id`, was `actor.user_id`"
            ]
        );
    }

    #[test]
    fn a_parameter_removed_widens_and_one_added_narrows() {
        const ORG: ParamMeta =
            ParamMeta { name: "org_id", sql_type: SqlType::Text, source: ParamSource::Claim(Claim::Custom("org")) };
        let two = RuleMeta {
            parameters: &[USER, ORG],
            data: &[Selection {
                table: "tasks",
                scope: &[
                    ScopeEq { column: "assignee_id", param: "user_id" },
                    ScopeEq { column: "org_id", param: "org_id" },
                ],
                filters: &[],
            }],
            ..ASSIGNED
        };
        assert_eq!(
            report(&[TEAM, two], &[TEAM, ASSIGNED]),
            [
                "widens read in rule `assigned`: parameter `org_id` removed",
                "widens read of `tasks` in rule `assigned`: scope removed: `org_id == bucket.org_id`",
            ]
        );
        assert_eq!(
            report(&[TEAM, ASSIGNED], &[TEAM, two]),
            [
                "narrows read in rule `assigned`: parameter `org_id` added",
                "narrows read of `tasks` in rule `assigned`: scope added: `org_id == bucket.org_id`",
            ]
        );
    }

    #[test]
    fn a_table_no_longer_server_only_widens() {
        let changes = compare(&rules(&[TEAM], &["audit"]), &rules(&[TEAM], &[]));
        let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines, ["widens write of `audit`: no longer server-only"]);
    }

    #[test]
    fn a_table_now_server_only_narrows() {
        let changes = compare(&rules(&[TEAM], &[]), &rules(&[TEAM], &["audit"]));
        let lines: Vec<String> = changes.iter().map(ToString::to_string).collect();
        assert_eq!(lines, ["narrows write of `audit`: now server-only"]);
    }

    #[test]
    fn a_write_added_widens() {
        let writes = &[TASKS_BY_MEMBERS, WriteRule { table: "team_members", any_of: &[OWNER] }];
        assert_eq!(
            team_becomes(RuleMeta { writes, ..TEAM }),
            ["widens write of `team_members` in rule `team`: write added: `role == \"owner\"`"]
        );
    }

    #[test]
    fn a_write_removed_narrows() {
        assert_eq!(
            team_becomes(RuleMeta { writes: &[], ..TEAM }),
            ["narrows write of `tasks` in rule `team`: write removed"]
        );
    }

    #[test]
    fn a_write_alternative_added_widens() {
        const VIEWER: WriteAlternative = members(&[ConstFilter { column: "role", value: ConstValue::Text("viewer") }]);
        let writes = &[WriteRule { table: "tasks", any_of: &[MEMBER, OWNER, VIEWER] }];
        assert_eq!(
            team_becomes(RuleMeta { writes, ..TEAM }),
            ["widens write of `tasks` in rule `team`: alternative added: `role == \"viewer\"`"]
        );
    }

    #[test]
    fn a_write_alternative_removed_narrows() {
        let writes = &[WriteRule { table: "tasks", any_of: &[OWNER] }];
        assert_eq!(
            team_becomes(RuleMeta { writes, ..TEAM }),
            ["narrows write of `tasks` in rule `team`: alternative removed: `role == \"member\"`"]
        );
    }

    #[test]
    fn a_write_equality_dropped_widens() {
        let writes = &[WriteRule { table: "tasks", any_of: &[ACTIVE_MEMBER, OWNER] }];
        assert_eq!(
            team_was(RuleMeta { writes, ..TEAM }),
            [
                "widens write of `tasks` in rule `team`: equality dropped: `active == true` from `role == \"member\" && active == true`"
            ]
        );
    }

    #[test]
    fn a_write_equality_added_narrows() {
        let writes = &[WriteRule { table: "tasks", any_of: &[ACTIVE_MEMBER, OWNER] }];
        assert_eq!(
            team_becomes(RuleMeta { writes, ..TEAM }),
            ["narrows write of `tasks` in rule `team`: equality added: `active == true` to `role == \"member\"`"]
        );
    }

    #[test]
    fn a_write_made_unconditional_widens() {
        let writes = &[WriteRule { table: "tasks", any_of: &[EVERY] }];
        assert_eq!(
            team_becomes(RuleMeta { writes, ..TEAM }),
            ["widens write of `tasks` in rule `team`: write made unconditional: every holder"]
        );
    }

    #[test]
    fn a_write_made_conditional_narrows() {
        let writes = &[WriteRule { table: "tasks", any_of: &[EVERY] }];
        assert_eq!(
            team_was(RuleMeta { writes, ..TEAM }),
            [
                "narrows write of `tasks` in rule `team`: write made conditional: `role == \"member\"` or `role == \"owner\"`"
            ]
        );
    }

    #[test]
    fn leave_turned_on_widens() {
        assert_eq!(
            team_becomes(RuleMeta { leave: true, ..TEAM }),
            ["widens write of `team_members` in rule `team`: `leave` turned on"]
        );
    }

    #[test]
    fn leave_turned_off_narrows() {
        assert_eq!(
            team_was(RuleMeta { leave: true, ..TEAM }),
            ["narrows write of `team_members` in rule `team`: `leave` turned off"]
        );
    }

    /// `anchor(Team::id == bucket.team_id)` on the task board's teams.
    const TEAM_ROW: Selection =
        Selection { table: "teams", scope: &[ScopeEq { column: "id", param: "team_id" }], filters: &[] };

    #[test]
    fn an_anchor_removed_widens_and_added_narrows() {
        assert_eq!(
            team_was(RuleMeta { anchor: Some(TEAM_ROW), ..TEAM }),
            ["widens write of `team_members` in rule `team`: anchor in `teams` removed: memberships no longer need it"]
        );
        assert_eq!(
            team_becomes(RuleMeta { anchor: Some(TEAM_ROW), ..TEAM }),
            ["narrows write of `team_members` in rule `team`: anchor in `teams` added: memberships need it"]
        );
    }

    #[test]
    fn a_held_while_removed_widens_reads() {
        let assigned_while = RuleMeta { held_while: Some("team"), ..ASSIGNED };
        assert_eq!(
            report(&[TEAM, assigned_while], &[TEAM, ASSIGNED]),
            ["widens read in rule `assigned`: no longer held only `while(team)`"]
        );
    }

    #[test]
    fn a_row_condition_dropped_widens() {
        const NOT_OWNER: &[RowTerm] =
            &[RowTerm { column: "role", value: FilterValue::Const(ConstValue::Text("owner")), equal: false }];
        const GUARDED: WriteAlternative = WriteAlternative { member: MEMBER.member, row: NOT_OWNER };
        const WAS: &[WriteRule] = &[WriteRule { table: "team_members", any_of: &[OWNER, GUARDED] }];
        const NOW: &[WriteRule] = &[WriteRule { table: "team_members", any_of: &[OWNER, MEMBER] }];
        assert_eq!(
            report(&[RuleMeta { writes: WAS, ..TEAM }], &[RuleMeta { writes: NOW, ..TEAM }]),
            [
                "widens write of `team_members` in rule `team`: equality dropped: `row.role != \"owner\"` from `role == \"member\" && row.role != \"owner\"`"
            ]
        );
    }

    #[test]
    fn a_row_condition_on_the_actor_is_compared_as_written() {
        const OWN: &[RowTerm] =
            &[RowTerm { column: "author_id", value: FilterValue::Claim(Claim::UserId), equal: true }];
        const OWN_TASKS: WriteAlternative = WriteAlternative { member: MEMBER.member, row: OWN };
        const OWN_ONLY: &[WriteRule] = &[WriteRule { table: "tasks", any_of: &[OWNER, OWN_TASKS] }];
        let own_only = RuleMeta { writes: OWN_ONLY, ..TEAM };
        assert_eq!(
            report(&[TEAM], &[own_only]),
            [
                "narrows write of `tasks` in rule `team`: equality added: `row.author_id == actor.user_id` to `role == \"member\"`"
            ]
        );
        assert_eq!(
            report(&[own_only], &[TEAM]),
            [
                "widens write of `tasks` in rule `team`: equality dropped: `row.author_id == actor.user_id` from `role == \"member\" && row.author_id == actor.user_id`"
            ]
        );
        assert!(report(&[own_only], &[own_only]).is_empty());
    }

    #[test]
    fn an_accept_added_widens() {
        assert_eq!(
            report(&[TEAM, RuleMeta { accepts: &[], ..ASSIGNED }], &[TEAM, ASSIGNED]),
            ["widens write in rule `assigned`: `accept(team)` added"]
        );
    }

    #[test]
    fn an_accept_removed_narrows() {
        assert_eq!(
            report(&[TEAM, ASSIGNED], &[TEAM, RuleMeta { accepts: &[], ..ASSIGNED }]),
            ["narrows write in rule `assigned`: `accept(team)` removed"]
        );
    }

    #[test]
    fn an_accept_made_open_widens() {
        let open = RuleMeta { accepts: &[Accept { rule: "team", open: true }], ..ASSIGNED };
        assert_eq!(
            report(&[TEAM, ASSIGNED], &[TEAM, open]),
            ["widens write in rule `assigned`: `accept(team)` made open: `accept(open(team))`"]
        );
    }

    #[test]
    fn an_accept_made_checked_narrows() {
        let open = RuleMeta { accepts: &[Accept { rule: "team", open: true }], ..ASSIGNED };
        assert_eq!(
            report(&[TEAM, open], &[TEAM, ASSIGNED]),
            ["narrows write in rule `assigned`: `accept(open(team))` made checked: `accept(team)`"]
        );
    }

    #[test]
    fn widenings_come_first_then_rules_and_tables_in_order() {
        let old = rules(&[TEAM, ASSIGNED], &["audit"]);
        let writes = &[WriteRule { table: "tasks", any_of: &[EVERY] }];
        let new = rules(&[RuleMeta { writes, leave: true, ..TEAM }, RuleMeta { accepts: &[], ..ASSIGNED }], &[]);
        let lines: Vec<String> = compare(&old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "widens write of `audit`: no longer server-only",
                "widens write of `tasks` in rule `team`: write made unconditional: every holder",
                "widens write of `team_members` in rule `team`: `leave` turned on",
                "narrows write in rule `assigned`: `accept(team)` removed",
            ]
        );
    }
}
