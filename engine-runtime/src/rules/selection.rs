//! The selection compiler: the one place where a sync rule's selection becomes SQL. Which rows a
//! bucket holds is decided here for every reader of it: pull, write authorization (did a bucket
//! have rows), the change-tracking triggers (which buckets a row left), membership queries and
//! stats. The same selection evaluated in Rust is [`RuleSelection::bucket_of`]; a property test
//! holds the two to each other.
//!
//! A row is in a bucket of a selection when every scope column equals the bucket's parameter
//! (compared in the column's own type, so its index serves), every column tied to a parameter
//! equals the scope column, every constant filter holds, and the row is live (its soft-delete
//! column is null). Dynamic SQL goes through [`Sql`] (sqlx's `QueryBuilder`): values are bound,
//! never spliced, and no placeholder is numbered by hand.
//!
//! A pull reads a selection's rows with [`push_walk`]: bucket by bucket, each an ordered range
//! scan of the `(scope, _engine_xid, key)` index bounded by the rows still wanted.

use engine_kernel::rules::buckets::{RuleSelection, param_text};
use engine_kernel::{ColumnMeta, SqlType, TableMeta};

use crate::pg::sql::{NEWEST_STAMP, Sql, constant, ident, literal, ordered};

/// `alias.column`, quoted.
pub(crate) fn column(alias: &str, name: &str) -> String {
    format!("{alias}.{}", ident(name))
}

/// Bind `value`, a parameter's text form, as a value of `column`'s type: `$n` for text,
/// `$n::text::int8` and the like otherwise. A column compared with it keeps its index.
pub(crate) fn push_as_column(sql: &mut Sql, column: &ColumnMeta, value: String) {
    sql.push_bind(value);
    if column.sql_type != SqlType::Text {
        sql.push(format_args!("::text::{}", column.sql_type.postgres()));
    }
}

/// `alias.deleted IS NULL` for a table with a soft-delete column: only live rows are in buckets.
pub(crate) fn live(alias: &str, table: &TableMeta) -> Option<String> {
    table.soft_delete.map(|deleted| format!("{} IS NULL", column(alias, deleted)))
}

/// The conditions of a selection that bind nothing: its constant filters, then its ties.
fn fixed_conditions(alias: &str, selection: &RuleSelection) -> Vec<String> {
    let filters =
        selection.selection.filters.iter().map(|f| format!("{} = {}", column(alias, f.column), constant(f.value)));
    let ties = selection.ties().iter().map(|(c, first)| format!("{} = {}", column(alias, c), column(alias, first)));
    filters.chain(ties).collect()
}

/// The rows of `table` (as `alias`) in the bucket of `selection` whose parameters are `params`
/// (in parameter order): scope, ties, filters, live.
pub(crate) fn push_selected(
    sql: &mut Sql,
    alias: &str,
    table: &TableMeta,
    selection: &RuleSelection,
    params: &[String],
) {
    for (i, (name, value)) in selection.scope_columns().iter().zip(params).enumerate() {
        if i > 0 {
            sql.push(" AND ");
        }
        sql.push(format_args!("{} = ", column(alias, name)));
        push_as_column(sql, table.column(name).expect("scope columns are columns"), value.clone());
    }
    for condition in fixed_conditions(alias, selection).into_iter().chain(live(alias, table)) {
        sql.push(" AND ").push(condition);
    }
}

/// The rows of `table` (as `alias`) in any bucket of `selection`, with the bucket's parameters
/// as text: `(parameters, conditions)`, for `SELECT {parameters} … WHERE {conditions}`.
pub(crate) fn any_bucket(alias: &str, table: &TableMeta, selection: &RuleSelection) -> (String, String) {
    let scope = selection.scope_columns();
    let parameters: Vec<String> = scope.iter().map(|c| format!("{}::text", column(alias, c))).collect();
    let mut conditions: Vec<String> = scope.iter().map(|c| format!("{} IS NOT NULL", column(alias, c))).collect();
    conditions.extend(fixed_conditions(alias, selection));
    conditions.extend(live(alias, table));
    (parameters.join(", "), conditions.join(" AND "))
}

/// The key of the bucket of `selection` that the row `record` (`OLD`, `NEW` in a trigger) is in,
/// or null when it is in none; whether the row is live is asked apart.
pub(crate) fn bucket_key_of(record: &str, selection: &RuleSelection) -> String {
    let scope = selection.scope_columns();
    let mut conditions: Vec<String> = scope.iter().map(|c| format!("{} IS NOT NULL", column(record, c))).collect();
    conditions.extend(fixed_conditions(record, selection));
    let params: Vec<String> = scope.iter().map(|c| format!("{}::text", column(record, c))).collect();
    format!(
        "CASE WHEN {} THEN _engine_bucket_key({}, ARRAY[{}]) END",
        conditions.join(" AND "),
        literal(selection.rule.name),
        params.join(", ")
    )
}

/// `alias._engine_xid, key…`: the change stream's order within a table (transaction id, then the
/// primary key byte-wise).
pub(crate) fn stream_order(alias: &str, table: &TableMeta) -> String {
    let mut parts = vec![format!("{alias}._engine_xid")];
    parts.extend(table.key_columns().map(|c| ordered(alias, c)));
    parts.join(", ")
}

/// `expression`, a value's text form, as a value of `sql_type`, compared byte-wise when text.
fn text_as(expression: &str, sql_type: SqlType) -> String {
    match sql_type {
        SqlType::Text => format!("{expression} COLLATE \"C\""),
        SqlType::Bytes => format!("decode({expression}, 'base64')"),
        other @ (SqlType::SmallInt
        | SqlType::Integer
        | SqlType::BigInt
        | SqlType::Real
        | SqlType::Double
        | SqlType::Boolean
        | SqlType::Uuid
        | SqlType::Timestamp
        | SqlType::Json
        | SqlType::CrdtText
        | SqlType::CrdtMap) => format!("{expression}::{}", other.postgres()),
    }
}

/// Bind `value`, a value's text form, as a value of `sql_type`, compared byte-wise when text: the
/// bound form of [`text_as`].
fn push_text_as(sql: &mut Sql, value: String, sql_type: SqlType) {
    match sql_type {
        SqlType::Text => sql.push_bind(value).push(" COLLATE \"C\""),
        SqlType::Bytes => sql.push("decode(").push_bind(value).push(", 'base64')"),
        other @ (SqlType::SmallInt
        | SqlType::Integer
        | SqlType::BigInt
        | SqlType::Real
        | SqlType::Double
        | SqlType::Boolean
        | SqlType::Uuid
        | SqlType::Timestamp
        | SqlType::Json
        | SqlType::CrdtText
        | SqlType::CrdtMap) => sql.push_bind(value).push(format_args!("::{}", other.postgres())),
    };
}

/// A value of `sql_type` no key can be before, in its text form: where a walk enters a bucket.
fn floor(sql_type: SqlType) -> &'static str {
    match sql_type {
        SqlType::Text | SqlType::Bytes => "",
        SqlType::Uuid => "00000000-0000-0000-0000-000000000000",
        SqlType::Timestamp => "-infinity",
        SqlType::Boolean => "false",
        SqlType::SmallInt => "-32768",
        SqlType::Integer => "-2147483648",
        SqlType::BigInt => "-9223372036854775808",
        SqlType::Real | SqlType::Double => "-Infinity",
        // Not key types: the least JSON value, or empty bytes.
        SqlType::Json => "null",
        SqlType::CrdtText | SqlType::CrdtMap => "",
    }
}

/// One step of a pull's walk through a selection: the rows of transactions from `from` (on) to
/// `to` (below) in the buckets whose parameters are `buckets`, bucket after bucket in the given
/// order and in a bucket in the change stream's order, the first bucket after `resume` (the
/// last row delivered in it: transaction id and key) when given; at most `limit` rows.
#[derive(Debug)]
pub(crate) struct WalkStep<'a> {
    pub(crate) buckets: &'a [Vec<String>],
    pub(crate) resume: Option<(u64, &'a [serde_json::Value])>,
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) limit: usize,
    /// Whether to return each row's clock stamps too (`_engine_hlc`, after the bucket index).
    pub(crate) stamps: bool,
}

/// The `SELECT` of one walk step over `selection` of `table`: each row's columns, then its
/// transaction id as text, then the 1-based index of its bucket in `step.buckets`, then (when
/// asked) its newest clock stamp, or all its stamps as a JSON object.
///
/// A step over one bucket is one ordered index range scan on `(scope, _engine_xid, key)` under
/// the `LIMIT`: the index gives the order, nothing is sorted. A step over several is, per bucket,
/// a `LATERAL` such scan that stops at `limit`; the buckets come in the order of
/// `unnest … WITH ORDINALITY`, which Postgres knows, so the final order needs only an incremental
/// sort within each bucket and the scan stops as soon as the page is full. Either way the step
/// costs the rows it returns plus a probe per bucket it passes.
pub(crate) fn push_walk(sql: &mut Sql, table: &TableMeta, selection: &RuleSelection, step: &WalkStep<'_>) {
    if let [bucket] = step.buckets {
        push_walk_one(sql, table, selection, step, bucket);
    } else {
        push_walk_many(sql, table, selection, step);
    }
}

/// Where the walk starts in the step's first bucket: after the resumed row (`strict` 1), or at
/// the step's first transaction before any key (`strict` 0). The start is where the index scan
/// begins, so it must never lie below the step: the bucket would be read from its first row on.
fn first_start(table: &TableMeta, step: &WalkStep<'_>) -> (u64, Vec<String>, i32) {
    match step.resume.filter(|(xid, _)| *xid >= step.from) {
        Some((xid, values)) => {
            let keys = table.key_columns().count();
            (xid, (0..keys).map(|k| values.get(k).and_then(param_text).unwrap_or_default()).collect(), 1)
        }
        None => floor_start(table, step),
    }
}

/// The step's first transaction, before any key.
fn floor_start(table: &TableMeta, step: &WalkStep<'_>) -> (u64, Vec<String>, i32) {
    (step.from, table.key_columns().map(|key| floor(key.sql_type).to_owned()).collect(), 0)
}

/// The select list of a walk step: the columns of `alias`, its transaction id, the bucket's
/// index `index`, its stamps when asked.
fn push_walk_select(sql: &mut Sql, table: &TableMeta, alias: &str, index: &str, stamps: bool) {
    let columns: Vec<String> = table.columns.iter().map(|c| column(alias, c.name)).collect();
    // The newest stamp where the row keeps it, else the whole object (a row written before
    // stamps kept their newest, or by SQL of its own).
    let stamps = if stamps {
        format!(
            ", coalesce({alias}._engine_hlc ->> {newest}, {alias}._engine_hlc::text)",
            newest = literal(NEWEST_STAMP)
        )
    } else {
        String::new()
    };
    sql.push(format_args!("SELECT {}, {alias}._engine_xid::text, {index}{stamps} ", columns.join(", ")));
}

/// The conditions of a step on `t` after its scope: the step's transactions, the start
/// `ROW(t._engine_xid, key…, 1) > ROW(x, k…, s)` (after the start when `s` is 1, from it when 0;
/// Postgres scans the index from `(xid, key…) >= (x, k…)` and checks the rest on the rows it
/// finds), the fixed conditions and liveness, then the order and the limit. `start` pushes the
/// right-hand row's values.
fn push_walk_rest(
    sql: &mut Sql,
    table: &TableMeta,
    selection: &RuleSelection,
    step: &WalkStep<'_>,
    start: impl FnOnce(&mut Sql),
) {
    sql.push("t._engine_xid >= ").push_bind(step.from.to_string()).push("::text::xid8 AND t._engine_xid < ");
    sql.push_bind(step.to.to_string()).push("::text::xid8");
    let left: Vec<String> = table.key_columns().map(|c| ordered("t", c)).collect();
    sql.push(format_args!(" AND ROW(t._engine_xid, {}, 1) > ROW(", left.join(", ")));
    start(sql);
    sql.push(")");
    for condition in fixed_conditions("t", selection).into_iter().chain(live("t", table)) {
        sql.push(" AND ").push(condition);
    }
    let limit = i64::try_from(step.limit).unwrap_or(i64::MAX);
    sql.push(format_args!(" ORDER BY {} LIMIT ", stream_order("t", table))).push_bind(limit);
}

/// The scope values (parameter order) of the rows of `table` written by the transactions from
/// `from` (on) to `to` (below), at most `limit` of them, read in transaction order by the table's
/// `(_engine_xid, key)` index: which buckets of `selection` a window of the change stream may
/// touch, found by the rows that changed rather than by a probe per bucket. A row that fails the
/// selection's other conditions only adds a bucket to look at.
pub(crate) fn push_changed_scopes(
    sql: &mut Sql,
    table: &TableMeta,
    selection: &RuleSelection,
    (from, to): (u64, u64),
    limit: usize,
) {
    let scope: Vec<String> = selection.scope_columns().iter().map(|c| format!("{}::text", column("t", c))).collect();
    sql.push(format_args!("SELECT {} FROM {} AS t WHERE t._engine_xid >= ", scope.join(", "), ident(table.name)));
    sql.push_bind(from.to_string()).push("::text::xid8 AND t._engine_xid < ").push_bind(to.to_string());
    sql.push("::text::xid8 ORDER BY t._engine_xid LIMIT ").push_bind(i64::try_from(limit).unwrap_or(i64::MAX));
}

/// A step over the one bucket `params`.
fn push_walk_one(sql: &mut Sql, table: &TableMeta, selection: &RuleSelection, step: &WalkStep<'_>, params: &[String]) {
    push_walk_select(sql, table, "t", "1::int8", step.stamps);
    sql.push(format_args!("FROM {} AS t WHERE ", ident(table.name)));
    for (name, value) in selection.scope_columns().iter().zip(params) {
        sql.push(format_args!("{} = ", column("t", name)));
        push_as_column(sql, table.column(name).expect("scope columns are columns"), value.clone());
        sql.push(" AND ");
    }
    let (xid, key, strict) = first_start(table, step);
    let keys: Vec<&ColumnMeta> = table.key_columns().collect();
    push_walk_rest(sql, table, selection, step, |sql| {
        sql.push_bind(xid.to_string()).push("::text::xid8");
        for (column, value) in keys.iter().zip(key) {
            sql.push(", ");
            push_text_as(sql, value, column.sql_type);
        }
        sql.push(", ").push_bind(strict);
    });
}

/// A step over several buckets: a `LATERAL` scan per bucket, in the buckets' order.
fn push_walk_many(sql: &mut Sql, table: &TableMeta, selection: &RuleSelection, step: &WalkStep<'_>) {
    let scope = selection.scope_columns();
    let keys: Vec<&ColumnMeta> = table.key_columns().collect();
    push_walk_select(sql, table, "r", "v.i", step.stamps);
    sql.push("FROM unnest(");
    for i in 0..scope.len() {
        sql.push_bind(step.buckets.iter().map(|b| b[i].clone()).collect::<Vec<String>>()).push("::text[], ");
    }
    // The first bucket may resume after a row; the others start at the step's first transaction.
    let starts: Vec<(u64, Vec<String>, i32)> = (0..step.buckets.len())
        .map(|i| if i == 0 { first_start(table, step) } else { floor_start(table, step) })
        .collect();
    sql.push_bind(starts.iter().map(|(xid, _, _)| xid.to_string()).collect::<Vec<String>>()).push("::text[]");
    for k in 0..keys.len() {
        sql.push(", ").push_bind(starts.iter().map(|(_, key, _)| key[k].clone()).collect::<Vec<String>>());
        sql.push("::text[]");
    }
    sql.push(", ").push_bind(starts.iter().map(|(_, _, strict)| *strict).collect::<Vec<i32>>()).push("::int[]");
    let mut names: Vec<String> = (0..scope.len()).map(|i| format!("p{i}")).collect();
    names.push("x".into());
    names.extend((0..keys.len()).map(|k| format!("k{k}")));
    names.push("s".into());
    names.push("i".into());
    sql.push(format_args!(
        ") WITH ORDINALITY AS v({}) CROSS JOIN LATERAL (SELECT t.* FROM {} AS t WHERE ",
        names.join(", "),
        ident(table.name)
    ));
    for (i, name) in scope.iter().enumerate() {
        let sql_type = table.column(name).expect("scope columns are columns").sql_type;
        let value = match sql_type {
            SqlType::Text => format!("v.p{i}"),
            other @ (SqlType::SmallInt
            | SqlType::Integer
            | SqlType::BigInt
            | SqlType::Real
            | SqlType::Double
            | SqlType::Boolean
            | SqlType::Uuid
            | SqlType::Timestamp
            | SqlType::Json
            | SqlType::Bytes
            | SqlType::CrdtText
            | SqlType::CrdtMap) => format!("v.p{i}::{}", other.postgres()),
        };
        sql.push(format_args!("{} = {value} AND ", column("t", name)));
    }
    push_walk_rest(sql, table, selection, step, |sql| {
        let right: Vec<String> = (0..keys.len()).map(|k| text_as(&format!("v.k{k}"), keys[k].sql_type)).collect();
        sql.push(format_args!("v.x::xid8, {}, v.s", right.join(", ")));
    });
    let limit = i64::try_from(step.limit).unwrap_or(i64::MAX);
    sql.push(format_args!(") AS r ORDER BY v.i, {} LIMIT ", stream_order("r", table))).push_bind(limit);
}

pub(crate) mod sqlite;

#[cfg(test)]
mod tests;
