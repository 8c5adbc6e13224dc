//! Presence: what this client announces in each bucket (sent again on every reconnection), and
//! who is present in the buckets it follows, kept from the server's `presence_state` and
//! `presence_diff` frames.

use std::collections::{BTreeMap, BTreeSet};

use engine_kernel::BucketKey;
use serde_json::{Map, Value};

/// Presence key (user id) → one meta per connection.
pub type PresenceState = BTreeMap<String, Vec<Map<String, Value>>>;

/// A bucket's presence changed.
#[derive(Debug, Clone, PartialEq)]
pub struct PresenceEvent {
    /// The bucket.
    pub bucket: BucketKey,
    /// Everyone present in it now.
    pub state: PresenceState,
}

#[derive(Debug, Default)]
pub(crate) struct Presence {
    /// What this client tracks, by bucket.
    pub(crate) tracked: BTreeMap<BucketKey, Map<String, Value>>,
    /// The server refused a presence as too many (`too_many_presences`): none of `tracked` is
    /// announced until the app changes it, since the same presences announced again would have
    /// every connection closed in turn.
    pub(crate) refused: bool,
    /// Who is present, by bucket.
    pub(crate) states: BTreeMap<BucketKey, PresenceState>,
}

fn presence_ref(meta: &Map<String, Value>) -> Option<&Value> {
    meta.get("presenceRef")
}

impl Presence {
    pub(crate) fn replace(&mut self, bucket: &BucketKey, state: PresenceState) -> PresenceState {
        self.states.insert(bucket.clone(), state.clone());
        state
    }

    /// Apply a `presence_diff`. `None` when the bucket has no state: the server sends the state
    /// of a bucket before its diffs, so a diff without one is late, for a bucket no longer
    /// followed.
    pub(crate) fn diff(
        &mut self,
        bucket: &BucketKey,
        joins: PresenceState,
        leaves: PresenceState,
    ) -> Option<PresenceState> {
        let state = self.states.get_mut(bucket)?;
        for (key, metas) in leaves {
            if let Some(present) = state.get_mut(&key) {
                present.retain(|m| !metas.iter().any(|left| presence_ref(left) == presence_ref(m)));
                if present.is_empty() {
                    state.remove(&key);
                }
            }
        }
        for (key, metas) in joins {
            let present = state.entry(key).or_default();
            for meta in metas {
                if !present.iter().any(|m| presence_ref(m) == presence_ref(&meta)) {
                    present.push(meta);
                }
            }
        }
        Some(state.clone())
    }

    /// Forget who is present in `buckets` (no longer followed). Returns those that had a state.
    pub(crate) fn forget(&mut self, buckets: &BTreeSet<BucketKey>) -> Vec<BucketKey> {
        buckets.iter().filter(|b| self.states.remove(*b).is_some()).cloned().collect()
    }

    /// Forget who is present in every bucket but `followed`. Returns those that had a state.
    pub(crate) fn keep_only(&mut self, followed: &BTreeSet<BucketKey>) -> Vec<BucketKey> {
        let gone: BTreeSet<BucketKey> = self.states.keys().filter(|b| !followed.contains(*b)).cloned().collect();
        self.forget(&gone)
    }

    /// Forget who is present anywhere (the stream is down: states come afresh on
    /// reconnection). Returns the buckets that had a state.
    pub(crate) fn forget_all(&mut self) -> Vec<BucketKey> {
        std::mem::take(&mut self.states).into_keys().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metas(items: Value) -> PresenceState {
        serde_json::from_value(items).unwrap()
    }

    #[test]
    fn diffs_join_and_leave_by_presence_ref() {
        let bucket = BucketKey::new("shared", &["l1"]);
        let mut presence = Presence::default();
        presence.replace(&bucket, metas(json!({"alice": [{"presenceRef": "a1", "at": "title"}]})));
        let state = presence.diff(
            &bucket,
            metas(json!({"alice": [{"presenceRef": "a2"}], "bob": [{"presenceRef": "b1"}]})),
            metas(json!({"alice": [{"presenceRef": "a1"}]})),
        );
        assert_eq!(state, Some(metas(json!({"alice": [{"presenceRef": "a2"}], "bob": [{"presenceRef": "b1"}]}))));
        let state = presence.diff(&bucket, PresenceState::new(), metas(json!({"bob": [{"presenceRef": "b1"}]})));
        assert_eq!(state, Some(metas(json!({"alice": [{"presenceRef": "a2"}]}))), "a key with no meta left is gone");

        let other = BucketKey::new("shared", &["l2"]);
        let late = presence.diff(&other, metas(json!({"bob": [{"presenceRef": "b1"}]})), PresenceState::new());
        assert_eq!(late, None, "a diff before any state is ignored");
        assert!(!presence.states.contains_key(&other));
    }
}
