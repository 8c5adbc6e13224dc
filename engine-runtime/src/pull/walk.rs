//! The walk through a group's rows (`docs/design.md` §1): selection by selection (a synced table and
//! one of its rule's selections, in the order of [`WalkSelection`]), bucket by bucket (in key order), and in a bucket by
//! transaction id and key, each step one ordered index range scan bounded by the page's room.
//! A page therefore costs the rows it delivers plus a probe per bucket it passes, however many
//! rows the table holds and whatever the planner knows of them; the position of the walk goes
//! in the cursor, so the next page starts where this one ended.

use std::collections::HashSet;

use engine_kernel::rules::buckets::{RuleIndex, RuleSelection};
use engine_kernel::{BucketKey, Row, SqlType, TableMeta};
use futures_util::TryStreamExt;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row as _, ValueRef as _};

use super::cursor::{Group, Walk, WalkPoint, WalkSelection};
use super::page::Page;
use crate::core::Core;
use crate::error::{Error, Result};
use crate::pg::sql;
use crate::pg::sql::Sql;
use crate::pg::values::{decode_columns, decode_key, write_row};
use crate::rules::selection::{self, WalkStep};

pub(crate) mod sqlite;

/// The walk selections of `group`, in walk order: every selection of a synced table whose rule has a
/// bucket in the group.
fn walk_selections<'s>(
    rules: &'s RuleIndex,
    group: &Group,
) -> Vec<(WalkSelection, &'s RuleSelection, &'static TableMeta)> {
    let mut selections = Vec::new();
    for table in rules.synced_tables() {
        for rule_selection in rules.selections(table.name) {
            let rule = rule_selection.rule;
            if !group.buckets.iter().any(|b| b.rule() == rule.name) {
                continue;
            }
            let index = rule.data.iter().position(|s| std::ptr::eq(s, rule_selection.selection)).unwrap_or(0);
            let walked = WalkSelection { table: table.name.to_owned(), rule: rule.name.to_owned(), selection: index };
            selections.push((walked, rule_selection, table));
        }
    }
    selections.sort_by(|a, b| a.0.cmp(&b.0));
    selections
}

/// How far `group` has got at `horizon`, in steps (`(done, total)`): a step is one walk
/// selection of one of its buckets. A group caught up has done them all; a walk under way, the
/// selections before its own and, in its own, the buckets before its point. Read from the
/// cursor alone, it costs no statement (`docs/protocol.md#pull-response`, `progress`).
pub(super) fn progress(rules: &RuleIndex, group: &Group, horizon: u64) -> (u64, u64) {
    let steps = |selection: &WalkSelection| group.buckets.iter().filter(|b| b.rule() == selection.rule).count();
    let selections = walk_selections(rules, group);
    let total: usize = selections.iter().map(|(s, _, _)| steps(s)).sum();
    let done: usize = match &group.walk {
        _ if group.is_caught_up(horizon) => total,
        Some(Walk { selection: Some(current), point, .. }) => {
            let before: usize = selections.iter().filter(|(s, _, _)| s < current).map(|(s, _, _)| steps(s)).sum();
            let within = point
                .as_ref()
                .map_or(0, |p| group.buckets.iter().filter(|b| b.rule() == current.rule && **b < p.bucket).count());
            before + within
        }
        _ => 0,
    };
    (done as u64, total as u64)
}

/// A walk selection and what it walks: the selection of a table's rule, and the table.
type WalkedSelection<'s> = (WalkSelection, &'s RuleSelection, &'static TableMeta);

/// Enter walk selection `position` of `selections`: `None` when the walk is past it; otherwise
/// the earlier selections of its table, whose rows went with them.
fn enter<'s>(walk: &mut Walk, selections: &[WalkedSelection<'s>], position: usize) -> Option<Vec<&'s RuleSelection>> {
    let (this, _, table) = &selections[position];
    if walk.selection.as_ref().is_some_and(|current| this < current) {
        return None; // walked already
    }
    if walk.selection.as_ref() != Some(this) {
        walk.selection = Some(this.clone());
        walk.point = None;
    }
    Some(selections[..position].iter().filter(|(_, _, t)| t.name == table.name).map(|(_, s, _)| *s).collect())
}

/// Whether an `earlier` selection of its table put `row` in one of the group's `buckets`: it
/// went with that selection (the rows of the walk's numbers do not change while it goes on).
fn went_before(earlier: &[&RuleSelection], buckets: &[BucketKey], row: &Row) -> bool {
    earlier.iter().any(|s| s.bucket_of(row).is_some_and(|b| buckets.binary_search(&b).is_ok()))
}

/// Past this many buckets of a walk selection, an incremental walk first reads which of them its window
/// changed: a bucket's probe of the index costs several rows' reads.
const MANY_BUCKETS: usize = 64;

/// The buckets of `selection` that rows of `table` written in `window` are in; `None` when more
/// than `most` rows were written there (probing each bucket is cheaper then), or when a scope
/// column is not text (the key's parameter is then not the column's text).
async fn changed_buckets(
    conn: &mut PgConnection,
    table: &TableMeta,
    selection: &RuleSelection,
    window: (u64, u64),
    most: usize,
) -> Result<Option<HashSet<BucketKey>>> {
    let scope = selection.scope_columns();
    if scope.iter().any(|c| table.column(c).is_none_or(|c| c.sql_type != SqlType::Text)) {
        return Ok(None);
    }
    let mut sql = Sql::new("");
    selection::push_changed_scopes(&mut sql, table, selection, window, most + 1);
    let rows = sql.build().fetch_all(&mut *conn).await?;
    if rows.len() > most {
        return Ok(None);
    }
    let mut changed = HashSet::new();
    for row in &rows {
        let params: Option<Vec<String>> =
            (0..scope.len()).map(|i| row.try_get::<Option<String>, _>(i).ok().flatten()).collect();
        if let Some(params) = params {
            changed.insert(BucketKey::new(selection.rule.name, &params));
        }
    }
    Ok(Some(changed))
}

/// The columns of a table that decide which buckets its rows are in, read from each row of a
/// step: decoded again only when their bytes differ from the row before's (the rows of a bucket
/// share them), so a row costs its JSON text and its key, not a map of its values.
struct Deciding {
    columns: Vec<usize>,
    /// The last row's bytes of `columns` (none before the first row).
    bytes: Option<Vec<Option<Vec<u8>>>>,
    row: Row,
    /// The index of a one-column text key, whose text is the row's identity as it is.
    text_key: Option<usize>,
}

impl Deciding {
    fn new(rules: &RuleIndex, table: &TableMeta) -> Self {
        let names = rules.deciding_columns(table);
        let columns = (0..table.columns.len()).filter(|&i| names.contains(&table.columns[i].name)).collect();
        let text_key = match table.primary_key {
            [key] => table.columns.iter().position(|c| c.name == *key && c.sql_type == SqlType::Text),
            _ => None,
        };
        Deciding { columns, bytes: None, row: Row::new(), text_key }
    }

    /// Read the deciding columns of `row` (of `table`); whether they differ from the last row's.
    fn read(&mut self, table: &TableMeta, row: &PgRow) -> Result<bool> {
        let bytes = |i: usize| -> Option<Option<&[u8]>> {
            let value = row.try_get_raw(i).ok()?;
            if value.is_null() { Some(None) } else { value.as_bytes().ok().map(Some) }
        };
        let same = self
            .bytes
            .as_ref()
            .is_some_and(|kept| self.columns.iter().zip(kept).all(|(&i, kept)| bytes(i) == Some(kept.as_deref())));
        if same {
            return Ok(false);
        }
        self.row = decode_columns(table, row, &self.columns)?;
        self.bytes = Some(self.columns.iter().map(|&i| bytes(i).flatten().map(<[u8]>::to_vec)).collect());
        Ok(true)
    }

    /// The [`identity`](super::page::identity) of the key of the row of `table` in `row`: a
    /// one-column text key's text as it is, read without a value made for it.
    fn key_identity(&self, table: &TableMeta, row: &PgRow) -> Result<String> {
        if let Some(index) = self.text_key {
            let text: &str = row.try_get(index).map_err(Error::Database)?;
            return Ok(text.to_owned());
        }
        let key = decode_key(table, row)?;
        Ok(super::page::identity(table.primary_key.iter().copied().zip(&key)))
    }
}

/// Walk `group` from where its walk stands until the walk is done (`true`) or the page is full
/// (`false`).
pub(super) async fn walk(core: &Core, conn: &mut PgConnection, group: &mut Group, page: &mut Page<'_>) -> Result<bool> {
    let selections = walk_selections(&core.rules, group);
    let from = group.rows;
    let walk = group.walk.as_mut().expect("a walk is under way");
    for (position, (_, rule_selection, table)) in selections.iter().enumerate() {
        let Some(earlier) = enter(walk, &selections, position) else { continue };
        let walked_before = |row: &Row| went_before(&earlier, &group.buckets, row);
        let mut buckets: Vec<&BucketKey> =
            group.buckets.iter().filter(|b| b.rule() == rule_selection.rule.name).collect();
        if walk.point.is_none() && from > 0 && buckets.len() > MANY_BUCKETS {
            // An incremental walk of many buckets: only those the window's rows are in.
            if let Some(changed) = changed_buckets(conn, table, rule_selection, (from, walk.to), buckets.len()).await? {
                buckets.retain(|b| changed.contains(*b));
            }
        }
        let mut deciding = Deciding::new(&core.rules, table);
        let (mut again, mut json) = (false, Vec::with_capacity(512));
        loop {
            let limit = page.entries_left();
            if limit == 0 {
                return Ok(false);
            }
            let ahead: Vec<&BucketKey> = match &walk.point {
                Some(point) => buckets.iter().copied().filter(|b| *b >= &point.bucket).collect(),
                None => buckets.clone(),
            };
            if ahead.is_empty() {
                break;
            }
            let params: Vec<Vec<String>> = ahead.iter().map(|b| b.params()).collect();
            let resume = walk.point.as_ref().filter(|p| &p.bucket == ahead[0]).map(|p| (p.xid, p.key.as_slice()));
            let stamps = table.merge == engine_kernel::MergePolicy::Field;
            let step = WalkStep { buckets: &params, resume, from, to: walk.to, limit, stamps };
            let mut sql = Sql::new("");
            selection::push_walk(&mut sql, table, rule_selection, &step);
            let mut rows = sql.build().fetch(&mut *conn);
            let (mut read, mut full) = (0, false);
            // The last row walked: where the walk stands once the step ends.
            let mut last = None;
            while let Some(row) = rows.try_next().await? {
                read += 1;
                if deciding.read(table, &row)? {
                    again = walked_before(&deciding.row);
                }
                if !again {
                    json.clear();
                    write_row(table, &row, &mut json)?;
                    if !page.fits(json.len()) {
                        full = true;
                        break;
                    }
                }
                let xid: &str = row.try_get(table.columns.len()).map_err(Error::Database)?;
                let index: i64 = row.try_get(table.columns.len() + 1).map_err(Error::Database)?;
                let bucket = usize::try_from(index - 1).ok().and_then(|i| ahead.get(i)).ok_or_else(|| {
                    Error::internal(format!("a walk step answered bucket {index} of {}", ahead.len()))
                })?;
                if !again {
                    if stamps {
                        let stamps: &str = row.try_get(table.columns.len() + 2).map_err(Error::Database)?;
                        page.observe(stamps);
                    }
                    page.add_row(table, deciding.key_identity(table, &row)?, &deciding.row, &json);
                }
                last = Some((*bucket, sql::xid(xid)?, row));
            }
            drop(rows);
            if let Some((bucket, xid, row)) = last {
                walk.point = Some(WalkPoint { bucket: bucket.clone(), xid, key: decode_key(table, &row)? });
            }
            if full {
                return Ok(false);
            }
            if read < limit {
                break; // every bucket of the selection is walked
            }
        }
    }
    Ok(true)
}
