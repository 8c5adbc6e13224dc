//! The walk through a group's rows on SQLite: the same order as on Postgres (selection by
//! selection, bucket by bucket in key order, and in a bucket by number and key), each step one
//! range scan of a bucket's `(scope, _engine_seq, key)` index bounded by the page's room. A
//! bucket's probe is a statement of its own: in the process, it costs microseconds. A row is
//! read as its JSON text, which SQLite writes, beside the few columns the walk decides with.

use engine_kernel::rules::buckets::RuleIndex;
use engine_kernel::{BucketKey, ColumnMeta, MergePolicy, Row, SqlType, TableMeta};
use engine_sqlite::Sql;
use engine_sqlite::values::is_float;
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row as _, SqliteConnection};

use super::super::cursor::{Group, WalkPoint};
use super::super::page::{Page, identity};
use super::{enter, walk_selections, went_before};
use crate::error::Result;
use crate::rules::selection::sqlite::push_walk_one;
use crate::sqlite::write_row;

/// Walk `group` from where its walk stands until the walk is done (`true`) or the page is full
/// (`false`). A row costs its JSON text, written by SQLite, and the columns deciding its
/// buckets and its key; where the walk stands is taken once a step, from its last row.
pub(crate) async fn walk(
    rules: &RuleIndex,
    conn: &mut SqliteConnection,
    group: &mut Group,
    page: &mut Page<'_>,
) -> Result<bool> {
    let selections = walk_selections(rules, group);
    let from = group.rows;
    let walk = group.walk.as_mut().expect("a walk is under way");
    let mut written = Vec::new();
    for (position, (_, rule_selection, table)) in selections.iter().enumerate() {
        let Some(earlier) = enter(walk, &selections, position) else { continue };
        let walked_before = |row: &Row| went_before(&earlier, &group.buckets, row);
        let stamps = table.merge == MergePolicy::Field;
        let layout = Layout::of(rules, table);
        let floats = table.columns.iter().any(|c| is_float(c.sql_type));
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
                let selected = (layout.columns.as_slice(), stamps);
                push_walk_one(&mut sql, table, rule_selection, &params, (from, walk.to), resume, limit, selected);
                let rows = sql.build().fetch_all(&mut *conn).await?;
                // The last row walked: where the walk stands once the step ends.
                let (mut last, mut full) = (None, false);
                for row in &rows {
                    let decided = layout.deciding(table, row)?;
                    if !walked_before(&decided) {
                        let sql_json: &str = row.try_get(0)?;
                        let json = if floats {
                            written.clear();
                            write_row(table, sql_json, row, |i| layout.at(i), &mut written)?;
                            &written
                        } else {
                            sql_json.as_bytes()
                        };
                        if !page.fits(json.len()) {
                            full = true;
                            break;
                        }
                        if stamps {
                            let stamps: &str = row.try_get(layout.seq() + 1)?;
                            page.observe(stamps);
                        }
                        let identity = match text_key {
                            Some(index) => row.try_get::<&str, _>(layout.at(index))?.to_owned(),
                            None => identity(table.primary_key.iter().copied().zip(&layout.key(table, row)?)),
                        };
                        page.add_row(table, identity, &decided, json);
                    }
                    last = Some(row);
                }
                if let Some(row) = last {
                    let seq: i64 = row.try_get(layout.seq())?;
                    let key = layout.key(table, row)?;
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

/// Where a step's row holds what the walk reads of it: its JSON object first, then the columns
/// `columns` (indexes into the table's columns: those deciding its buckets, its key and its
/// floats, which SQLite does not write), then
/// its number, then its clock stamps.
struct Layout {
    columns: Vec<usize>,
    /// The columns deciding the row's buckets, indexes into the table's columns.
    deciding: Vec<usize>,
}

impl Layout {
    fn of(rules: &RuleIndex, table: &TableMeta) -> Layout {
        let deciding = rules.deciding_columns(table);
        let deciding: Vec<usize> =
            (0..table.columns.len()).filter(|&i| deciding.contains(&table.columns[i].name)).collect();
        let columns = (0..table.columns.len())
            .filter(|&i| {
                let column = &table.columns[i];
                deciding.contains(&i) || table.primary_key.contains(&column.name) || is_float(column.sql_type)
            })
            .collect();
        Layout { columns, deciding }
    }

    /// Where the row holds column `column` of the table.
    fn at(&self, column: usize) -> usize {
        1 + self.columns.iter().position(|&c| c == column).expect("the step selects the column")
    }

    /// Where the row holds its number.
    fn seq(&self) -> usize {
        1 + self.columns.len()
    }

    /// The columns of the row of `table` deciding its buckets.
    fn deciding(&self, table: &TableMeta, row: &SqliteRow) -> Result<Row> {
        let mut out = Row::new();
        for &i in &self.deciding {
            let column = &table.columns[i];
            out.insert(column.name.to_owned(), engine_sqlite::values::decode(row, self.at(i), column)?);
        }
        Ok(out)
    }

    /// The key of the row of `table`, in key order.
    fn key(&self, table: &TableMeta, row: &SqliteRow) -> Result<Vec<Value>> {
        let index = |key: &ColumnMeta| table.columns.iter().position(|c| std::ptr::eq(c, key)).unwrap_or_default();
        Ok(table
            .key_columns()
            .map(|key| engine_sqlite::values::decode(row, self.at(index(key)), key))
            .collect::<sqlx::Result<_>>()?)
    }
}
