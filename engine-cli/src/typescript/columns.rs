//! The TypeScript types of a table's columns and of a sync rule's parameters, as rows and bucket
//! keys carry their values (`docs/protocol.md#row-values`), and the doc line that says how a
//! column's values travel when that is not plain.

use engine_kernel::rules::ParamSource;
use engine_kernel::{ColumnMeta, SqlType};

use super::syntax::sentence;

/// The TypeScript type of a column's values, as rows carry them (`docs/protocol.md#row-values`).
pub(super) fn column_type(column: &ColumnMeta) -> Option<String> {
    let base = match column.sql_type {
        SqlType::Text | SqlType::Uuid | SqlType::Timestamp | SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => {
            "string"
        }
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt => "number",
        // A value that is not finite travels as null.
        SqlType::Real | SqlType::Double => "number | null",
        SqlType::Boolean => "boolean",
        SqlType::Json => "unknown",
    };
    Some(if column.nullable && !base.ends_with("| null") { format!("{base} | null") } else { base.to_owned() })
}

/// What a column's doc says: its description, and how its values travel when that is not plain.
pub(super) fn column_doc(column: &ColumnMeta) -> String {
    let form = match column.sql_type {
        SqlType::Uuid => "A UUID, hyphenated lowercase.",
        SqlType::Timestamp => "A timestamp, RFC 3339 in UTC.",
        SqlType::Bytes => "Bytes, base64.",
        SqlType::CrdtText => "Collaborative text: base64 of the document's yrs v1 state (root text `text`).",
        SqlType::CrdtMap => "A collaborative map: base64 of the document's yrs v1 state (root map `map`).",
        SqlType::BigInt => "A 64-bit integer (exact up to 2^53 as a number).",
        SqlType::Real | SqlType::Double => "Null when not finite.",
        SqlType::Text if column.blob => "A blob key: `sha256:` and 64 lowercase hex digits.",
        SqlType::Text | SqlType::SmallInt | SqlType::Integer | SqlType::Boolean | SqlType::Json => "",
    };
    [sentence(column.description), form.to_owned()].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The TypeScript type of a bucket parameter.
pub(super) fn param_type(sql_type: SqlType) -> Option<&'static str> {
    match sql_type {
        SqlType::Text | SqlType::Uuid => Some("string"),
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt => Some("number"),
        SqlType::Boolean => Some("boolean"),
        // No bucket key holds these.
        SqlType::Real
        | SqlType::Double
        | SqlType::Timestamp
        | SqlType::Json
        | SqlType::Bytes
        | SqlType::CrdtText
        | SqlType::CrdtMap => None,
    }
}

/// Where a parameter's value comes from, as the contract writes it.
pub(super) fn source(source: ParamSource) -> String {
    match source {
        ParamSource::Claim(claim) => claim.describe(),
        ParamSource::Membership { column } => format!("membership.{column}"),
    }
}
