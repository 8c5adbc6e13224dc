//! A pull's answer as the server holds it: the fields of a [`PullResponse`], with each changed
//! row kept as the JSON text the store wrote for it rather than as a map of values. A page of a
//! thousand rows is one buffer of text instead of thousands of small values made, written and
//! freed; [`Pulled::response`] reads it back as the wire type.

use std::ops::Range;

use engine_kernel::wire::{Bounded, Change, PullProgress, PullResponse, Tombstone};
use engine_kernel::{BucketKey, Hlc, Row};
use serde::Serialize;

use crate::error::{Error, Result};

/// The answer to a pull: what `POST /sync/pull` sends, field for field.
#[derive(Debug, Clone, Default)]
pub struct Pulled {
    /// Rows written since the cursor, each as its JSON object's text in `rows`.
    changes: Vec<Entry>,
    /// The text of every row of `changes`, one after another.
    rows: Vec<u8>,
    /// Rows that left buckets since the cursor.
    pub tombstones: Vec<Tombstone>,
    /// Buckets of the request's cursor that the actor no longer holds.
    pub removed_buckets: Vec<BucketKey>,
    /// The cursor to send next.
    pub cursor: String,
    /// Whether more entries are waiting.
    pub has_more: bool,
    /// Whether the client must drop its rows of these buckets and start afresh.
    pub reset: bool,
    /// The highest mutation id applied for this client of this actor.
    pub last_mutation_id: u64,
    /// The highest mutation id of this client whose writes the pulled data already reflects.
    pub synced_mutation_id: Option<u64>,
    /// The server's clock reading, at least every clock stamp of the rows delivered.
    pub server_hlc: Option<Hlc>,
    /// How far the sync has got, while it has more pages.
    pub progress: Option<PullProgress>,
    /// The part of the actor's buckets served, when it holds more than the bound.
    pub bounded: Option<Bounded>,
}

/// A change of a [`Pulled`]: its row is a range of the answer's text.
#[derive(Debug, Clone)]
struct Entry {
    table: &'static str,
    row: Range<usize>,
    buckets: Vec<BucketKey>,
}

/// A row written since the cursor, as a [`Pulled`] holds it.
#[derive(Debug, Clone, Copy)]
pub struct PulledChange<'a> {
    /// The table's SQL name.
    pub table: &'static str,
    /// The row's JSON object, as sent.
    pub row_json: &'a [u8],
    /// The buckets synced by the request that contain the row.
    pub buckets: &'a [BucketKey],
}

impl PulledChange<'_> {
    /// The row's columns.
    pub fn row(&self) -> Result<Row> {
        serde_json::from_slice(self.row_json).map_err(|err| Error::internal(format!("reading a pulled row: {err}")))
    }
}

/// The answer's fields after `changes`, written as the wire type names them.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rest<'a> {
    tombstones: &'a [Tombstone],
    removed_buckets: &'a [BucketKey],
    cursor: &'a str,
    has_more: bool,
    reset: bool,
    last_mutation_id: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    synced_mutation_id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_hlc: Option<&'a Hlc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<PullProgress>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bounded: Option<Bounded>,
}

impl Pulled {
    /// Take a change of `table`: the row whose JSON object is `row_json`, in `buckets`.
    pub(crate) fn push_change(&mut self, table: &'static str, row_json: &[u8], buckets: Vec<BucketKey>) {
        let start = self.rows.len();
        self.rows.extend_from_slice(row_json);
        self.changes.push(Entry { table, row: start..self.rows.len(), buckets });
    }

    /// Make room for `changes` more changes of about `bytes` bytes of rows in all.
    pub(crate) fn reserve(&mut self, changes: usize, bytes: usize) {
        self.changes.reserve(changes);
        self.rows.reserve(bytes);
    }

    /// The buckets of the `index`th change.
    pub(crate) fn change_buckets(&self, index: usize) -> &[BucketKey] {
        &self.changes[index].buckets
    }

    /// How many changes the answer holds.
    pub fn changes_len(&self) -> usize {
        self.changes.len()
    }

    /// The rows written since the cursor, in the answer's order.
    pub fn changes(&self) -> impl ExactSizeIterator<Item = PulledChange<'_>> {
        self.changes.iter().map(|entry| PulledChange {
            table: entry.table,
            row_json: &self.rows[entry.row.clone()],
            buckets: &entry.buckets,
        })
    }

    /// The answer as the wire type, each row read back from its text.
    pub fn response(&self) -> Result<PullResponse> {
        let changes = self
            .changes()
            .map(|change| {
                Ok(Change { table: change.table.to_owned(), row: change.row()?, buckets: change.buckets.to_vec() })
            })
            .collect::<Result<Vec<Change>>>()?;
        Ok(PullResponse {
            changes,
            tombstones: self.tombstones.clone(),
            removed_buckets: self.removed_buckets.clone(),
            cursor: self.cursor.clone(),
            has_more: self.has_more,
            reset: self.reset,
            last_mutation_id: self.last_mutation_id,
            synced_mutation_id: self.synced_mutation_id,
            server_hlc: self.server_hlc.clone(),
            progress: self.progress,
            bounded: self.bounded,
        })
    }

    /// The answer's JSON, as [`PullResponse`] writes it, into a buffer sized for its rows at once.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        let write = |err: serde_json::Error| Error::internal(format!("writing a page: {err}"));
        let mut out = Vec::with_capacity(self.rows.len() + 96 * self.changes.len() + 1024);
        out.extend_from_slice(b"{\"changes\":[");
        for (i, change) in self.changes().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"table\":");
            serde_json::to_writer(&mut out, change.table).map_err(write)?;
            out.extend_from_slice(b",\"row\":");
            out.extend_from_slice(change.row_json);
            out.extend_from_slice(b",\"buckets\":");
            serde_json::to_writer(&mut out, change.buckets).map_err(write)?;
            out.push(b'}');
        }
        out.extend_from_slice(b"],");
        let rest = Rest {
            tombstones: &self.tombstones,
            removed_buckets: &self.removed_buckets,
            cursor: &self.cursor,
            has_more: self.has_more,
            reset: self.reset,
            last_mutation_id: self.last_mutation_id,
            synced_mutation_id: self.synced_mutation_id,
            server_hlc: self.server_hlc.as_ref(),
            progress: self.progress,
            bounded: self.bounded,
        };
        let at = out.len();
        serde_json::to_writer(&mut out, &rest).map_err(write)?;
        // `rest` is an object with fields: its opening brace goes, its fields follow the changes.
        out.remove(at);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use engine_kernel::wire::{PullProgress, PullResponse, Tombstone};
    use engine_kernel::{BucketKey, Hlc};
    use serde_json::{Value, json};

    use super::Pulled;

    /// The answer written from its rows' text is the wire type's JSON of the same answer, with
    /// and without its optional fields, with no changes, one, or several.
    #[test]
    fn the_answer_is_written_as_the_wire_type_writes_it() {
        let bucket = |key: &str| BucketKey::parse(key).unwrap();
        let rows = [
            json!({"id": "n1", "title": "a \"quoted\" \u{1} title", "done": false, "position": -3}),
            json!({"id": "n2", "doc": {"nested": [1, 2.5, null]}, "bytes": "AAE="}),
            json!({}),
        ];
        for changes in 0..=rows.len() {
            for optional in [false, true] {
                let mut pulled = Pulled {
                    tombstones: vec![Tombstone {
                        table: "notes".into(),
                        key: json!({"id": "gone"}).as_object().unwrap().clone(),
                        buckets: vec![bucket("shared/l1")],
                    }],
                    removed_buckets: vec![bucket("own/alice")],
                    cursor: "c\u{e9}ursor".into(),
                    has_more: optional,
                    reset: !optional,
                    last_mutation_id: 7,
                    synced_mutation_id: optional.then_some(6),
                    server_hlc: optional.then(|| Hlc::new(1_700_000_000_000, 3, "node").unwrap()),
                    progress: optional.then_some(PullProgress { done: 3, total: 9 }),
                    bounded: optional.then_some(engine_kernel::wire::Bounded { held: 5, served: 3 }),
                    ..Pulled::default()
                };
                for (i, row) in rows[..changes].iter().enumerate() {
                    let buckets = (0..i).map(|b| bucket(&format!("shared/l{b}"))).collect();
                    pulled.push_change("notes", row.to_string().as_bytes(), buckets);
                }
                let written: Value = serde_json::from_slice(&pulled.to_json().unwrap()).unwrap();
                let response = pulled.response().unwrap();
                assert_eq!(written, serde_json::to_value(&response).unwrap());
                let read: PullResponse = serde_json::from_value(written).unwrap();
                assert_eq!(read, response);
                assert_eq!(response.changes.len(), changes);
                assert!(response.changes.iter().zip(&rows).all(|(c, row)| Value::Object(c.row.clone()) == *row));
            }
        }
    }
}
