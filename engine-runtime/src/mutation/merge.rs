//! How a write merges with the stored row, by the table's merge policy (docs/design.md §7).
//!
//! - A collaborative column merges the written update into the stored document: concurrent
//!   edits all survive, whatever their order. The merge runs on a blocking thread, off the async
//!   workers, bounded in size (`engine_kernel::crdt::MAX_DOCUMENT_BYTES`); an update past the
//!   bound, or one that breaks `yrs`, is refused `validation_failed`. A large update (over
//!   [`LARGE_MERGE_BYTES`]) merges on a place of the merge gate: at most `Limits::large_merges`
//!   run at once, shared fairly between actors. A push whose arguments carry it waits for its
//!   turn before it takes a place of the store (`SyncService::run`); one whose mutator made it
//!   takes the gate here if a place is free at once ([`MERGE_GATE`]), or is answered
//!   `retry_later`.
//! - On a synced table that merges by field, each scalar column keeps the value of the newer
//!   hybrid logical clock: a write stamped older than the column's stamp leaves the column as it
//!   is (the row is still written, so clients holding the losing value see the winner).
//! - Otherwise the written value replaces the stored one (last writer in commit order wins).

use engine_kernel::column::ColumnMeta;
use engine_kernel::{Hlc, Row, TableMeta};
use serde_json::{Map, Value};

use crate::limits::{FairShare, LARGE_MERGE_BYTES, Work};
use crate::pg::sql::NEWEST_STAMP;

tokio::task_local! {
    /// The merge gate and the actor whose push runs in this task, set by the sync service
    /// around a push (`SyncService::push`). A push that runs without it, as a store's own tests
    /// do, merges ungated.
    pub(crate) static MERGE_GATE: (std::sync::Arc<FairShare>, String);
}

type KernelResult<T> = engine_kernel::Result<T>;

/// Per-column HLC stamps of a row (`_engine_hlc`): column name → clock text, and under
/// [`NEWEST_STAMP`] the newest of them.
pub(super) type Stamps = Map<String, Value>;

/// The stamps of a row inserted at `hlc`: every column stamped with it.
pub(super) fn inserted(table: &TableMeta, hlc: &Hlc) -> Value {
    let stamp = Value::from(hlc.to_string());
    let mut stamps: Stamps = table.columns.iter().map(|c| (c.name.to_owned(), stamp.clone())).collect();
    stamps.insert(NEWEST_STAMP.to_owned(), stamp);
    Value::Object(stamps)
}

/// What an update leaves of a row.
#[derive(Debug)]
pub(super) struct Updated {
    /// The row after the write.
    pub(super) after: Row,
    /// Its stamps after the write (changed only when the table merges by field).
    pub(super) stamps: Stamps,
    /// Whether any of the write took effect: false when every column it set lost its merge to
    /// a newer write (a write that sets nothing takes effect: it touches the row).
    pub(super) took_effect: bool,
}

/// What a write stores in `column`: a collaborative column's update merged into `stored` (the
/// document so far; none for an insert), off the async workers; any other column's value as
/// given.
pub(super) async fn written(column: &ColumnMeta, stored: Option<&Value>, value: &Value) -> KernelResult<Value> {
    if !column.sql_type.is_crdt() || value.is_null() {
        return Ok(value.clone());
    }
    let gate = match value.as_str() {
        Some(update) if update.len() > LARGE_MERGE_BYTES => MERGE_GATE.try_with(Clone::clone).ok(),
        _ => None,
    };
    // The push holds a place of the store's sessions (on SQLite, the writer) here: it takes the
    // gate only if it is free at once, as a push waiting at the gate with its place could wait
    // for one that holds the gate and waits for a place. A push whose arguments carry the update
    // took its turn at the gate before its place (`SyncService::run`) and merges ungated.
    let place = match gate {
        Some((gate, actor)) => Some(gate.try_admit(&actor, Work::Merge).map_err(|err| {
            engine_kernel::Error::Transient(format!("the collaborative update found no free place to merge: {err}"))
        })?),
        None => None,
    };
    let (sql_type, stored, update) = (column.sql_type, stored.cloned(), value.clone());
    // The place moves into the merge: it is given back when the merge ends, even when the
    // request that asked for it was dropped meanwhile.
    let merge = move || {
        let _place = place;
        engine_kernel::crdt::merged_column_within(
            sql_type,
            stored.as_ref(),
            &update,
            engine_kernel::crdt::MAX_DOCUMENT_BYTES,
        )
    };
    match tokio::task::spawn_blocking(merge).await {
        Ok(merged) => merged,
        Err(err) if err.is_panic() => {
            Err(engine_kernel::Error::validation("the collaborative update is not one the CRDT library can apply"))
        }
        Err(_) => Err(engine_kernel::Error::Transient("the merge of a collaborative update was cancelled".into())),
    }
}

/// Collaborative merges made before the row was locked, in the order of the changes: each
/// column's document as it was read then, and what merging the change into it gave (an error
/// included, answered only if the merge is used).
#[derive(Debug, Default)]
pub(super) struct Premerged(Vec<(&'static str, Option<Value>, KernelResult<Value>)>);

impl Premerged {
    /// The merges of the collaborative columns `changes` assign, into the documents of `row`.
    pub(super) async fn of(table: &TableMeta, row: &Row, changes: &[(&'static str, Value)]) -> KernelResult<Self> {
        let mut merges = Vec::new();
        for (name, value) in changes {
            let column = table.known_column(name)?;
            if column.sql_type.is_crdt() && !value.is_null() {
                let stored = row.get(*name).cloned();
                let merged = written(column, stored.as_ref(), value).await;
                merges.push((*name, stored, merged));
            }
        }
        Ok(Premerged(merges))
    }

    /// The next merge made of `column`, when it was made from the document `stored` holds now.
    fn take(&mut self, column: &str, stored: Option<&Value>) -> Option<KernelResult<Value>> {
        let at = self.0.iter().position(|(name, _, _)| *name == column)?;
        let (_, from, merged) = self.0.remove(at);
        (from.as_ref() == stored).then_some(merged)
    }
}

/// `before` with `changes` written at `hlc`, merged column by column. A collaborative column's
/// merge made before the row was locked (`premerged`) is taken when the locked row still holds
/// the document it was made from; otherwise the merge is made now.
pub(super) async fn updated(
    table: &TableMeta,
    by_field: bool,
    before: &Row,
    mut stamps: Stamps,
    changes: &[(&'static str, Value)],
    hlc: &Hlc,
    mut premerged: Premerged,
) -> KernelResult<Updated> {
    let mut after = before.clone();
    let stamp = hlc.to_string();
    let mut took_effect = changes.is_empty();
    for (name, value) in changes {
        let column = table.known_column(name)?;
        if column.sql_type.is_crdt() {
            let merged = match premerged.take(name, after.get(*name)) {
                Some(merged) => merged?,
                None => written(column, after.get(*name), value).await?,
            };
            after.insert((*name).to_owned(), merged);
            took_effect = true;
        } else if by_field {
            let newer = stamps.get(*name).and_then(Value::as_str).is_none_or(|old| stamp.as_str() > old);
            if newer {
                after.insert((*name).to_owned(), value.clone());
                stamps.insert((*name).to_owned(), Value::from(stamp.clone()));
                took_effect = true;
            }
        } else {
            after.insert((*name).to_owned(), value.clone());
            took_effect = true;
        }
    }
    if by_field && let Some(newest) = newest(&stamps) {
        stamps.insert(NEWEST_STAMP.to_owned(), Value::from(newest.to_string()));
    }
    Ok(Updated { after, stamps, took_effect })
}

/// The newest stamp of a row.
pub(super) fn newest(stamps: &Stamps) -> Option<Hlc> {
    stamps.values().filter_map(Value::as_str).filter_map(|s| s.parse().ok()).max()
}

#[cfg(test)]
mod tests {
    use engine_kernel::column::ColumnMeta;
    use engine_kernel::{MergePolicy, SqlType};
    use serde_json::json;

    use super::*;

    static COLUMNS: [ColumnMeta; 3] =
        [column("id", SqlType::Text), column("title", SqlType::Text), column("body", SqlType::CrdtText)];

    const fn column(name: &'static str, sql_type: SqlType) -> ColumnMeta {
        ColumnMeta { name, field: name, sql_type, nullable: false, blob: false, description: "" }
    }

    static TABLE: TableMeta = TableMeta {
        name: "notes",
        struct_name: "Note",
        description: "",
        columns: &COLUMNS,
        primary_key: &["id"],
        owner: None,
        soft_delete: None,
        merge: MergePolicy::Field,
    };

    fn hlc(ms: u64) -> Hlc {
        format!("{ms:013}-0000-a").parse().unwrap()
    }

    #[tokio::test]
    async fn by_field_the_newer_clock_wins_each_column() {
        let before: Row = json!({"id": "n", "title": "old", "body": "AAA="}).as_object().unwrap().clone();
        let stamps: Stamps = json!({"title": hlc(2000).to_string()}).as_object().unwrap().clone();
        let older = [("title", Value::from("from the past"))];
        let lost =
            updated(&TABLE, true, &before, stamps.clone(), &older, &hlc(1000), Premerged::default()).await.unwrap();
        assert_eq!(lost.after["title"], "old");
        assert_eq!(lost.stamps["title"], stamps["title"]);
        assert_eq!(lost.stamps[NEWEST_STAMP], hlc(2000).to_string(), "the row keeps its newest stamp");
        assert!(!lost.took_effect, "the write lost its only merge");
        let won = updated(&TABLE, true, &before, stamps, &[("title", "new".into())], &hlc(3000), Premerged::default())
            .await
            .unwrap();
        assert_eq!(won.after["title"], "new");
        assert_eq!(won.stamps["title"], hlc(3000).to_string());
        assert_eq!(won.stamps[NEWEST_STAMP], hlc(3000).to_string());
        assert!(won.took_effect);
        assert_eq!(newest(&won.stamps), Some(hlc(3000)));
    }

    #[tokio::test]
    async fn a_merge_made_before_the_lock_is_taken_only_from_the_document_still_stored() {
        let mut doc = engine_kernel::CrdtText::new();
        let update = doc.insert(0, "hello").unwrap();
        let change = [("body", Value::from(engine_kernel::crdt::update_to_base64(&update)))];
        let read: Row = json!({"id": "n", "title": "t", "body": "AAA="}).as_object().unwrap().clone();
        let text = |row: &Row| {
            let body: engine_kernel::CrdtText = engine_kernel::ColumnType::from_json(row["body"].clone()).unwrap();
            body.text().unwrap()
        };
        // The locked row holds the document the merge was made from: the merge is taken.
        let premerged = Premerged::of(&TABLE, &read, &change).await.unwrap();
        let after = updated(&TABLE, true, &read, Stamps::new(), &change, &hlc(1), premerged).await.unwrap().after;
        assert_eq!(text(&after), "hello");
        // Another write changed the document meanwhile: the merge is made again, from it.
        let mut other = engine_kernel::CrdtText::new();
        let written = engine_kernel::crdt::update_to_base64(&other.insert(0, "> ").unwrap());
        let locked: Row = json!({"id": "n", "title": "t", "body": written}).as_object().unwrap().clone();
        let premerged = Premerged::of(&TABLE, &read, &change).await.unwrap();
        let after = updated(&TABLE, true, &locked, Stamps::new(), &change, &hlc(1), premerged).await.unwrap().after;
        assert!(text(&after).contains("> ") && text(&after).contains("hello"), "{}", text(&after));
        // A refusal made before the lock is answered as the merge under it would be.
        let garbage = [("body", Value::from("not an update"))];
        let premerged = Premerged::of(&TABLE, &read, &garbage).await.unwrap();
        let refused = updated(&TABLE, true, &read, Stamps::new(), &garbage, &hlc(1), premerged).await.unwrap_err();
        assert_eq!(refused.code(), engine_kernel::ErrorCode::ValidationFailed);
    }

    #[tokio::test]
    async fn without_field_merge_the_write_replaces() {
        let before: Row = json!({"id": "n", "title": "old", "body": "AAA="}).as_object().unwrap().clone();
        let stamps: Stamps = json!({"title": hlc(2000).to_string()}).as_object().unwrap().clone();
        let late =
            updated(&TABLE, false, &before, stamps, &[("title", "late".into())], &hlc(1000), Premerged::default())
                .await
                .unwrap();
        assert_eq!(late.after["title"], "late");
        assert!(late.took_effect);
    }

    #[tokio::test]
    async fn a_collaborative_column_merges_and_refuses_garbage() {
        let before: Row = json!({"id": "n", "title": "t", "body": "AAA="}).as_object().unwrap().clone();
        let mut doc = engine_kernel::CrdtText::new();
        let update = doc.insert(0, "hello").unwrap();
        let change = [("body", engine_kernel::crdt::update_to_base64(&update).into())];
        let merged =
            updated(&TABLE, true, &before, Stamps::new(), &change, &hlc(1), Premerged::default()).await.unwrap().after;
        let merged: engine_kernel::CrdtText = engine_kernel::ColumnType::from_json(merged["body"].clone()).unwrap();
        assert_eq!(merged.text().unwrap(), "hello");
        let garbage = [("body", Value::from("not an update"))];
        assert!(updated(&TABLE, true, &before, Stamps::new(), &garbage, &hlc(1), Premerged::default()).await.is_err());
        assert!(
            updated(&TABLE, true, &before, Stamps::new(), &[("nope", Value::Null)], &hlc(1), Premerged::default())
                .await
                .is_err()
        );
        let huge = vec![0u8; engine_kernel::crdt::MAX_DOCUMENT_BYTES];
        let past_the_bound = [("body", engine_kernel::crdt::update_to_base64(&huge).into())];
        let err = updated(&TABLE, true, &before, Stamps::new(), &past_the_bound, &hlc(1), Premerged::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), engine_kernel::ErrorCode::ValidationFailed);
        assert!(err.to_string().contains("at most"), "{err}");
    }
}
