//! A pull's page as it fills: its budget (entries and bytes of row data), its changes (one per
//! row, with every requested bucket the row is in, the row kept as its JSON text) and its
//! tombstones.
//!
//! A page never holds the same row for the same bucket both as a change and as a tombstone, so a
//! client may apply its two lists in any order.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::wire::Tombstone;
use engine_kernel::{BucketKey, Hlc, Row, TableMeta};
use serde::de::{self, Deserialize, Deserializer};
use serde_json::Value;

use crate::pull::Pulled;

/// The most entries a page makes room for before it has any.
const PREALLOCATED: usize = 1_000;
/// The bytes of row text a page makes room for before it has any.
const PREALLOCATED_BYTES: usize = 256 * 1024;

/// A page being filled.
pub(super) struct Page<'a> {
    rules: &'a RuleIndex,
    requested: &'a BTreeSet<BucketKey>,
    entries_left: usize,
    bytes_left: usize,
    /// The changes taken, in the answer they go out in.
    changes: Pulled,
    /// Where each row's change is in `changes`, by table and key.
    rows: HashMap<(&'static str, String), usize>,
    tombstones: Vec<Tombstone>,
    memo: BucketMemo,
    /// The text of the newest clock stamp of the rows taken (empty: none yet).
    newest: String,
}

impl<'a> Page<'a> {
    pub(super) fn new(rules: &'a RuleIndex, requested: &'a BTreeSet<BucketKey>, entries: usize, bytes: usize) -> Self {
        Page {
            rules,
            requested,
            entries_left: entries,
            bytes_left: bytes,
            changes: {
                let mut changes = Pulled::default();
                changes.reserve(entries.min(PREALLOCATED), bytes.min(PREALLOCATED_BYTES));
                changes
            },
            rows: HashMap::with_capacity(entries.min(PREALLOCATED)),
            tombstones: Vec::new(),
            memo: BucketMemo::default(),
            newest: String::new(),
        }
    }

    /// How many more entries the page takes.
    pub(super) fn entries_left(&self) -> usize {
        if self.bytes_left == 0 { 0 } else { self.entries_left }
    }

    pub(super) fn is_full(&self) -> bool {
        self.entries_left() == 0
    }

    /// Whether the page has room for a row of `bytes` bytes of JSON (a page takes at least one
    /// entry, however large).
    pub(super) fn fits(&self, bytes: usize) -> bool {
        let empty = self.changes.changes_len() == 0 && self.tombstones.is_empty();
        self.entries_left > 0 && (empty || bytes <= self.bytes_left)
    }

    /// Take a row of `table` whose JSON object is `json`, whose key's [`identity`] is `key` and
    /// whose columns deciding its buckets are `deciding`. A row already in the page is not taken
    /// twice.
    pub(super) fn add_row(&mut self, table: &'static TableMeta, key: String, deciding: &Row, json: &[u8]) {
        self.entries_left = self.entries_left.saturating_sub(1);
        self.bytes_left = self.bytes_left.saturating_sub(json.len());
        let identity = (table.name, key);
        if self.rows.contains_key(&identity) {
            return;
        }
        let buckets = self.memo.buckets(self.rules, table, deciding, self.requested);
        self.rows.insert(identity, self.changes.changes_len());
        self.changes.push_change(table.name, json, buckets);
    }

    /// Note the clock stamps of a row taken: its newest reading, or the text of a JSON object of
    /// readings. Readings in their text form order as the clocks do (fixed-width time and
    /// counter, then the node), so the page keeps the greatest text that reads as a clock.
    pub(super) fn observe(&mut self, stamps: &str) {
        let newest = if stamps.starts_with('{') {
            let Ok(Newest(Some(newest))) = serde_json::from_str::<Newest<'_>>(stamps) else { return };
            newest
        } else {
            Cow::Borrowed(stamps)
        };
        if newest.as_ref() > self.newest.as_str() && newest.parse::<Hlc>().is_ok() {
            self.newest.clear();
            self.newest.push_str(&newest);
        }
    }

    /// The newest clock stamp of the rows taken.
    pub(super) fn newest(&self) -> Option<Hlc> {
        self.newest.parse().ok()
    }

    /// Take a tombstone: the row of `table` with `key` left `buckets`.
    pub(super) fn add_tombstone(&mut self, table: String, key: Row, buckets: Vec<BucketKey>) {
        self.entries_left = self.entries_left.saturating_sub(1);
        if !buckets.is_empty() {
            self.tombstones.push(Tombstone { table, key, buckets });
        }
    }

    /// The page's changes and tombstones: tombstones of one row merged, minus every bucket a
    /// change of the same row is in.
    pub(super) fn finish(self) -> Pulled {
        let mut changes = self.changes;
        if self.tombstones.is_empty() {
            return changes;
        }
        let live: HashMap<(String, String), usize> =
            self.rows.iter().map(|((table, key), index)| (((*table).to_owned(), key.clone()), *index)).collect();
        let mut merged: Vec<Tombstone> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for tombstone in self.tombstones {
            let id = (tombstone.table.clone(), identity(tombstone.key.iter().map(|(k, v)| (k.as_str(), v))));
            let held: &[BucketKey] = live.get(&id).map_or(&[], |&i| changes.change_buckets(i));
            let buckets: Vec<BucketKey> = tombstone.buckets.into_iter().filter(|b| !held.contains(b)).collect();
            if buckets.is_empty() {
                continue;
            }
            match index.get(&id) {
                Some(&i) => {
                    let existing = &mut merged[i];
                    existing.buckets.extend(buckets);
                    existing.buckets.sort();
                    existing.buckets.dedup();
                }
                None => {
                    index.insert(id, merged.len());
                    merged.push(Tombstone { table: tombstone.table, key: tombstone.key, buckets });
                }
            }
        }
        changes.tombstones = merged;
        changes
    }
}

/// The greatest value of a JSON object that reads as a clock, read without building the object.
struct Newest<'a>(Option<Cow<'a, str>>);

/// A string of JSON, borrowed from the text unless it has escapes.
#[derive(serde::Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

impl<'de> Deserialize<'de> for Newest<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> de::Visitor<'de> for Visitor {
            type Value = Newest<'de>;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of clock readings")
            }

            fn visit_map<M: de::MapAccess<'de>>(self, mut map: M) -> Result<Newest<'de>, M::Error> {
                let mut newest: Option<Cow<'de, str>> = None;
                while let Some((_, Text(value))) = map.next_entry::<de::IgnoredAny, Text<'de>>()? {
                    if newest.as_ref().is_none_or(|n| value > *n) && value.parse::<Hlc>().is_ok() {
                        newest = Some(value);
                    }
                }
                Ok(Newest(newest))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// A row's key as text, whatever the order of its columns (a key read back from jsonb orders
/// them its own way).
pub(super) fn identity<'v>(mut key: impl Iterator<Item = (&'v str, &'v Value)>) -> String {
    match (key.next(), key.next()) {
        // One column: its value alone (its text as it is when text: a table's keys share a type).
        (Some((_, Value::String(text))), None) => text.clone(),
        (Some((_, value)), None) => value.to_string(),
        (first, second) => {
            let sorted: BTreeMap<&str, &Value> = first.into_iter().chain(second).chain(key).collect();
            serde_json::to_string(&sorted).unwrap_or_default()
        }
    }
}

/// The buckets of the rows of a page, among those requested. Consecutive rows that agree on
/// every column deciding their buckets (most rows of a bootstrap do) share one computation.
#[derive(Default)]
struct BucketMemo {
    table: &'static str,
    columns: Vec<&'static str>,
    values: Vec<Value>,
    buckets: Vec<BucketKey>,
}

impl BucketMemo {
    fn buckets(
        &mut self,
        rules: &RuleIndex,
        table: &'static TableMeta,
        row: &Row,
        requested: &BTreeSet<BucketKey>,
    ) -> Vec<BucketKey> {
        let value = |column: &str| row.get(column).unwrap_or(&Value::Null);
        let same = self.table == table.name && self.columns.iter().zip(&self.values).all(|(c, v)| value(c) == v);
        if !same {
            self.table = table.name;
            self.columns = rules.deciding_columns(table);
            self.values = self.columns.iter().map(|c| value(c).clone()).collect();
            self.buckets = rules.row_buckets(table, row).into_iter().filter(|b| requested.contains(b)).collect();
        }
        self.buckets.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use engine_kernel::Hlc;
    use proptest::prelude::*;

    use super::Page;

    fn clock() -> impl Strategy<Value = Hlc> {
        (0..=9_999_999_999_999u64, any::<u16>(), "[A-Za-z0-9_-]{1,12}")
            .prop_map(|(ms, counter, node)| Hlc::new(ms, counter, node).unwrap())
    }

    proptest! {
        /// The page's newest stamp, kept as text, is the greatest clock of all the rows' stamps.
        #[test]
        fn the_newest_stamp_is_the_greatest_clock(rows in prop::collection::vec(prop::collection::vec(clock(), 0..4), 1..8)) {
            let app = example_notes::app();
            let rules = app.rule_index();
            let requested = BTreeSet::new();
            let mut page = Page::new(&rules, &requested, 10, 1 << 20);
            for stamps in &rows {
                let object: serde_json::Map<String, serde_json::Value> =
                    stamps.iter().enumerate().map(|(i, hlc)| (format!("c{i}"), hlc.to_string().into())).collect();
                page.observe(&serde_json::Value::Object(object).to_string());
            }
            prop_assert_eq!(page.newest(), rows.iter().flatten().max().cloned());
        }
    }

    #[test]
    fn stamps_are_read_as_one_reading_or_an_object_and_anything_else_is_ignored() {
        let app = example_notes::app();
        let rules = app.rule_index();
        let requested = BTreeSet::new();
        let mut page = Page::new(&rules, &requested, 10, 1 << 20);
        for garbage in ["", "[]", "{\"a\": 1}", "not json", "{\"a\": \"x\""] {
            page.observe(garbage);
        }
        assert_eq!(page.newest(), None);
        page.observe(r#"{"title": "0000000000001-0000-a", "t\u0069tle": "0000000000002-0000-\u0062"}"#);
        page.observe(r#"{"done": "0000000000001-ffff-z"}"#);
        assert_eq!(page.newest(), Some(Hlc::new(2, 0, "b").unwrap()));
        // A value that is no clock reading, however great, leaves the readings beside it counted.
        page.observe(r#"{"a": "zzz", "b": "0000000000002-0001-b"}"#);
        assert_eq!(page.newest(), Some(Hlc::new(2, 1, "b").unwrap()));
        // A row that keeps its newest stamp gives that alone.
        page.observe("0000000000003-0000-c");
        page.observe("0000000000002-ffff-d");
        assert_eq!(page.newest(), Some(Hlc::new(3, 0, "c").unwrap()));
    }
}
