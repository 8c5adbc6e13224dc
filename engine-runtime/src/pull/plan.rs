//! The plan of a pull (`docs/design.md` §3, the table of a bucket's fate): from the cursor, the
//! buckets the actor holds in the pull's snapshot and the buckets the request asks for, which
//! groups the pull walks, which it parks, which buckets leave the cursor and which are
//! resynced; and once the page is taken, the groups the next cursor holds. No I/O: every
//! decision here has a row in that table and a unit test.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::BucketKey;
use engine_kernel::wire::PullRequest;

use super::cursor::{Cursor, Group, MAX_GROUPS};
use crate::error::{Error, Result};

/// What a pull does with each bucket.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    /// The groups the pull walks (fresh buckets in a group of their own), from the oldest row
    /// position.
    pub(crate) walked: Vec<Group>,
    /// Held buckets a subset pull did not ask for: they stay in the cursor where they were.
    pub(crate) parked: Vec<Group>,
    /// Buckets that leave the cursor, reported in `removedBuckets`: lost, or resynced.
    pub(crate) removed: Vec<BucketKey>,
    /// Buckets whose rule selects other rows than when the cursor was written, or that the
    /// actor holds through a membership written after the cursor's position (regained).
    pub(crate) resynced: BTreeSet<BucketKey>,
    /// The buckets whose rows and tombstones the page may take.
    pub(crate) asked: BTreeSet<BucketKey>,
}

/// Whether a cursor must start afresh because tombstones it still needs were collected: one of
/// its groups is behind the tombstone horizon.
pub(crate) fn needs_reset(cursor: &Cursor, tombstone_horizon: u64) -> bool {
    cursor.groups.iter().any(|g| g.tombstones.xid < tombstone_horizon)
}

/// The plan of a pull at `horizon`: `held` are the buckets the actor holds, `since` for those
/// held through membership rows of a synced table the transaction that last wrote the oldest of
/// them (the actor has held the bucket since, perhaps not before), `subset` the request's
/// `buckets` (all held when none), `version` each rule's digest now.
pub(crate) fn plan<'r>(
    cursor: Cursor,
    held: &BTreeSet<BucketKey>,
    since: &BTreeMap<BucketKey, u64>,
    subset: Option<&[BucketKey]>,
    version: impl Fn(&str) -> Option<&'r str>,
    horizon: u64,
) -> Result<Plan> {
    let asked: BTreeSet<BucketKey> = match subset {
        None => held.clone(),
        Some(subset) => {
            if let Some(missing) = subset.iter().find(|b| !held.contains(b)) {
                return Err(Error::Forbidden(format!("the actor does not hold bucket `{missing}`")));
            }
            subset.iter().cloned().collect()
        }
    };
    // The buckets of a rule that selects other rows than when the cursor was written leave it
    // and are reported removed; the next pull back-fills them afresh. The other buckets go on.
    let changed_rules: BTreeSet<&str> = cursor
        .rules
        .iter()
        .filter(|(rule, digest)| version(rule) != Some(digest.as_str()))
        .map(|(rule, _)| rule.as_str())
        .collect();
    // A bucket held through a membership written after its group's tombstone position may have
    // been lost and regained meanwhile: tombstones from that position would tell the keys of
    // rows deleted while the actor was out. It is resynced too, and starts afresh.
    let regained = |group: &Group, bucket: &BucketKey| {
        since.get(bucket).is_some_and(|&s| s > group.tombstones.xid.max(group.granted))
    };
    let resynced: BTreeSet<BucketKey> = cursor
        .groups
        .iter()
        .flat_map(|g| g.buckets.iter().map(move |b| (g, b)))
        .filter(|&(g, b)| held.contains(b) && (changed_rules.contains(b.rule()) || regained(g, b)))
        .map(|(_, b)| b.clone())
        .collect();
    let known: BTreeSet<BucketKey> = cursor.buckets().cloned().collect();
    let asked: BTreeSet<BucketKey> = asked.difference(&resynced).cloned().collect();
    let kept: BTreeSet<BucketKey> = held.difference(&resynced).cloned().collect();

    // Buckets the actor lost leave the cursor and are reported; held buckets a subset pull did
    // not ask for stay in the cursor where they were, untouched.
    let removed: Vec<BucketKey> = known.difference(&kept).cloned().collect();
    let mut walked: Vec<Group> = Vec::new();
    let mut parked: Vec<Group> = Vec::new();
    for group in cursor.groups {
        let (asked_here, other): (Vec<BucketKey>, Vec<BucketKey>) =
            group.buckets.iter().filter(|&b| kept.contains(b)).cloned().partition(|b| asked.contains(b));
        if !other.is_empty() {
            parked.push(Group { buckets: other, ..group.clone() });
        }
        if !asked_here.is_empty() {
            walked.push(Group { buckets: asked_here, ..group });
        }
    }
    let fresh: Vec<BucketKey> = asked.difference(&known).cloned().collect();
    if !fresh.is_empty() {
        // Its buckets are held through these memberships now: one newer was granted later.
        let granted = fresh.iter().filter_map(|b| since.get(b)).copied().max().unwrap_or(0);
        walked.push(Group { granted, ..Group::fresh(fresh, horizon) });
    }
    walked.sort_by_key(|g| (g.rows, g.tombstones));
    Ok(Plan { walked, parked, removed, resynced, asked })
}

/// The subset of buckets `request` asks for, given the buckets the actor holds (`held`): its
/// `buckets` as they are (the plan refuses one not held), the held ones of `open`, and every held
/// bucket of its `rules`. `None` when it names none of the three: every bucket held.
pub(crate) fn subset(request: &PullRequest, held: &BTreeSet<BucketKey>) -> Option<Vec<BucketKey>> {
    if request.buckets.is_none() && request.rules.is_none() && request.open.is_none() {
        return None;
    }
    let mut asked: BTreeSet<BucketKey> = request.buckets.iter().flatten().cloned().collect();
    asked.extend(request.open.iter().flatten().filter(|b| held.contains(*b)).cloned());
    let rules: BTreeSet<&str> = request.rules.iter().flatten().map(String::as_str).collect();
    asked.extend(held.iter().filter(|b| rules.contains(b.rule())).cloned());
    Some(asked.into_iter().collect())
}

/// Take the buckets of `restart` that the pull syncs (`asked`, all held when `None`) out of
/// `cursor`, so the plan finds them fresh: rows from the beginning, tombstones from the horizon,
/// as for a bucket the client has never had. A client asks this for a bucket whose rows it
/// dropped while the cursor kept it parked (`docs/design.md` §3, "Sync what is open").
pub(crate) fn restart(cursor: &mut Cursor, restart: &[BucketKey], asked: Option<&[BucketKey]>) {
    // Sets, not the request's lists: each bucket of the cursor is looked up in both.
    let restart: BTreeSet<&BucketKey> = restart.iter().collect();
    let asked: Option<BTreeSet<&BucketKey>> = asked.map(|asked| asked.iter().collect());
    let out = |b: &BucketKey| restart.contains(b) && asked.as_ref().is_none_or(|asked| asked.contains(b));
    for group in &mut cursor.groups {
        group.buckets.retain(|b| !out(b));
    }
    cursor.groups.retain(|g| !g.buckets.is_empty());
}

/// Whether `group` can go on in a snapshot of `horizon`: a walk begun by a server that had seen
/// a later horizon waits until this one has too.
pub(crate) fn is_ready(group: &Group, horizon: u64) -> bool {
    group.walk.as_ref().is_none_or(|w| w.to <= horizon)
}

/// Whether the client should pull again at once: a bucket was resynced (the next pull starts it
/// afresh), or a walked group is behind `horizon` and ready to go on.
pub(crate) fn has_more(plan: &Plan, horizon: u64) -> bool {
    !plan.resynced.is_empty() || plan.walked.iter().any(|g| !g.is_caught_up(horizon) && is_ready(g, horizon))
}

/// The groups the next cursor holds once the page is taken: the walked and the parked ones,
/// those at the same position as one, and at most [`MAX_GROUPS`].
pub(crate) fn next_groups(plan: Plan) -> Vec<Group> {
    let mut groups = plan.walked;
    groups.extend(plan.parked);
    bound_groups(merge_groups(groups))
}

/// At most [`MAX_GROUPS`] groups: beyond that, the two groups whose row positions are closest
/// become one at the earlier of their positions (rows and tombstones between the two are sent
/// again, which clients apply as they did the first time).
fn bound_groups(mut groups: Vec<Group>) -> Vec<Group> {
    while groups.len() > MAX_GROUPS {
        groups.sort_by_key(|g| (g.rows, g.tombstones));
        let closest =
            (1..groups.len()).min_by_key(|&i| groups[i].rows - groups[i - 1].rows).expect("two groups or more");
        let later = groups.remove(closest);
        let earlier = &mut groups[closest - 1];
        earlier.buckets.extend(later.buckets);
        earlier.buckets.sort();
        earlier.buckets.dedup();
        earlier.tombstones = earlier.tombstones.min(later.tombstones);
        earlier.granted = earlier.granted.max(later.granted);
        // A walk's position is its buckets' own: the merged group walks again from its start.
        earlier.walk = None;
    }
    groups
}

/// Groups that reached the same position become one.
fn merge_groups(groups: Vec<Group>) -> Vec<Group> {
    let mut merged: Vec<Group> = Vec::new();
    for group in groups {
        let same = |g: &Group| g.rows == group.rows && g.tombstones == group.tombstones;
        match merged.iter_mut().find(|g| g.walk.is_none() && group.walk.is_none() && same(g)) {
            Some(existing) => {
                existing.granted = existing.granted.max(group.granted);
                existing.buckets.extend(group.buckets);
                existing.buckets.sort();
                existing.buckets.dedup();
            }
            None => merged.push(group),
        }
    }
    merged
}

#[cfg(test)]
mod tests;
