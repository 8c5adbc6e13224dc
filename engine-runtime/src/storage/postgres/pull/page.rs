//! A pull's page as it fills: its budget (entries and bytes of row data), its changes (one per
//! row, with every requested bucket the row is in) and its tombstones.
//!
//! A page never holds the same row for the same bucket both as a change and as a tombstone, so a
//! client may apply its two lists in any order.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use engine_kernel::wire::{Change, Tombstone};
use engine_kernel::{BucketKey, Hlc, Row, TableMeta};
use serde_json::Value;

use crate::buckets::RuleIndex;

/// A page being filled.
pub(super) struct Page<'a> {
    rules: &'a RuleIndex,
    requested: &'a BTreeSet<BucketKey>,
    entries_left: usize,
    bytes_left: usize,
    changes: Vec<Change>,
    /// Where each row's change is in `changes`, by table and key.
    rows: HashMap<(&'static str, String), usize>,
    tombstones: Vec<Tombstone>,
    memo: BucketMemo,
    /// The newest clock stamp of the rows taken.
    newest: Option<Hlc>,
}

impl<'a> Page<'a> {
    pub(super) fn new(rules: &'a RuleIndex, requested: &'a BTreeSet<BucketKey>, entries: usize, bytes: usize) -> Self {
        Page {
            rules,
            requested,
            entries_left: entries,
            bytes_left: bytes,
            changes: Vec::new(),
            rows: HashMap::new(),
            tombstones: Vec::new(),
            memo: BucketMemo::default(),
            newest: None,
        }
    }

    /// How many more entries the page takes.
    pub(super) fn entries_left(&self) -> usize {
        if self.bytes_left == 0 { 0 } else { self.entries_left }
    }

    pub(super) fn is_full(&self) -> bool {
        self.entries_left() == 0
    }

    /// Whether the page has room for `row` (a page takes at least one entry, however large).
    pub(super) fn fits(&self, row: &Row) -> bool {
        let empty = self.changes.is_empty() && self.tombstones.is_empty();
        self.entries_left > 0 && (empty || size(row) <= self.bytes_left)
    }

    /// Take `row` of `table`; a row already in the page is not taken twice.
    pub(super) fn add_row(&mut self, table: &'static TableMeta, row: Row) {
        self.entries_left = self.entries_left.saturating_sub(1);
        self.bytes_left = self.bytes_left.saturating_sub(size(&row));
        let identity =
            (table.name, identity(table.primary_key.iter().map(|k| (*k, row.get(*k).unwrap_or(&Value::Null)))));
        if self.rows.contains_key(&identity) {
            return;
        }
        let buckets = self.memo.buckets(self.rules, table, &row, self.requested);
        self.rows.insert(identity, self.changes.len());
        self.changes.push(Change { table: table.name.to_owned(), row, buckets });
    }

    /// Note the clock stamps of a row taken (a JSON object of readings).
    pub(super) fn observe(&mut self, stamps: &Value) {
        let newest = stamps.as_object().into_iter().flat_map(|m| m.values()).filter_map(Value::as_str);
        if let Some(newest) = newest.filter_map(|s| s.parse::<Hlc>().ok()).max() {
            self.newest = self.newest.take().max(Some(newest));
        }
    }

    /// The newest clock stamp of the rows taken.
    pub(super) fn newest(&self) -> Option<&Hlc> {
        self.newest.as_ref()
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
    pub(super) fn finish(self) -> (Vec<Change>, Vec<Tombstone>) {
        if self.tombstones.is_empty() {
            return (self.changes, self.tombstones);
        }
        let changes = self.changes;
        let live: HashMap<(String, String), usize> =
            self.rows.iter().map(|((table, key), index)| (((*table).to_owned(), key.clone()), *index)).collect();
        let mut merged: Vec<Tombstone> = Vec::new();
        let mut index: HashMap<(String, String), usize> = HashMap::new();
        for tombstone in self.tombstones {
            let id = (tombstone.table.clone(), identity(tombstone.key.iter().map(|(k, v)| (k.as_str(), v))));
            let held: &[BucketKey] = live.get(&id).map_or(&[], |&i| changes[i].buckets.as_slice());
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
        (changes, merged)
    }
}

/// A row's key as text, whatever the order of its columns (a key read back from jsonb orders
/// them its own way).
fn identity<'v>(key: impl Iterator<Item = (&'v str, &'v Value)>) -> String {
    let sorted: BTreeMap<&str, &Value> = key.collect();
    serde_json::to_string(&sorted).unwrap_or_default()
}

/// About the size of a row's JSON, in bytes, without writing it.
fn size(row: &Row) -> usize {
    fn value(v: &Value) -> usize {
        match v {
            Value::String(s) => s.len() + 2,
            Value::Null | Value::Bool(_) => 5,
            Value::Number(_) => 12,
            other => serde_json::to_string(other).map_or(0, |s| s.len()),
        }
    }
    row.iter().map(|(k, v)| k.len() + 4 + value(v)).sum()
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
