//! Write authorization evaluated offline (`docs/design.md` §4, "Offline."): whether the server
//! would refuse one write of a local mutation as `forbidden`, read from the app's sync rules, the
//! buckets the client's pulls said it holds and the membership rows it has. It follows the
//! server's `engine-runtime/src/mutation/authorize.rs` step by step, with a third answer besides
//! allowed and refused: unknown, where the server reads what the client lacks (membership rows
//! it does not hold, a bucket it has never seen, raw membership SQL, the receiver of a checked
//! `accept(...)` other than the actor). Only a certain refusal is made offline, in the server's
//! words (`engine_kernel::rules::refusal`); every other write goes to the server, which stays the
//! authority. Nor is anything refused that the server allows, or answers "not found".
//!
//! Pure: [`WriteContext::authorize`] reads only the context, and notes in it the buckets the
//! mutation may be creating, as the server notes the buckets it creates.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::rules::buckets::{RuleIndex, claim_bucket, claim_text, param_text};
use engine_kernel::rules::refusal::{self, Refusal};
use engine_kernel::rules::{ConstFilter, ConstValue, FilterValue, Membership, ParamSource, RuleMeta, WriteAlternative};
use engine_kernel::{Actor, BucketKey, Error as KernelError, Row, TableMeta};

/// What the client can tell of a write before the server sees it.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// The server allows it, as far as the client has the rows it reads.
    Allowed,
    /// The server may allow or refuse it.
    Unknown,
    /// The server refuses it, with this error (`forbidden`, its words).
    Refused(KernelError),
}

/// What the client knows of the actor's holdings as a mutation begins.
#[derive(Debug, Clone, Default)]
pub(crate) struct Holdings {
    /// The buckets the client holds, as its pulls said.
    pub(crate) held: BTreeSet<BucketKey>,
    /// Live rows of the membership tables the client has, by table: at least every row of the
    /// actor's own.
    pub(crate) rows: BTreeMap<&'static str, Vec<Row>>,
}

/// What a write is evaluated in: everything as the mutation began, except `created`.
#[derive(Debug)]
pub(crate) struct WriteContext<'a> {
    index: &'a RuleIndex,
    actor: &'a Actor,
    holdings: Holdings,
    /// Buckets of membership rules the mutation may be creating: writes into them are not
    /// refused.
    created: BTreeSet<BucketKey>,
}

/// `a || b` of two answers the client may not know (`None`).
fn or(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (None, _) | (_, None) => None,
        _ => Some(false),
    }
}

/// `||` of every answer of `answers`, as far as needed.
fn any(answers: impl IntoIterator<Item = Option<bool>>) -> Option<bool> {
    let mut any = Some(false);
    for answer in answers {
        any = or(any, answer);
        if any == Some(true) {
            break;
        }
    }
    any
}

/// `a && b` of two answers the client may not know (`None`).
fn and(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (None, _) | (_, None) => None,
        _ => Some(true),
    }
}

/// Whether every membership term holds on membership row `row`.
fn member_terms_hold(row: &Row, terms: &[ConstFilter]) -> bool {
    terms.iter().all(|term| term.value.matches(row.get(term.column)))
}

/// A step's answer, or the claim bucket that takes a row only through another of its buckets.
enum Entering {
    Verdict(Verdict),
    ReadOnly,
}

impl<'a> WriteContext<'a> {
    /// The context of a mutation of `actor` under the rules of `index`, as the client knows
    /// them from `holdings`.
    pub(crate) fn new(index: &'a RuleIndex, actor: &'a Actor, holdings: Holdings) -> Self {
        WriteContext { index, actor, holdings, created: BTreeSet::new() }
    }

    /// May the actor write `table`, the row being `before` (none for an insert) and `after`
    /// (none for a purge)? The server's order of checks, each answered as far as the client can.
    /// The first refusal is the server's: a step it might have passed instead is assumed passed
    /// (its buckets noted in `created`), and a step it might have refused refuses the mutation
    /// too.
    pub(crate) fn authorize(
        &mut self,
        table: &'static TableMeta,
        before: Option<&Row>,
        after: Option<&Row>,
    ) -> Verdict {
        let rules = self.index.rules();
        if rules.is_server_only(table.name) {
            return Verdict::Refused(refusal::forbidden_server_only(table.name));
        }
        if let Some(rule) = rules.raw_reader(table.name) {
            return Verdict::Refused(refusal::forbidden_raw_reader(table.name, rule.name));
        }
        let images: Vec<&Row> = before.into_iter().chain(after).collect();
        let mut unknown = false;
        macro_rules! step {
            ($verdict:expr) => {
                match $verdict {
                    Verdict::Refused(error) => return Verdict::Refused(error),
                    Verdict::Unknown => unknown = true,
                    Verdict::Allowed => {}
                }
            };
        }
        match (before, after) {
            (None, Some(after)) => {
                let buckets = self.index.row_buckets(table, after);
                step!(self.entering(table, &buckets, &buckets, &images));
                step!(self.granting(table, None, after));
                step!(self.placing(table, after));
            }
            (Some(before), Some(after)) => {
                // A row the server cannot read is not found there, not refused.
                let before_buckets = self.index.row_buckets(table, before);
                if self.may_read(&before_buckets) != Some(true) {
                    return Verdict::Unknown;
                }
                // The actor accepting its own invitation: the server asks nothing else of it.
                if self.index.is_accepting(table, before, after, self.actor) {
                    return Verdict::Allowed;
                }
                // A soft delete removes the row: its member may be leaving.
                let removed = (table.is_live(before) && !table.is_live(after)).then_some(before);
                let after_buckets = self.index.row_buckets(table, after);
                let written_in = self.index.write_buckets(table, before);
                let left: BTreeSet<BucketKey> = before_buckets.difference(&after_buckets).cloned().collect();
                let entered: BTreeSet<BucketKey> = after_buckets.difference(&before_buckets).cloned().collect();
                step!(self.changing(table, &written_in, removed, &images));
                step!(self.leaving(table, &left, &before_buckets, removed, &images));
                step!(self.entering(table, &entered, &after_buckets, &images));
                step!(self.granting(table, Some(before), after));
                if table.is_live(after) {
                    step!(self.placing(table, after));
                }
            }
            (Some(before), None) => {
                // A soft-deleted row is in no bucket; the buckets it was in decide who may purge it.
                let live = table.undeleted(before);
                let buckets = self.index.row_buckets(table, &live);
                if self.may_read(&buckets) != Some(true) {
                    return Verdict::Unknown;
                }
                let images = [&live];
                step!(self.changing(table, &self.index.write_buckets(table, &live), Some(&live), &images));
                step!(self.leaving(table, &buckets, &buckets, Some(&live), &images));
            }
            (None, None) => {}
        }
        if unknown { Verdict::Unknown } else { Verdict::Allowed }
    }

    // --- What the actor holds and may write --------------------------------------------------

    fn rule(&self, bucket: &BucketKey) -> Option<&'static RuleMeta> {
        self.index.rules().rule(bucket.rule())
    }

    /// Whether the server's mutation sees a row lying in `buckets`: one of them is held, or the
    /// mutation may have put rows into it.
    fn may_read(&self, buckets: &BTreeSet<BucketKey>) -> Option<bool> {
        any(buckets.iter().map(|bucket| if self.created.contains(bucket) { Some(true) } else { self.holds(bucket) }))
    }

    /// The actor's own live membership rows granting `bucket`, as far as the client has them.
    fn own_rows(&self, bucket: &BucketKey) -> Vec<&Row> {
        let Some(rule) = self.rule(bucket) else { return Vec::new() };
        let Some(Membership::Table { table, .. }) = rule.membership else { return Vec::new() };
        let Some(meta) = self.index.table(table) else { return Vec::new() };
        let rows = self.holdings.rows.get(table).map_or(&[][..], Vec::as_slice);
        rows.iter()
            .filter(|row| rule.granted_by(meta, row).as_ref() == Some(bucket) && rule.is_members_own(row, self.actor))
            .collect()
    }

    /// Whether the client has every membership row of the actor that grants `bucket`: some
    /// selection puts every such row into one bucket, and the client holds it. Such a row has
    /// the bucket's parameters and the actor's claims in the columns the membership query
    /// reads, and its constant filters' values; the selection must be scoped and filtered by
    /// those columns only.
    fn own_rows_known(&self, bucket: &BucketKey) -> bool {
        let Some(rule) = self.rule(bucket) else { return false };
        let Some(Membership::Table { table, filters }) = rule.membership else { return false };
        if self.index.selections(table).is_empty() {
            return false;
        }
        // The parameter text of each column whose value such a row is known to have.
        let mut known: BTreeMap<&str, String> = BTreeMap::new();
        for (param, value) in rule.parameters.iter().zip(bucket.params()) {
            let column = match param.source {
                ParamSource::Membership { column } => Some(column),
                ParamSource::Claim(claim) => {
                    filters.iter().find(|f| matches!(f.value, FilterValue::Claim(c) if c == claim)).map(|f| f.column)
                }
            };
            if let Some(column) = column {
                known.insert(column, value);
            }
        }
        for filter in filters {
            let value = match filter.value {
                FilterValue::Claim(claim) => claim_text(claim, self.actor),
                FilterValue::Const(value) => param_text(&value.to_json()),
            };
            if let Some(value) = value {
                known.entry(filter.column).or_insert(value);
            }
        }
        let constant = |column: &str, value: &ConstValue| {
            filters.iter().any(|f| f.column == column && matches!(f.value, FilterValue::Const(c) if c == *value))
        };
        self.index.rules().rules.iter().any(|other| {
            other.data.iter().filter(|s| s.table == table).any(|selection| {
                let filtered = selection.filters.iter().all(|f| constant(f.column, &f.value));
                let params: Option<Vec<&String>> = other
                    .parameters
                    .iter()
                    .map(|param| {
                        let mut given =
                            selection.scope.iter().filter(|eq| eq.param == param.name).map(|eq| known.get(eq.column));
                        let first = given.next()??;
                        given.all(|g| g == Some(first)).then_some(first)
                    })
                    .collect();
                filtered
                    && params.is_some_and(|params| self.holdings.held.contains(&BucketKey::new(other.name, &params)))
            })
        })
    }

    /// Whether the actor holds `bucket`.
    fn holds(&self, bucket: &BucketKey) -> Option<bool> {
        let Some(rule) = self.rule(bucket) else { return Some(false) };
        if rule.membership.is_none() {
            return Some(claim_bucket(rule, self.actor).as_ref() == Some(bucket));
        }
        if self.holdings.held.contains(bucket) || !self.own_rows(bucket).is_empty() {
            return Some(true);
        }
        if self.own_rows_known(bucket) { Some(false) } else { None }
    }

    /// Whether the actor may write `table` in `bucket` (the server's `may_write`), the row being
    /// `images`: it holds the bucket, and an alternative of the rule's `write(...)` for the table
    /// applies: its row terms hold on every image, and its member terms on one of the actor's
    /// own membership rows granting the bucket (an alternative without member terms: every
    /// holder).
    fn may_write(&self, bucket: &BucketKey, table: &str, images: &[&Row]) -> Option<bool> {
        let Some(write) = self.rule(bucket).and_then(|rule| rule.write_rule(table)) else { return Some(false) };
        let held = self.holds(bucket);
        if held == Some(false) {
            return Some(false);
        }
        let mut may = Some(false);
        for alternative in write.applying_to(images, self.actor) {
            let through = if alternative.member.is_empty() { held } else { self.member_matches(bucket, alternative) };
            may = or(may, through);
            if may == Some(true) {
                break;
            }
        }
        may
    }

    /// Whether one of the actor's own membership rows granting `bucket` matches `alternative`'s
    /// member terms.
    fn member_matches(&self, bucket: &BucketKey, alternative: &WriteAlternative) -> Option<bool> {
        let own = self.own_rows(bucket);
        if own.iter().any(|row| member_terms_hold(row, alternative.member)) {
            return Some(true);
        }
        // No own row at all, though the bucket is held: the client lacks it.
        if !own.is_empty() && self.own_rows_known(bucket) { Some(false) } else { None }
    }

    /// Whether `bucket` counts as writable: one the mutation may be creating, or one where the
    /// actor may write `table`.
    fn writable(&self, bucket: &BucketKey, table: &str, images: &[&Row]) -> Option<bool> {
        if self.created.contains(bucket) { Some(true) } else { self.may_write(bucket, table, images) }
    }

    // --- The checks, in the server's words -----------------------------------------------------

    fn refuse_change(&self, table: &str, buckets: &BTreeSet<BucketKey>) -> Verdict {
        Verdict::Refused(refusal::forbidden_change(self.index.rules(), table, buckets))
    }

    /// A live row must lie in some bucket (the server's `authorize_placing`).
    fn placing(&self, table: &TableMeta, row: &Row) -> Verdict {
        let buckets = self.index.write_buckets(table, row);
        if buckets.is_empty() { self.refuse_change(table.name, &buckets) } else { Verdict::Allowed }
    }

    /// May the mutation change or delete a row lying in `buckets` (the server's
    /// `authorize_changing`)? Where the actor may write the table in one of them, or where
    /// `removed` is the actor's own membership row of a rule with `leave`.
    fn changing(
        &self,
        table: &TableMeta,
        buckets: &BTreeSet<BucketKey>,
        removed: Option<&Row>,
        images: &[&Row],
    ) -> Verdict {
        if removed.is_some_and(|row| self.index.is_leaving(table, row, self.actor)) {
            return Verdict::Allowed;
        }
        let mut may = Some(false);
        for bucket in buckets {
            may = or(may, self.writable(bucket, table.name, images));
            if may == Some(true) {
                return Verdict::Allowed;
            }
        }
        match may {
            None => Verdict::Unknown,
            _ => self.refuse_change(table.name, buckets),
        }
    }

    /// May the row of `table` leave each of `left`, data buckets its image before lies in,
    /// `before` all of them (the server's `authorize_leaving`)?
    fn leaving(
        &self,
        table: &TableMeta,
        left: &BTreeSet<BucketKey>,
        before: &BTreeSet<BucketKey>,
        removed: Option<&Row>,
        images: &[&Row],
    ) -> Verdict {
        if removed.is_some_and(|row| self.index.is_leaving(table, row, self.actor)) {
            return Verdict::Allowed;
        }
        let mut unknown = false;
        for bucket in left {
            match self.leaving_one(table.name, bucket, before, images) {
                Some(false) => return self.refuse_change(table.name, &BTreeSet::from([bucket.clone()])),
                None => unknown = true,
                Some(true) => {}
            }
        }
        if unknown { Verdict::Unknown } else { Verdict::Allowed }
    }

    /// May a row of `table` lying in `before` leave `bucket`? Where the actor may write the
    /// table in it; or the bucket's rule accepts rows from a rule in one of whose buckets of
    /// `before` the actor may write the table; or it is a claim bucket the actor holds whose rule
    /// says nothing of the table. No receiver is asked of an `accept(...)`: a row leaving a
    /// bucket reaches no one.
    fn leaving_one(
        &self,
        table: &str,
        bucket: &BucketKey,
        before: &BTreeSet<BucketKey>,
        images: &[&Row],
    ) -> Option<bool> {
        let mut may = self.writable(bucket, table, images);
        let Some(rule) = self.rule(bucket) else { return may };
        if may == Some(true) {
            return may;
        }
        for accepted in rule.accepts {
            for other in before.iter().filter(|b| b.rule() == accepted.rule) {
                may = or(may, self.writable(other, table, images));
                if may == Some(true) {
                    return may;
                }
            }
        }
        if rule.membership.is_none() && rule.write_rule(table).is_none() {
            may = or(may, self.holds(bucket));
        }
        may
    }

    /// May the mutation put a row of `table` into each of `entering`, the row lying in
    /// `row_buckets` (the server's `authorize_entering`)? A claim bucket the actor holds whose
    /// rule says nothing of the table takes a row the actor may write through another of the
    /// row's buckets.
    fn entering(
        &mut self,
        table: &TableMeta,
        entering: &BTreeSet<BucketKey>,
        row_buckets: &BTreeSet<BucketKey>,
        images: &[&Row],
    ) -> Verdict {
        let mut read_only = Vec::new();
        let mut unknown = false;
        for bucket in entering {
            match self.entering_one(table.name, bucket, row_buckets, images) {
                Entering::ReadOnly => read_only.push(bucket),
                Entering::Verdict(Verdict::Refused(error)) => return Verdict::Refused(error),
                Entering::Verdict(Verdict::Unknown) => unknown = true,
                Entering::Verdict(Verdict::Allowed) => {}
            }
        }
        for bucket in read_only {
            let others = row_buckets.iter().filter(|other| *other != bucket);
            match any(others.map(|other| self.writable(other, table.name, images))) {
                Some(false) => return self.refuse_change(table.name, &BTreeSet::from([bucket.clone()])),
                None => unknown = true,
                Some(true) => {}
            }
        }
        if unknown { Verdict::Unknown } else { Verdict::Allowed }
    }

    /// May the mutation put a row of `table` into `bucket` (the server's
    /// `authorize_entering_one`)? A bucket of a membership rule the actor does not hold may be
    /// one the mutation creates: the client cannot tell whether it had rows, so the answer is
    /// unknown, and the bucket is noted as created.
    fn entering_one(
        &mut self,
        table: &str,
        bucket: &BucketKey,
        row_buckets: &BTreeSet<BucketKey>,
        images: &[&Row],
    ) -> Entering {
        let mut may = self.writable(bucket, table, images);
        if may == Some(true) {
            return Entering::Verdict(Verdict::Allowed);
        }
        let Some(rule) = self.rule(bucket) else {
            return Entering::Verdict(Verdict::Refused(refusal::forbidden(table, bucket.rule(), Refusal::Puts)));
        };
        for accepted in rule.accepts {
            for other in row_buckets.iter().filter(|b| b.rule() == accepted.rule) {
                let writable = self.writable(other, table, images);
                let receiver = if accepted.open || writable == Some(false) {
                    Some(true)
                } else {
                    self.receiver_holds(rule, bucket, other)
                };
                let admitted = and(writable, receiver);
                if admitted == Some(true) {
                    return Entering::Verdict(Verdict::Allowed);
                }
                may = or(may, admitted);
            }
        }
        // What the server does when neither allowed it; unknown when one might have.
        let rest = match self.holds(bucket) {
            Some(true) if rule.membership.is_none() && rule.write_rule(table).is_none() => Entering::ReadOnly,
            Some(true) => Entering::Verdict(self.refuse_change(table, &BTreeSet::from([bucket.clone()]))),
            // A claim bucket of another actor, or one held `while(...)` another's, is never new.
            Some(false) if rule.membership.is_none() || rule.held_while.is_some() => {
                Entering::Verdict(Verdict::Refused(refusal::forbidden(table, bucket.rule(), Refusal::Puts)))
            }
            None if rule.held_while.is_some() => Entering::Verdict(Verdict::Unknown),
            _ => {
                self.created.insert(bucket.clone());
                Entering::Verdict(Verdict::Unknown)
            }
        };
        if may.is_none() { Entering::Verdict(Verdict::Unknown) } else { rest }
    }

    /// Whether the receiver of a row a checked `accept(...)` admits into `bucket` of `rule`, the
    /// actor its claim parameters name, holds `source` (the server's `receiver_holds`). The
    /// client can tell only when the receiver is the actor itself.
    fn receiver_holds(&self, rule: &RuleMeta, bucket: &BucketKey, source: &BucketKey) -> Option<bool> {
        if rule.membership.is_some() && rule.held_while.is_none() {
            return Some(false);
        }
        if rule.membership.is_none() && claim_bucket(rule, self.actor).as_ref() == Some(bucket) {
            return self.holds(source);
        }
        None
    }

    /// Before a row of `table` becomes `row` (from `before`, none for an insert): it accepts no
    /// other member's invitation, and the buckets and write permissions it grants its member
    /// are ones the actor has, or new (the server's `authorize_granting`). Whether a bucket the
    /// actor does not hold had rows the client cannot tell: unknown, and noted as created. A
    /// permission is asked of every alternative of the rule's `write(...)`, which the server
    /// narrows to those as wide as the one granted: a refusal here is one there.
    fn granting(&mut self, table: &TableMeta, before: Option<&Row>, row: &Row) -> Verdict {
        if let Some(bucket) = self.index.accepted_for_another(table, before, row, self.actor) {
            return Verdict::Refused(refusal::forbidden(table.name, bucket.rule(), Refusal::Accepts));
        }
        let mut unknown = false;
        for rule in self.index.granting() {
            let Some(bucket) = rule.granted_by(table, row) else { continue };
            if self.created.contains(&bucket) {
                continue;
            }
            if self.holds(&bucket) != Some(true) {
                self.created.insert(bucket);
                unknown = true;
                continue;
            }
            for write in rule.writes {
                if !write.any_of.iter().any(|alternative| member_terms_hold(row, alternative.member)) {
                    continue;
                }
                match self.may_write(&bucket, write.table, &[]) {
                    Some(false) => {
                        return Verdict::Refused(refusal::forbidden(table.name, bucket.rule(), Refusal::Grants));
                    }
                    None => unknown = true,
                    Some(true) => {}
                }
            }
        }
        if unknown { Verdict::Unknown } else { Verdict::Allowed }
    }
}

#[cfg(test)]
mod tests;
