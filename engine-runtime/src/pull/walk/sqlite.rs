//! The walk through a group's rows on SQLite: the same order as on Postgres (selection by
//! selection, bucket by bucket in key order, and in a bucket by number and key), each step one
//! range scan of a bucket's `(scope, _engine_seq, key)` index bounded by the page's room. A
//! bucket's probe is a statement of its own: in the process, it costs microseconds.

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::{BucketKey, ColumnMeta, MergePolicy, Row, SqlType, TableMeta};
use engine_sqlite::Sql;
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row as _, SqliteConnection};

use super::super::cursor::{Group, WalkPoint};
use super::super::page::{Page, identity};
use super::{enter, walk_selections, went_before};
use crate::error::Result;
use crate::rules::selection::sqlite::push_walk_one;
use crate::sqlite::{decode_columns, write_row};

/// Walk `group` from where its walk stands until the walk is done (`true`) or the page is full
/// (`false`). A row costs its JSON text, written from the file's values, and the columns
/// deciding its buckets; where the walk stands is taken once a step, from its last row.
pub(crate) async fn walk(
    rules: &RuleIndex,
    conn: &mut SqliteConnection,
    group: &mut Group,
    page: &mut Page<'_>,
) -> Result<bool> {
    let selections = walk_selections(rules, group);
    let from = group.rows;
    let walk = group.walk.as_mut().expect("a walk is under way");
    let mut json = Vec::with_capacity(512);
    for (position, (_, rule_selection, table)) in selections.iter().enumerate() {
        let Some(earlier) = enter(walk, &selections, position) else { continue };
        let walked_before = |row: &Row| went_before(&earlier, &group.buckets, row);
        let stamps = table.merge == MergePolicy::Field;
        let deciding = rules.deciding_columns(table);
        let deciding: Vec<usize> =
            (0..table.columns.len()).filter(|&i| deciding.contains(&table.columns[i].name)).collect();
        let text_key = match table.primary_key {
            [key] => table.columns.iter().position(|c| c.name == *key && c.sql_type == SqlType::Text),
            _ => None,
        };
        let buckets: Vec<&BucketKey> = group.buckets.iter().filter(|b| b.rule() == rule_selection.rule.name).collect();
        for bucket in buckets {
            if walk.point.as_ref().is_some_and(|point| bucket < &point.bucket) {
                continue; // walked already
            }
            let params = bucket.params();
            loop {
                let limit = page.entries_left();
                if limit == 0 {
                    return Ok(false);
                }
                let resume = walk.point.as_ref().filter(|p| &p.bucket == bucket).map(|p| (p.xid, p.key.as_slice()));
                let mut sql = Sql::new("");
                push_walk_one(&mut sql, table, rule_selection, &params, (from, walk.to), resume, limit, stamps);
                let rows = sql.build().fetch_all(&mut *conn).await?;
                // The last row walked: where the walk stands once the step ends.
                let (mut last, mut full) = (None, false);
                for row in &rows {
                    let decided = decode_columns(table, row, &deciding)?;
                    if !walked_before(&decided) {
                        json.clear();
                        write_row(table, row, &mut json)?;
                        if !page.fits(json.len()) {
                            full = true;
                            break;
                        }
                        if stamps {
                            let stamps: &str = row.try_get(table.columns.len() + 1)?;
                            page.observe(stamps);
                        }
                        let identity = match text_key {
                            Some(index) => row.try_get::<&str, _>(index)?.to_owned(),
                            None => identity(table.primary_key.iter().copied().zip(&key_of(table, row)?)),
                        };
                        page.add_row(table, identity, &decided, &json);
                    }
                    last = Some(row);
                }
                if let Some(row) = last {
                    let seq: i64 = row.try_get(table.columns.len())?;
                    let key = key_of(table, row)?;
                    walk.point = Some(WalkPoint { bucket: bucket.clone(), xid: u64::try_from(seq).unwrap_or(0), key });
                }
                if full {
                    return Ok(false);
                }
                if rows.len() < limit {
                    break; // the bucket is walked
                }
            }
        }
    }
    Ok(true)
}

/// The key of the row of `table` in the first columns of `row`, in key order.
fn key_of(table: &TableMeta, row: &SqliteRow) -> Result<Vec<Value>> {
    let index = |key: &ColumnMeta| table.columns.iter().position(|c| std::ptr::eq(c, key)).unwrap_or_default();
    Ok(table
        .key_columns()
        .map(|key| engine_sqlite::values::decode(row, index(key), key))
        .collect::<sqlx::Result<_>>()?)
}
