//! The pull cursor. Opaque to clients (PROTOCOL.md), it carries everything the server needs to
//! go on: the buckets the client holds, in groups that share a position, and for each group the
//! last row and the last tombstone delivered. Because the bucket set travels in the cursor, the
//! server never records what a client holds: a lost or repeated response changes nothing
//! (DESIGN.md decision 3).
//!
//! Positions are in the change stream's total order, below the safe horizon: rows by
//! `(transaction id, table, primary key)`, tombstones by `(transaction id, tombstone id)`.
//! Encoding: base64url (no padding) of a small JSON document.

use base64::Engine as _;
use engine_kernel::BucketKey;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The cursor format's version.
const VERSION: u8 = 1;

/// A decoded cursor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Cursor {
    #[serde(rename = "v")]
    version: u8,
    #[serde(rename = "g")]
    pub(crate) groups: Vec<Group>,
}

/// Buckets that share a position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Group {
    /// The buckets, sorted.
    #[serde(rename = "b")]
    pub(crate) buckets: Vec<BucketKey>,
    /// The last row delivered.
    #[serde(rename = "r")]
    pub(crate) rows: RowPosition,
    /// The last tombstone delivered.
    #[serde(rename = "t")]
    pub(crate) tombstones: TombstonePosition,
}

/// A position in the row stream: everything up to and including it was delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RowPosition {
    /// Transaction id.
    #[serde(rename = "x")]
    pub(crate) xid: u64,
    /// Table name (empty: before every table of that transaction).
    #[serde(rename = "t")]
    pub(crate) table: String,
    /// Primary key values in key order (empty: before every row of that table).
    #[serde(rename = "k")]
    pub(crate) key: Vec<Value>,
}

/// A position in the tombstone stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TombstonePosition {
    /// Transaction id.
    #[serde(rename = "x")]
    pub(crate) xid: u64,
    /// Tombstone id (0: before every tombstone of that transaction).
    #[serde(rename = "i")]
    pub(crate) id: i64,
}

impl RowPosition {
    /// Before every row of transaction `xid`: everything below `xid` was delivered.
    pub(crate) fn at(xid: u64) -> Self {
        RowPosition { xid, table: String::new(), key: Vec::new() }
    }

    /// Move to `to`, unless that is behind: positions never go back, even when a reading of
    /// the horizon does.
    pub(crate) fn advance_to(&mut self, to: RowPosition) {
        let behind = to.xid < self.xid || (to.xid == self.xid && to.table.is_empty() && !self.table.is_empty());
        if !behind {
            *self = to;
        }
    }
}

impl TombstonePosition {
    /// Before every tombstone of transaction `xid`.
    pub(crate) fn at(xid: u64) -> Self {
        TombstonePosition { xid, id: 0 }
    }

    /// Move to `to`, unless that is behind.
    pub(crate) fn advance_to(&mut self, to: TombstonePosition) {
        if (to.xid, to.id) >= (self.xid, self.id) {
            *self = to;
        }
    }
}

impl Group {
    /// A group of buckets the client has just started to hold: every row from the beginning,
    /// and tombstones from now on only (the client holds nothing older of these buckets).
    pub(crate) fn fresh(buckets: Vec<BucketKey>, horizon: u64) -> Self {
        Group { buckets, rows: RowPosition::at(0), tombstones: TombstonePosition::at(horizon) }
    }

    /// Whether the group has everything below `horizon`: both streams stand at a transaction
    /// boundary at or past it.
    pub(crate) fn is_caught_up(&self, horizon: u64) -> bool {
        self.rows.xid >= horizon
            && self.rows.table.is_empty()
            && self.rows.key.is_empty()
            && self.tombstones.xid >= horizon
            && self.tombstones.id == 0
    }
}

/// Why a cursor could not be read.
#[derive(Debug)]
pub(crate) struct Undecodable;

impl Cursor {
    pub(crate) fn new(groups: Vec<Group>) -> Self {
        Cursor { version: VERSION, groups }
    }

    /// The cursor's text form.
    pub(crate) fn encode(&self) -> String {
        let json = serde_json::to_vec(self).expect("a cursor serializes");
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
    }

    /// Read a cursor; anything but a cursor this server wrote is [`Undecodable`].
    pub(crate) fn decode(text: &str) -> Result<Self, Undecodable> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text).map_err(|_| Undecodable)?;
        let cursor: Cursor = serde_json::from_slice(&bytes).map_err(|_| Undecodable)?;
        let positions_valid = cursor.groups.iter().all(|g| {
            !g.buckets.is_empty() && g.tombstones.id >= 0 && g.rows.key.iter().all(|v| !v.is_array() && !v.is_object())
        });
        if cursor.version != VERSION || !positions_valid {
            return Err(Undecodable);
        }
        Ok(cursor)
    }

    /// Every bucket of the cursor.
    pub(crate) fn buckets(&self) -> impl Iterator<Item = &BucketKey> {
        self.groups.iter().flat_map(|g| g.buckets.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_never_go_back() {
        let mut rows = RowPosition { xid: 10, table: "notes".into(), key: vec![Value::from("n1")] };
        rows.advance_to(RowPosition::at(9));
        assert_eq!(rows.xid, 10);
        rows.advance_to(RowPosition::at(10));
        assert_eq!(rows.table, "notes", "the start of transaction 10 is behind a row of it");
        rows.advance_to(RowPosition::at(11));
        assert_eq!(rows, RowPosition::at(11));
        let mut tombstones = TombstonePosition { xid: 5, id: 7 };
        tombstones.advance_to(TombstonePosition::at(5));
        assert_eq!(tombstones, TombstonePosition { xid: 5, id: 7 });
        let group = Group {
            buckets: vec![BucketKey::new("own", &["a"])],
            rows: RowPosition::at(12),
            tombstones: TombstonePosition::at(12),
        };
        assert!(group.is_caught_up(11) && group.is_caught_up(12) && !group.is_caught_up(13));
    }

    #[test]
    fn round_trips_and_refuses_anything_else() {
        let cursor = Cursor::new(vec![Group::fresh(vec![BucketKey::new("own", &["a"])], 42)]);
        assert_eq!(Cursor::decode(&cursor.encode()).unwrap(), cursor);
        for bad in ["", "!!!", "e30", "eyJ2IjoyLCJnIjpbXX0", "bnVsbA"] {
            assert!(Cursor::decode(bad).is_err(), "{bad:?}");
        }
        let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(r#"{"v":1,"g":[{"b":["own/a b"],"r":{"x":1,"t":"","k":[]},"t":{"x":1,"i":0}}]}"#);
        assert!(Cursor::decode(&forged).is_err(), "a non-canonical bucket key is refused");
    }
}
