//! Collaborative columns: [`CrdtText`] and [`CrdtMap`], documents of the `yrs` CRDT library
//! stored and sent as the v1 update encoding of their whole state.
//!
//! A `CrdtText` keeps its text in the root text named `text`; a `CrdtMap` keeps its entries in
//! the root map named `map` (`docs/protocol.md#collaborative-columns`). Merging an update is
//! commutative, associative and idempotent, so the order in which replicas see updates never
//! matters.
//!
//! Every update from outside goes through [`decode_update`], the one place that turns bytes into
//! a `yrs` update.

use base64::Engine as _;
use serde_json::Value;
use yrs::types::ToJson;
use yrs::updates::decoder::Decode;
use yrs::{Doc, GetString, Map, ReadTxn, StateVector, Text, Transact, Update};

use crate::column::{ColumnType, SqlType, decode_base64};
use crate::error::{Error, Result};

mod check;

use check::Document;
pub use check::{MAX_CONTINUATIONS, MAX_UPDATE_REPLICAS, check_update};

/// The name of the root text of a [`CrdtText`] document.
pub const TEXT_ROOT: &str = "text";
/// The name of the root map of a [`CrdtMap`] document.
pub const MAP_ROOT: &str = "map";

/// The v1 encoding of an empty document's state.
const EMPTY_STATE: [u8; 2] = [0, 0];

/// An update in its wire form: base64 (standard alphabet, padded) of the yrs v1 encoding, as
/// mutator arguments carry it.
pub fn update_to_base64(update: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(update)
}

/// The bytes of an update in its wire form.
pub fn update_from_base64(text: &str) -> Result<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| Error::validation(format!("a CRDT update is base64 of the yrs v1 encoding: {e}")))
}

/// An update to a collaborative column, as a mutator's arguments carry it: the yrs v1 encoding,
/// which travels as base64 (standard alphabet, padded; [`update_to_base64`]).
///
/// Editing a document returns one ([`CrdtText::insert`], [`CrdtText::edit`], …), ready to put in
/// the arguments; in the mutator, assigning it to the column merges it into the stored document
/// (`Note::body.set(args.update)`). It reads as its bytes (`&update[..]`).
///
/// ```
/// use engine_kernel::{CrdtText, CrdtUpdate};
///
/// let mut body = CrdtText::from_text("milk");
/// let mut replica = body.clone();
/// let update: CrdtUpdate = body.insert(0, "oat ").unwrap();
/// let wire = serde_json::to_value(&update).unwrap();
/// assert_eq!(wire, engine_kernel::crdt::update_to_base64(&update));
///
/// replica.merge(&update).unwrap();
/// assert_eq!(replica.text().unwrap(), "oat milk");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct CrdtUpdate(Vec<u8>);

impl CrdtUpdate {
    /// The update of yrs v1 bytes; they are checked when the update is merged.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        CrdtUpdate(bytes)
    }

    /// The update in its wire form (base64), checked to be base64 only.
    pub fn from_base64(text: &str) -> Result<Self> {
        update_from_base64(text).map(CrdtUpdate)
    }

    /// The yrs v1 bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The yrs v1 bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

impl std::ops::Deref for CrdtUpdate {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl AsRef<[u8]> for CrdtUpdate {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Vec<u8>> for CrdtUpdate {
    fn from(bytes: Vec<u8>) -> Self {
        CrdtUpdate(bytes)
    }
}

impl From<CrdtUpdate> for Vec<u8> {
    fn from(update: CrdtUpdate) -> Self {
        update.0
    }
}

impl std::fmt::Debug for CrdtUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CrdtUpdate(<{} bytes>)", self.0.len())
    }
}

impl serde::Serialize for CrdtUpdate {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(&update_to_base64(&self.0))
    }
}

impl<'de> serde::Deserialize<'de> for CrdtUpdate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        CrdtUpdate::from_base64(&text).map_err(serde::de::Error::custom)
    }
}

/// A string in the contract, as an argument of type `String` would be.
impl schemars::JsonSchema for CrdtUpdate {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CrdtUpdate".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
}

/// Decode a yrs v1 update received from outside: first a structural check that allocates
/// nothing ([`check_update`]), then yrs.
pub fn decode_update(bytes: &[u8]) -> Result<Update> {
    check_update(bytes).map_err(|e| Error::validation(format!("not a yrs v1 update: {e}")))?;
    Update::decode_v1(bytes).map_err(|e| Error::validation(format!("not a yrs v1 update: {e}")))
}

fn doc_with(state: &[u8]) -> Result<Doc> {
    let doc = Doc::new();
    if state != EMPTY_STATE {
        let update = decode_update(state)?;
        doc.transact_mut()
            .apply_update(update)
            .map_err(|e| Error::validation(format!("cannot apply yrs update: {e}")))?;
    }
    Ok(doc)
}

/// The canonical encoding of the state `bytes` hold.
fn normalized(bytes: &[u8]) -> Option<Vec<u8>> {
    doc_with(bytes).ok().map(|doc| full_state(&doc))
}

fn full_state(doc: &Doc) -> Vec<u8> {
    doc.transact().encode_state_as_update_v1(&StateVector::default())
}

macro_rules! crdt_common {
    ($ty:ident, $root:ty, $get_root:ident, $root_name:expr) => {
        impl $ty {
            /// An empty document.
            pub fn new() -> Self {
                $ty { state: EMPTY_STATE.to_vec() }
            }

            /// The document of a full-state (or any) v1 update, checked by decoding it.
            pub fn from_state(state: Vec<u8>) -> Result<Self> {
                doc_with(&state)?;
                Ok($ty { state })
            }

            /// An update to merge into a stored document, as the value of a column assignment
            /// (`Note::body.set(CrdtText::from_update(bytes))`, or directly
            /// `Note::body.set(update)` with a [`CrdtUpdate`]): on a collaborative column an
            /// assignment merges, never replaces. The bytes are checked when they are merged.
            pub fn from_update(update: Vec<u8>) -> Self {
                $ty { state: update }
            }

            /// The document of bytes that are not checked until they are read or merged.
            #[doc(hidden)]
            pub fn from_state_unchecked(state: Vec<u8>) -> Self {
                $ty { state }
            }

            /// The v1 update encoding of the whole document.
            pub fn state(&self) -> &[u8] {
                &self.state
            }

            /// Merge a v1 update into the document. Merging is idempotent: an update already seen
            /// changes nothing.
            /// Updates may come in any order, as from peers: one whose neighbours are not in
            /// the document yet waits inside it until they arrive.
            ///
            /// Like `yrs`, this trusts that the update comes from an honest replica. An update
            /// from outside (a client's mutation) is merged with [`merged_column`], which checks
            /// it against the document first.
            pub fn merge(&mut self, update: &[u8]) -> Result<()> {
                let doc = doc_with(&self.state)?;
                let update = decode_update(update)?;
                doc.transact_mut()
                    .apply_update(update)
                    .map_err(|e| Error::validation(format!("cannot apply yrs update: {e}")))?;
                self.state = full_state(&doc);
                Ok(())
            }

            /// Merge another replica of the document into this one.
            pub fn merge_from(&mut self, other: &$ty) -> Result<()> {
                self.merge(&other.state)
            }

            /// Edit the document's root with `yrs` and return the update that carries the edit
            /// (to send as a mutator argument); the document itself is updated too.
            pub fn edit<F>(&mut self, edit: F) -> Result<CrdtUpdate>
            where
                F: FnOnce(&$root, &mut yrs::TransactionMut<'_>),
            {
                let doc = doc_with(&self.state)?;
                // The root must exist before the write transaction opens: creating it takes one.
                let root = doc.$get_root($root_name);
                let update = {
                    let mut txn = doc.transact_mut();
                    edit(&root, &mut txn);
                    txn.encode_update_v1()
                };
                self.state = full_state(&doc);
                Ok(CrdtUpdate(update))
            }
        }

        /// An update as a column assignment's value, which merges into the stored document.
        impl From<CrdtUpdate> for $ty {
            fn from(update: CrdtUpdate) -> Self {
                $ty::from_update(update.0)
            }
        }

        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }

        /// Two documents are equal when they hold the same state (the same operations by the
        /// same replicas), however their bytes were encoded; undecodable bytes equal only
        /// themselves.
        impl PartialEq for $ty {
            fn eq(&self, other: &Self) -> bool {
                self.state == other.state
                    || normalized(&self.state).is_some_and(|a| Some(a) == normalized(&other.state))
            }
        }

        impl Eq for $ty {}
    };
}

/// A collaborative text column: concurrent edits from several replicas merge character by
/// character instead of one replacing another.
///
/// ```
/// use engine_kernel::CrdtText;
///
/// let mut a = CrdtText::from_text("hello");
/// let mut b = a.clone();
/// let from_a = a.insert(5, " world").unwrap();
/// let from_b = b.insert(0, "oh, ").unwrap();
/// a.merge(&from_b).unwrap();
/// b.merge(&from_a).unwrap();
/// assert_eq!(a.text().unwrap(), "oh, hello world");
/// assert_eq!(b.text().unwrap(), a.text().unwrap());
/// ```
#[derive(Clone)]
pub struct CrdtText {
    state: Vec<u8>,
}

crdt_common!(CrdtText, yrs::TextRef, get_or_insert_text, TEXT_ROOT);

impl CrdtText {
    /// A document holding `text`.
    pub fn from_text(text: &str) -> Self {
        let mut doc = CrdtText::new();
        doc.insert(0, text).expect("an empty document decodes");
        doc
    }

    /// The current text.
    pub fn text(&self) -> Result<String> {
        let doc = doc_with(&self.state)?;
        let text = doc.get_or_insert_text(TEXT_ROOT);
        Ok(text.get_string(&doc.transact()))
    }

    /// Insert `chunk` at character offset `index`; returns the update to send.
    pub fn insert(&mut self, index: u32, chunk: &str) -> Result<CrdtUpdate> {
        self.edit(|text, txn| text.insert(txn, index, chunk))
    }

    /// Remove `len` characters from offset `index`; returns the update to send.
    pub fn remove(&mut self, index: u32, len: u32) -> Result<CrdtUpdate> {
        self.edit(|text, txn| text.remove_range(txn, index, len))
    }
}

impl std::fmt::Debug for CrdtText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.text() {
            Ok(text) => f.debug_tuple("CrdtText").field(&text).finish(),
            Err(_) => write!(f, "CrdtText(<{} undecodable bytes>)", self.state.len()),
        }
    }
}

/// A collaborative map column: concurrent writes to different keys all survive; concurrent
/// writes to one key converge on one value everywhere.
///
/// ```
/// use engine_kernel::CrdtMap;
///
/// let mut a = CrdtMap::new();
/// let mut b = CrdtMap::new();
/// let from_a = a.insert("color", "red").unwrap();
/// let from_b = b.insert("size", "XL").unwrap();
/// a.merge(&from_b).unwrap();
/// b.merge(&from_a).unwrap();
/// assert_eq!(a.to_json().unwrap(), b.to_json().unwrap());
/// assert_eq!(a.to_json().unwrap()["size"], "XL");
/// ```
#[derive(Clone)]
pub struct CrdtMap {
    state: Vec<u8>,
}

crdt_common!(CrdtMap, yrs::MapRef, get_or_insert_map, MAP_ROOT);

impl CrdtMap {
    /// The entries as a JSON object.
    pub fn to_json(&self) -> Result<serde_json::Value> {
        let doc = doc_with(&self.state)?;
        let map = doc.get_or_insert_map(MAP_ROOT);
        let any = map.to_json(&doc.transact());
        serde_json::to_value(&any).map_err(Error::internal)
    }

    /// Set `key` to a string `value`; returns the update to send.
    pub fn insert(&mut self, key: &str, value: &str) -> Result<CrdtUpdate> {
        let key = key.to_owned();
        let value = value.to_owned();
        self.edit(move |map, txn| {
            map.insert(txn, key, value);
        })
    }

    /// Remove `key`; returns the update to send.
    pub fn remove(&mut self, key: &str) -> Result<CrdtUpdate> {
        self.edit(|map, txn| {
            map.remove(txn, key);
        })
    }
}

impl std::fmt::Debug for CrdtMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_json() {
            Ok(json) => f.debug_tuple("CrdtMap").field(&json).finish(),
            Err(_) => write!(f, "CrdtMap(<{} undecodable bytes>)", self.state.len()),
        }
    }
}

impl ColumnType for CrdtText {
    const SQL_TYPE: SqlType = SqlType::CrdtText;
    fn to_json(&self) -> Value {
        Value::String(base64::engine::general_purpose::STANDARD.encode(self.state()))
    }
    fn from_json(value: Value) -> Result<Self, String> {
        decode_base64(&value).map(CrdtText::from_state_unchecked)
    }
}

impl ColumnType for CrdtMap {
    const SQL_TYPE: SqlType = SqlType::CrdtMap;
    fn to_json(&self) -> Value {
        Value::String(base64::engine::general_purpose::STANDARD.encode(self.state()))
    }
    fn from_json(value: Value) -> Result<Self, String> {
        decode_base64(&value).map(CrdtMap::from_state_unchecked)
    }
}

/// The largest collaborative document a merge takes or makes, in bytes of its v1 encoding: the
/// stored document and the update together, and the merged document.
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// A collaborative column's stored state with an update merged in, both in their JSON form
/// (base64 of the yrs v1 encoding), as every store merges an assignment to such a column. The
/// update is checked before it is decoded; no stored state counts as an empty document. The
/// merge is bounded by [`MAX_DOCUMENT_BYTES`] ([`merged_column_within`]).
///
/// # Errors
/// [`Error::Validation`] when the update is not base64 of a well-formed v1 update, the merge
/// would pass the bound, or the update breaks `yrs` itself; [`Error::Internal`] when `sql_type`
/// is not collaborative.
pub fn merged_column(
    sql_type: SqlType,
    stored: Option<&serde_json::Value>,
    update: &serde_json::Value,
) -> Result<serde_json::Value> {
    merged_column_within(sql_type, stored, update, MAX_DOCUMENT_BYTES)
}

/// [`merged_column`] bounded by `max_bytes`: a stored document and an update larger together, or
/// a merged document larger, are refused with a validation error naming the bound. The update is
/// checked against the stored document before `yrs` sees it (`crdt/check.rs`): it may hold only
/// what that kind of column writes, beside items that exist, continuing each replica's clock
/// where the document has it; what an honest replica never sends is refused. Should `yrs` still
/// panic on an update, the merge is refused the same way; the panic does not reach the caller.
///
/// # Errors
/// As [`merged_column`].
pub fn merged_column_within(
    sql_type: SqlType,
    stored: Option<&serde_json::Value>,
    update: &serde_json::Value,
    max_bytes: usize,
) -> Result<serde_json::Value> {
    let document = match sql_type {
        SqlType::CrdtText => Document::Text,
        SqlType::CrdtMap => Document::Map,
        // Not collaborative: callers merge only columns `SqlType::is_crdt` picks, so this is
        // their fault, not the update's.
        SqlType::Text
        | SqlType::SmallInt
        | SqlType::Integer
        | SqlType::BigInt
        | SqlType::Real
        | SqlType::Double
        | SqlType::Boolean
        | SqlType::Uuid
        | SqlType::Timestamp
        | SqlType::Json
        | SqlType::Bytes => {
            return Err(Error::internal(format!("a `{}` column is not collaborative", sql_type.name())));
        }
    };
    let update_bytes = <Vec<u8> as ColumnType>::from_json(update.clone())
        .map_err(|e| Error::validation(format!("a collaborative update: {e}")))?;
    let stored_bytes = match stored {
        Some(value) if !value.is_null() => {
            <Vec<u8> as ColumnType>::from_json(value.clone()).map_err(|e| Error::Internal(e.into()))?
        }
        _ => EMPTY_STATE.to_vec(),
    };
    let taken = stored_bytes.len() + update_bytes.len();
    if taken > max_bytes {
        return Err(Error::validation(format!(
            "a collaborative document and its update take {taken} bytes; a merge takes at most {max_bytes}"
        )));
    }
    check::check_merge(&stored_bytes, &update_bytes, document)
        .map_err(|e| Error::validation(format!("the collaborative update does not fit the document: {e}")))?;
    let merge = || -> Result<Vec<u8>> {
        Ok(match document {
            Document::Map => {
                let mut doc = CrdtMap::from_state_unchecked(stored_bytes);
                doc.merge(&update_bytes)?;
                doc.state
            }
            Document::Text => {
                let mut doc = CrdtText::from_state_unchecked(stored_bytes);
                doc.merge(&update_bytes)?;
                doc.state
            }
        })
    };
    // yrs trusts the ids an update's items point at; a hostile one can break its invariants,
    // which it reports by panicking. Nothing of the document outlives the closure.
    let merged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(merge))
        .map_err(|_| Error::validation("the collaborative update is not one the CRDT library can apply"))??;
    if merged.len() > max_bytes {
        return Err(Error::validation(format!(
            "the merged collaborative document would take {} bytes; at most {max_bytes} are kept",
            merged.len()
        )));
    }
    Ok(serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(merged)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_state_is_the_encoding_of_an_empty_doc() {
        assert_eq!(full_state(&Doc::new()), EMPTY_STATE);
    }

    #[test]
    fn only_collaborative_columns_merge() {
        let update = serde_json::Value::String(base64::engine::general_purpose::STANDARD.encode(EMPTY_STATE));
        assert!(merged_column(SqlType::CrdtText, None, &update).is_ok());
        assert!(merged_column(SqlType::CrdtMap, None, &update).is_ok());
        let refused = merged_column(SqlType::Bytes, None, &update).expect_err("bytes are not a document");
        assert!(matches!(refused, Error::Internal(_)), "{refused:?}");
    }

    #[test]
    fn concurrent_text_edits_converge_in_any_order() {
        let base = CrdtText::from_text("abc");
        let (mut a, mut b, mut c) = (base.clone(), base.clone(), base.clone());
        let ua = a.insert(0, "1").unwrap();
        let ub = b.insert(3, "2").unwrap();
        let uc = c.remove(1, 1).unwrap();
        let mut left = base.clone();
        for u in [&ua, &ub, &uc] {
            left.merge(u).unwrap();
        }
        let mut right = base;
        for u in [&uc, &ub, &ua, &ub] {
            right.merge(u).unwrap();
        }
        assert_eq!(left.text().unwrap(), "1ac2");
        assert_eq!(right.text().unwrap(), "1ac2");
    }

    #[test]
    fn equality_is_of_state_not_of_bytes_or_text() {
        let a = CrdtText::from_text("same");
        let b = CrdtText::from_text("same");
        assert_ne!(a, b, "two documents with the same text are different documents");
        let mut merged = CrdtText::new();
        let tail = a.clone().insert(4, "!").unwrap();
        merged.merge(&tail).unwrap();
        merged.merge(a.state()).unwrap();
        let mut direct = a.clone();
        direct.merge(&tail).unwrap();
        assert_eq!(merged, direct, "the same operations in another order are the same state");
    }

    #[test]
    fn real_updates_pass_the_structural_check() {
        let mut text = CrdtText::from_text("hello wörld ✓");
        let mut updates = vec![text.state().to_vec()];
        updates.push(text.insert(3, "---").unwrap().into_bytes());
        updates.push(text.remove(0, 4).unwrap().into_bytes());
        updates.push(text.state().to_vec());
        let mut map = CrdtMap::new();
        updates.push(map.insert("k", "v").unwrap().into_bytes());
        updates.push(map.remove("k").unwrap().into_bytes());
        let nested = map
            .edit(|root, txn| {
                let value = yrs::Any::from_json(r#"{"a":[1,2.5,"x",true,null,{"b":[]}],"c":{"d":1e300}}"#).unwrap();
                root.insert(txn, "nested", value);
            })
            .unwrap();
        updates.push(nested.into_bytes());
        updates.push(map.state().to_vec());
        for update in updates {
            assert_eq!(check_update(&update), Ok(()), "{update:?}");
            decode_update(&update).unwrap();
        }
    }

    #[test]
    fn allocation_bombs_and_deep_nesting_are_refused_before_yrs_sees_them() {
        // Four billion clients declared in five bytes.
        assert!(check_update(&[0xff, 0xff, 0xff, 0xff, 0x0f]).unwrap_err().contains("declares"));
        // One client with four billion blocks.
        assert!(check_update(&[1, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0]).is_err());
        // An `Any` content of a million nested arrays.
        let mut deep = vec![1, 1, 0, 0, 0b0000_1000, 1, 4, b'r', b'o', b'o', b't', 1];
        deep.extend((0..100_000).flat_map(|_| [117u8, 1]));
        assert!(check_update(&deep).unwrap_err().contains("nest deeper"));
        assert_eq!(decode_update(&deep).unwrap_err().code(), crate::ErrorCode::ValidationFailed);
    }

    #[test]
    fn random_bytes_never_panic() {
        // A deterministic xorshift stream of short inputs: every one is refused or decoded, and
        // none panics or hangs.
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 48) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| {
                    let x = state.rotate_left(i as u32 * 5);
                    (x ^ (x >> 29)) as u8
                })
                .collect();
            let _ = decode_update(&bytes);
            let mut doc = CrdtText::new();
            let _ = doc.merge(&bytes);
        }
    }

    #[test]
    fn an_update_travels_as_base64_and_assigns_by_merging() {
        let mut body = CrdtText::from_text("tea");
        let update = body.insert(0, "green ").unwrap();
        let wire = serde_json::to_value(&update).unwrap();
        assert_eq!(wire, serde_json::Value::String(update_to_base64(&update)));
        let back: CrdtUpdate = serde_json::from_value(wire).unwrap();
        assert_eq!(back, update);

        let err = serde_json::from_value::<CrdtUpdate>(serde_json::json!("not base64!")).unwrap_err();
        assert!(err.to_string().contains("base64"), "{err}");

        let mut stored = CrdtText::from_state(body.state().to_vec()).unwrap();
        let later = body.insert(9, " please").unwrap();
        let assigned = CrdtText::from(later);
        stored.merge_from(&assigned).unwrap();
        assert_eq!(stored.text().unwrap(), "green tea please");

        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<CrdtUpdate>();
        assert_eq!(schema.get("type"), Some(&serde_json::json!("string")));
    }

    #[test]
    fn garbage_is_a_validation_error() {
        let err = CrdtText::from_state(vec![0xff, 0xff, 0xff]).unwrap_err();
        assert_eq!(err.code(), crate::ErrorCode::ValidationFailed);
    }
}
