//! The walk through a group's rows on SQLite: the same order as on Postgres (selection by
//! selection, bucket by bucket in key order, and in a bucket by number and key), each step one
//! range scan of a bucket's `(scope, _engine_seq, key)` index bounded by the page's room. A
//! bucket's probe is a statement of its own: in the process, it costs microseconds.

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::{BucketKey, MergePolicy, Row};
use engine_sqlite::Sql;
use serde_json::Value;
use sqlx::{Row as _, SqliteConnection};

use super::super::cursor::{Group, WalkPoint};
use super::super::page::{Page, identity};
use super::{enter, walk_selections, went_before};
use crate::error::{Error, Result};
use crate::rules::selection::sqlite::push_walk_one;
use crate::sqlite::decode_row;

/// Walk `group` from where its walk stands until the walk is done (`true`) or the page is full
/// (`false`).
pub(crate) async fn walk(
    rules: &RuleIndex,
    conn: &mut SqliteConnection,
    group: &mut Group,
    page: &mut Page<'_>,
) -> Result<bool> {
    let selections = walk_selections(rules, group);
    let from = group.rows;
    let walk = group.walk.as_mut().expect("a walk is under way");
    for (position, (_, rule_selection, table)) in selections.iter().enumerate() {
        let Some(earlier) = enter(walk, &selections, position) else { continue };
        let walked_before = |row: &Row| went_before(&earlier, &group.buckets, row);
        let stamps = table.merge == MergePolicy::Field;
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
                for row in &rows {
                    let decoded = decode_row(table, row)?;
                    let key: Vec<Value> =
                        table.primary_key.iter().map(|k| decoded.get(*k).cloned().unwrap_or(Value::Null)).collect();
                    if !walked_before(&decoded) {
                        let json = serde_json::to_vec(&decoded)
                            .map_err(|e| Error::internal(format!("writing a row of `{}`: {e}", table.name)))?;
                        if !page.fits(json.len()) {
                            return Ok(false);
                        }
                        if stamps {
                            let stamps: String = row.try_get(table.columns.len() + 1)?;
                            page.observe(&stamps);
                        }
                        let identity = identity(table.primary_key.iter().copied().zip(&key));
                        page.add_row(table, identity, &decoded, &json);
                    }
                    let seq: i64 = row.try_get(table.columns.len())?;
                    walk.point = Some(WalkPoint { bucket: bucket.clone(), xid: u64::try_from(seq).unwrap_or(0), key });
                }
                if rows.len() < limit {
                    break; // the bucket is walked
                }
            }
        }
    }
    Ok(true)
}
