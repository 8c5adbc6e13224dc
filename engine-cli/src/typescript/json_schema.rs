//! The TypeScript types of the contract's JSON Schemas, as schemars writes them for the Rust
//! types of mutator arguments: references to components, constants and enumerations, unions,
//! arrays and tuples, objects and maps. A component becomes a named type.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::syntax::{doc, property};

/// Where the contract's component schemas are, as a `$ref` names them.
pub(super) const REF_PREFIX: &str = "#/components/schemas/";

/// Where a component schema of the contract comes from.
pub(super) fn referenced_name(schema: &Value) -> Option<&str> {
    schema.get("$ref")?.as_str()?.strip_prefix(REF_PREFIX)
}

/// Every component `schema` refers to, added to `into`.
pub(super) fn references(schema: &Value, into: &mut BTreeSet<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(name) = referenced_name(schema) {
                into.insert(name.to_owned());
            }
            map.values().for_each(|v| references(v, into));
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, into)),
        _ => {}
    }
}

/// A component schema as a named type: an interface for an object with properties, a type
/// alias for anything else.
pub(super) fn named_type(out: &mut String, name: &str, schema: &Value) {
    doc(out, "", schema.get("description").and_then(Value::as_str).unwrap_or_default());
    match schema.get("properties").and_then(Value::as_object) {
        Some(properties) if schema.get("type").and_then(Value::as_str) == Some("object") => {
            writeln!(out, "export interface {name} {{").ok();
            let required = required(schema);
            for (key, property_schema) in properties {
                doc(out, "  ", property_schema.get("description").and_then(Value::as_str).unwrap_or_default());
                let optional = if required.contains(key.as_str()) { "" } else { "?" };
                writeln!(out, "  {}{optional}: {};", property(key), ts_type(property_schema)).ok();
            }
            out.push_str("}\n");
        }
        _ => {
            writeln!(out, "export type {name} = {};", ts_type(schema)).ok();
        }
    }
}

fn required(schema: &Value) -> BTreeSet<&str> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The TypeScript type of a JSON Schema, as schemars writes them for Rust types: references,
/// constants and enumerations, unions, arrays and tuples, objects and maps.
pub(super) fn ts_type(schema: &Value) -> String {
    let map = match schema {
        Value::Bool(true) => return "unknown".into(),
        Value::Bool(false) => return "never".into(),
        Value::Object(map) => map,
        _ => return "unknown".into(),
    };
    if let Some(name) = referenced_name(schema) {
        return name.to_owned();
    }
    if let Some(value) = map.get("const") {
        return value.to_string();
    }
    if let Some(Value::Array(values)) = map.get("enum") {
        return union(values.iter().map(Value::to_string));
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(variants)) = map.get(key) {
            return union(variants.iter().map(ts_type));
        }
    }
    if let Some(Value::Array(parts)) = map.get("allOf") {
        return parts.iter().map(|p| parenthesized(ts_type(p))).collect::<Vec<_>>().join(" & ");
    }
    let types: Vec<&str> = match map.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ if map.contains_key("properties") => vec!["object"],
        _ => return "unknown".into(),
    };
    union(types.into_iter().map(|t| match t {
        "string" => "string".to_owned(),
        "integer" | "number" => "number".to_owned(),
        "boolean" => "boolean".to_owned(),
        "null" => "null".to_owned(),
        "array" => array_type(map),
        "object" => object_type(schema),
        _ => "unknown".to_owned(),
    }))
}

fn array_type(map: &Map<String, Value>) -> String {
    if let Some(Value::Array(items)) = map.get("prefixItems") {
        return format!("[{}]", items.iter().map(ts_type).collect::<Vec<_>>().join(", "));
    }
    match map.get("items") {
        Some(items) => format!("{}[]", parenthesized(ts_type(items))),
        None => "unknown[]".to_owned(),
    }
}

/// An inline object type: its properties, or a map of `additionalProperties`.
fn object_type(schema: &Value) -> String {
    let required = required(schema);
    let mut fields: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(key, s)| {
            let optional = if required.contains(key.as_str()) { "" } else { "?" };
            format!("{}{optional}: {}", property(key), ts_type(s))
        })
        .collect();
    match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => {}
        Some(value @ Value::Object(_)) => fields.push(format!("[key: string]: {}", ts_type(value))),
        _ if fields.is_empty() => fields.push("[key: string]: unknown".to_owned()),
        _ => {}
    }
    format!("{{ {} }}", fields.join("; "))
}

/// The union of `members`, each once, in the order first seen.
fn union(members: impl Iterator<Item = String>) -> String {
    let mut seen = Vec::new();
    for member in members {
        for part in split_union(&member) {
            if !seen.contains(&part) {
                seen.push(part);
            }
        }
    }
    if seen.is_empty() { "never".to_owned() } else { seen.join(" | ") }
}

/// The members of a union written by [`union`] (top-level ` | ` only).
fn split_union(ts: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    let bytes = ts.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'(' | b'[' | b'{' | b'<' => depth += 1,
            b')' | b']' | b'}' | b'>' => depth -= 1,
            b'"' => {
                // Skip a string literal, escapes included.
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'|' if depth == 0 && i > 0 && bytes[i - 1] == b' ' => {
                parts.push(ts[start..i - 1].to_owned());
                start = i + 2;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(ts[start.min(ts.len())..].to_owned());
    parts
}

/// `ts` in parentheses when it is a union or an intersection.
fn parenthesized(ts: String) -> String {
    if split_union(&ts).len() > 1 || ts.contains(" & ") { format!("({ts})") } else { ts }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_schemas_become_typescript_types() {
        let cases = [
            (json!({"type": "string"}), "string"),
            (json!({"type": ["integer", "null"], "format": "int64"}), "number | null"),
            (json!({"$ref": "#/components/schemas/ShareRole"}), "ShareRole"),
            (json!({"oneOf": [{"const": "editor"}, {"const": "viewer"}]}), "\"editor\" | \"viewer\""),
            (json!({"enum": ["a", 1, null]}), "\"a\" | 1 | null"),
            (json!({"type": "array", "items": {"type": ["string", "null"]}}), "(string | null)[]"),
            (json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "boolean"}]}), "[string, boolean]"),
            (
                json!({"type": "object", "properties": {"a": {"type": "string"}, "b c": {"type": "number"}}, "required": ["a"]}),
                "{ a: string; \"b c\"?: number }",
            ),
            (json!({"type": "object", "additionalProperties": {"type": "integer"}}), "{ [key: string]: number }"),
            (json!({"anyOf": [{"type": "string"}, {"type": "string"}, {"type": "null"}]}), "string | null"),
            (json!({}), "unknown"),
            (json!(true), "unknown"),
        ];
        for (schema, expected) in cases {
            assert_eq!(ts_type(&schema), expected, "{schema}");
        }
    }

    #[test]
    fn unions_split_only_at_their_top_level() {
        assert_eq!(split_union("\"a | b\" | (c | d)[] | { x: e | f }"), ["\"a | b\"", "(c | d)[]", "{ x: e | f }"]);
        assert_eq!(parenthesized("string".into()), "string");
        assert_eq!(parenthesized("string | null".into()), "(string | null)");
    }
}
