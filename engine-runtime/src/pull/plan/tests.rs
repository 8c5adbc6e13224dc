//! The rows of `docs/design.md` §3's table of a bucket's fate, one test each, and the rest of the
//! plan: reset, readiness, `hasMore` and the next cursor's groups.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::BucketKey;

use super::*;
use crate::pull::cursor::{TombstonePosition, Walk};

fn own(id: &str) -> BucketKey {
    BucketKey::new("own", &[id])
}

fn shared(id: &str) -> BucketKey {
    BucketKey::new("shared", &[id])
}

fn held(buckets: &[BucketKey]) -> BTreeSet<BucketKey> {
    buckets.iter().cloned().collect()
}

/// A group at row position `rows`, tombstones at `rows` too.
fn at(rows: u64, buckets: &[BucketKey]) -> Group {
    Group { rows, ..Group::fresh(buckets.to_vec(), rows) }
}

/// A cursor of `groups`, written when each rule's digest was `v1`.
fn cursor(groups: Vec<Group>) -> Cursor {
    let rules = BTreeMap::from([("own".to_owned(), "v1".to_owned()), ("shared".to_owned(), "v1".to_owned())]);
    Cursor::new(groups, rules)
}

fn same_rules(_: &str) -> Option<&'static str> {
    Some("v1")
}

const HORIZON: u64 = 100;

#[test]
fn a_held_bucket_in_the_cursor_and_asked_for_is_walked_on_from_its_position() {
    let plan = plan(cursor(vec![at(40, &[own("a")])]), &held(&[own("a")]), &BTreeMap::new(), None, same_rules, HORIZON)
        .unwrap();
    assert_eq!(plan.walked, vec![at(40, &[own("a")])]);
    assert!(plan.parked.is_empty() && plan.removed.is_empty() && plan.resynced.is_empty());
    assert_eq!(plan.asked, held(&[own("a")]));
}

#[test]
fn a_held_bucket_in_the_cursor_a_subset_did_not_ask_for_is_parked_where_it_was() {
    let groups = vec![at(40, &[own("a"), shared("l")])];
    let asked = [shared("l")];
    let plan =
        plan(cursor(groups), &held(&[own("a"), shared("l")]), &BTreeMap::new(), Some(&asked), same_rules, HORIZON)
            .unwrap();
    assert_eq!(plan.walked, vec![at(40, &[shared("l")])]);
    assert_eq!(plan.parked, vec![at(40, &[own("a")])], "its position is kept");
    assert!(plan.removed.is_empty());
}

#[test]
fn a_bucket_held_through_a_membership_written_after_its_groups_position_is_resynced() {
    let groups = vec![at(40, &[own("a"), shared("l")])];
    let all = held(&[own("a"), shared("l")]);
    // Lost and granted again (or its membership changed) at 60: it leaves the cursor, reported.
    let since = BTreeMap::from([(shared("l"), 60)]);
    let planned = plan(cursor(groups.clone()), &all, &since, None, same_rules, HORIZON).unwrap();
    assert_eq!(planned.walked, vec![at(40, &[own("a")])]);
    assert_eq!(planned.removed, vec![shared("l")]);
    assert_eq!(planned.resynced, held(&[shared("l")]));
    assert!(has_more(&planned, HORIZON), "the next pull starts it afresh");
    // Held through a membership from before the group's position: it goes on.
    let since = BTreeMap::from([(shared("l"), 40)]);
    let planned = plan(cursor(groups), &all, &since, None, same_rules, HORIZON).unwrap();
    assert_eq!(planned.walked, vec![at(40, &[own("a"), shared("l")])]);
    assert!(planned.removed.is_empty());
    // The fresh group of the next pull is past the membership: it is not resynced again.
    let next = vec![at(40, &[own("a")]), Group { granted: 60, ..Group::fresh(vec![shared("l")], 50) }];
    let since = BTreeMap::from([(shared("l"), 60)]);
    let planned = plan(cursor(next), &all, &since, None, same_rules, HORIZON).unwrap();
    assert!(planned.resynced.is_empty() && planned.removed.is_empty());
}

#[test]
fn a_fresh_group_notes_the_memberships_its_buckets_are_held_through() {
    let all = held(&[own("a"), shared("l")]);
    // Granted by a transaction not below the horizon yet (one older still runs).
    let since = BTreeMap::from([(shared("l"), HORIZON + 5)]);
    let planned = plan(cursor(vec![at(40, &[own("a")])]), &all, &since, None, same_rules, HORIZON).unwrap();
    let fresh = Group { granted: HORIZON + 5, ..Group::fresh(vec![shared("l")], HORIZON) };
    assert_eq!(planned.walked, vec![fresh.clone(), at(40, &[own("a")])]);
    // The next pull finds it held through that same membership: it goes on.
    let planned = plan(cursor(vec![at(40, &[own("a")]), fresh]), &all, &since, None, same_rules, HORIZON).unwrap();
    assert!(planned.resynced.is_empty() && planned.removed.is_empty());
}

#[test]
fn a_held_bucket_new_to_the_cursor_joins_a_fresh_group() {
    let plan = plan(
        cursor(vec![at(40, &[own("a")])]),
        &held(&[own("a"), shared("l")]),
        &BTreeMap::new(),
        None,
        same_rules,
        HORIZON,
    )
    .unwrap();
    let fresh = Group::fresh(vec![shared("l")], HORIZON);
    assert_eq!(fresh.rows, 0, "rows from the beginning");
    assert_eq!(fresh.tombstones, TombstonePosition::at(HORIZON), "tombstones from the horizon");
    assert_eq!(plan.walked, vec![fresh, at(40, &[own("a")])], "the oldest position first");
}

#[test]
fn a_held_bucket_new_to_the_cursor_a_subset_did_not_ask_for_stays_out_of_it() {
    let asked = [own("a")];
    let plan = plan(
        cursor(vec![at(40, &[own("a")])]),
        &held(&[own("a"), shared("l")]),
        &BTreeMap::new(),
        Some(&asked),
        same_rules,
        HORIZON,
    )
    .unwrap();
    assert_eq!(plan.walked, vec![at(40, &[own("a")])]);
    assert!(plan.parked.is_empty(), "nothing to park: the cursor never had it");
    assert!(!next_groups(plan).iter().any(|g| g.buckets.contains(&shared("l"))));
}

#[test]
fn a_bucket_no_longer_held_leaves_the_cursor_and_is_reported_removed() {
    let groups = vec![at(40, &[own("a"), shared("l")])];
    let plan = plan(cursor(groups), &held(&[own("a")]), &BTreeMap::new(), None, same_rules, HORIZON).unwrap();
    assert_eq!(plan.removed, vec![shared("l")]);
    assert_eq!(plan.walked, vec![at(40, &[own("a")])]);
    assert!(next_groups(plan).iter().all(|g| !g.buckets.contains(&shared("l"))));
}

#[test]
fn a_bucket_whose_rule_changed_is_resynced_whether_asked_or_not() {
    let changed = |rule: &str| Some(if rule == "shared" { "v2" } else { "v1" });
    let groups = vec![at(40, &[own("a"), shared("l"), shared("m")])];
    let all = held(&[own("a"), shared("l"), shared("m")]);
    for subset in [None, Some(&[own("a"), shared("l")][..])] {
        let plan = plan(cursor(groups.clone()), &all, &BTreeMap::new(), subset, changed, HORIZON).unwrap();
        assert_eq!(plan.resynced, held(&[shared("l"), shared("m")]), "{subset:?}");
        assert_eq!(plan.removed, vec![shared("l"), shared("m")], "reported removed: {subset:?}");
        assert_eq!(plan.walked, vec![at(40, &[own("a")])], "not walked now: {subset:?}");
        assert!(has_more(&plan, HORIZON), "the next pull starts them afresh: {subset:?}");
    }
}

#[test]
fn a_bucket_asked_for_and_not_held_refuses_the_pull() {
    let asked = [shared("theirs")];
    let refused =
        plan(cursor(vec![]), &held(&[own("a")]), &BTreeMap::new(), Some(&asked), same_rules, HORIZON).unwrap_err();
    assert!(matches!(&refused, Error::Forbidden(why) if why.contains("shared/theirs")), "{refused:?}");
}

#[test]
fn a_first_pull_walks_every_held_bucket_in_one_fresh_group() {
    let plan =
        plan(Cursor::default(), &held(&[own("a"), shared("l")]), &BTreeMap::new(), None, same_rules, HORIZON).unwrap();
    assert_eq!(plan.walked, vec![Group::fresh(vec![own("a"), shared("l")], HORIZON)]);
    assert!(plan.removed.is_empty() && plan.parked.is_empty());
    assert!(has_more(&plan, HORIZON), "nothing delivered yet");
}

#[test]
fn a_cursor_behind_the_tombstone_horizon_starts_afresh() {
    let behind = cursor(vec![at(40, &[own("a")]), at(90, &[shared("l")])]);
    assert!(needs_reset(&behind, 41), "a group's tombstones were collected");
    assert!(!needs_reset(&behind, 40), "exactly at the horizon: nothing it needs was collected");
    assert!(!needs_reset(&Cursor::default(), u64::MAX));
}

#[test]
fn a_walk_begun_at_a_later_horizon_waits_for_a_pull_that_has_seen_it() {
    let walking = Group { walk: Some(Walk { to: 120, selection: None, point: None }), ..at(40, &[own("a")]) };
    assert!(!is_ready(&walking, HORIZON));
    assert!(is_ready(&walking, 120));
    let plan = Plan { walked: vec![walking], ..Plan::default() };
    assert!(!has_more(&plan, HORIZON), "a pull at this horizon cannot take it further");
}

#[test]
fn a_caught_up_pull_has_no_more() {
    let plan =
        plan(cursor(vec![at(HORIZON, &[own("a")])]), &held(&[own("a")]), &BTreeMap::new(), None, same_rules, HORIZON)
            .unwrap();
    assert!(!has_more(&plan, HORIZON));
    assert!(has_more(&plan, HORIZON + 1), "a later commit is more");
}

#[test]
fn groups_at_one_position_become_one() {
    let plan = Plan {
        walked: vec![at(40, &[own("a")]), at(40, &[shared("l")])],
        parked: vec![at(40, &[shared("m")]), at(50, &[shared("n")])],
        ..Plan::default()
    };
    assert_eq!(next_groups(plan), vec![at(40, &[own("a"), shared("l"), shared("m")]), at(50, &[shared("n")])]);
}

#[test]
fn past_the_most_groups_the_two_closest_merge_at_the_earlier_position() {
    let position = |i: u64| if i == 5 { 41 } else { i * 10 };
    let walked: Vec<Group> = (0..=MAX_GROUPS as u64).map(|i| at(position(i), &[own(&i.to_string())])).collect();
    let groups = next_groups(Plan { walked, ..Plan::default() });
    assert_eq!(groups.len(), MAX_GROUPS);
    let merged = groups.iter().find(|g| g.buckets.len() == 2).expect("one merged group");
    assert_eq!(merged.buckets, vec![own("4"), own("5")], "positions 40 and 41 are the closest");
    assert_eq!((merged.rows, merged.tombstones), (40, TombstonePosition::at(40)), "at the earlier position");
}

#[test]
fn rules_and_open_buckets_ask_for_held_buckets_only_and_buckets_stay_strict() {
    let all = held(&[own("a"), shared("l"), shared("m")]);
    let request =
        |buckets: Option<Vec<BucketKey>>, rules: Option<Vec<&str>>, open: Option<Vec<BucketKey>>| PullRequest {
            buckets,
            rules: rules.map(|r| r.into_iter().map(str::to_owned).collect()),
            open,
            ..PullRequest::default()
        };
    assert_eq!(subset(&request(None, None, None), &all), None, "nothing named: every bucket held");
    // `open` leaves out what is not held; `rules` brings every held bucket of the rule.
    let asked = subset(&request(None, Some(vec!["own"]), Some(vec![shared("l"), shared("gone")])), &all);
    assert_eq!(asked, Some(vec![own("a"), shared("l")]));
    assert_eq!(subset(&request(None, None, Some(vec![])), &all), Some(vec![]), "an empty `open` syncs nothing");
    // `buckets` stays as it is, so the plan refuses a bucket not held.
    let asked = subset(&request(Some(vec![shared("gone")]), Some(vec!["own"]), None), &all).unwrap();
    assert!(plan(cursor(vec![]), &all, &BTreeMap::new(), Some(asked.as_slice()), same_rules, HORIZON).is_err());
}

#[test]
fn a_restarted_bucket_the_pull_syncs_starts_afresh_and_others_stay_where_they_were() {
    let all = held(&[own("a"), shared("l"), shared("m")]);
    let mut parked = cursor(vec![at(40, &[own("a"), shared("l")]), at(50, &[shared("m")])]);
    // `shared/m` is not synced by this pull: asked to restart, it stays parked.
    let asked = [own("a"), shared("l")];
    restart(&mut parked, &[shared("l"), shared("m")], Some(&asked));
    assert_eq!(parked.groups, vec![at(40, &[own("a")]), at(50, &[shared("m")])]);
    let planned = plan(parked, &all, &BTreeMap::new(), Some(&asked), same_rules, HORIZON).unwrap();
    assert_eq!(planned.walked, vec![Group::fresh(vec![shared("l")], HORIZON), at(40, &[own("a")])]);
    assert_eq!(planned.parked, vec![at(50, &[shared("m")])]);
    assert!(planned.removed.is_empty(), "a restarted bucket is not reported removed");
    // A whole group restarted leaves no empty group behind.
    let mut whole = cursor(vec![at(50, &[shared("m")])]);
    restart(&mut whole, &[shared("m")], None);
    assert!(whole.groups.is_empty());
}
