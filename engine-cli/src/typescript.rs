//! `engine gen`: one TypeScript module for the app a contract describes, for the TypeScript
//! client (`@engine/client`, in `clients/typescript/`). It holds a row type per table, an
//! argument type per mutator, typed mutator calls, the sync rules with their parameters and a
//! bucket key helper per rule, the schema the client is built with, and the protocol version.
//!
//! The module is a function of the contract alone: tables, rules, mutators and schemas are
//! written in name order whatever order the document has, so the same contract always gives the
//! same bytes and a changed contract gives a reviewable diff.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use heck::{ToLowerCamelCase, ToUpperCamelCase};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use engine_kernel::rules::{ParamSource, RuleMeta};
use engine_kernel::wire::PROTOCOL_VERSION;
use engine_kernel::{App, ColumnMeta, SqlType, TableMeta};

use crate::error::{Error, Result};
use crate::source::Contract;

/// The TypeScript module for the app `contract` describes.
///
/// # Errors
/// [`Error::Contract`] when the contract does not describe a valid app, [`Error::Generate`]
/// when it has something TypeScript cannot be written for (an unknown column type, two things
/// that would get one name).
pub fn typescript(contract: &Contract) -> Result<String> {
    // Tables and rules are read as `engine check` and `engine migrate` read them, checks
    // included: a client of an app the server could not run is of no use.
    let app = contract.app()?;
    let failed = |reason: String| Error::Generate { origin: contract.origin.clone(), reason };
    let mutators: BTreeMap<String, Mutator> = match &contract.doc["x-engine"]["mutators"] {
        Value::Null => BTreeMap::new(),
        listed => serde_json::from_value(listed.clone())
            .map_err(|e| failed(format!("`x-engine.mutators` does not have the contract's shape: {e}")))?,
    };
    let schemas = contract.doc["components"]["schemas"].as_object().cloned().unwrap_or_default();
    let mut tables: Vec<&'static TableMeta> = app.tables().iter().map(|t| t.meta()).collect();
    tables.sort_by_key(|t| t.name);
    let mut rules: Vec<&RuleMeta> = app.sync_rules().rules.iter().collect();
    rules.sort_by_key(|r| r.name);
    let module = Module {
        app: &app,
        tables,
        rules,
        mutators: &mutators,
        schemas: &schemas,
        contract_tables: &contract.doc["x-engine"]["tables"],
    };
    module.render().map_err(failed)
}

/// A mutator as the contract describes it: the code behind it is the server's.
#[derive(Debug, Deserialize)]
struct Mutator {
    args: Value,
    #[serde(default)]
    description: String,
}

/// Names the module declares besides the contract's types.
const OWN_NAMES: [&str; 9] =
    ["Tables", "Mutators", "BucketParams", "protocolVersion", "mutators", "buckets", "schema", "bucketKey", "Mutate"];

const REF_PREFIX: &str = "#/components/schemas/";

/// Where a component schema of the contract comes from.
fn referenced_name(schema: &Value) -> Option<&str> {
    schema.get("$ref")?.as_str()?.strip_prefix(REF_PREFIX)
}

struct Module<'a> {
    app: &'a App,
    /// In name order, as the rules below.
    tables: Vec<&'static TableMeta>,
    rules: Vec<&'a RuleMeta>,
    mutators: &'a BTreeMap<String, Mutator>,
    schemas: &'a Map<String, Value>,
    /// `x-engine.tables`, for the component each row's schema names.
    contract_tables: &'a Value,
}

impl Module<'_> {
    fn render(&self) -> std::result::Result<String, String> {
        let mut names = Names::default();
        for name in OWN_NAMES {
            names.claim(name, "a name of the module")?;
        }
        let mut out = String::new();
        out.push_str(HEADER);
        out.push_str("import { bucketKey, defineSchema, type Mutate } from \"@engine/client\";\n\n");
        doc(&mut out, "", "The protocol version the contract speaks (`x-engine.version`).");
        writeln!(out, "export const protocolVersion = {};", string(PROTOCOL_VERSION)).ok();

        let row_types = self.rows(&mut out, &mut names)?;
        self.arguments(&mut out, &mut names, &row_types)?;
        self.calls(&mut out)?;
        self.rules(&mut out)?;
        self.schema(&mut out);
        Ok(out)
    }

    /// A row type per table and `Tables`; returns the component names the rows stand for.
    fn rows(&self, out: &mut String, names: &mut Names) -> std::result::Result<BTreeSet<String>, String> {
        let mut row_types = BTreeMap::new();
        for table in &self.tables {
            let row = &self.contract_tables[table.name]["row"];
            let type_name = referenced_name(row).map_or_else(|| table.name.to_upper_camel_case(), str::to_owned);
            names.claim(&type_name, &format!("the row type of table `{}`", table.name))?;
            out.push('\n');
            doc(out, "", &format!("{} Table `{}`.", sentence(table.description), table.name));
            writeln!(out, "export interface {type_name} {{").ok();
            for column in table.columns {
                let ts = column_type(column).ok_or_else(|| {
                    format!(
                        "column `{}.{}` has the type `{}`, unknown here",
                        table.name,
                        column.name,
                        column.sql_type.name()
                    )
                })?;
                doc(out, "  ", &column_doc(column));
                writeln!(out, "  {}: {ts};", property(column.name)).ok();
            }
            out.push_str("}\n");
            row_types.insert(table.name, type_name);
        }
        out.push('\n');
        doc(out, "", "Every table's row type, by the table's SQL name.");
        out.push_str("export interface Tables {\n");
        for (table_name, type_name) in &row_types {
            writeln!(out, "  {}: {type_name};", property(table_name)).ok();
        }
        out.push_str("}\n");
        Ok(row_types.into_values().collect())
    }

    /// The component types the mutators' arguments use, an argument type per mutator, and
    /// `Mutators`.
    fn arguments(
        &self,
        out: &mut String,
        names: &mut Names,
        row_types: &BTreeSet<String>,
    ) -> std::result::Result<(), String> {
        let mut wanted = BTreeSet::new();
        for mutator in self.mutators.values() {
            references(&mutator.args, &mut wanted);
        }
        // Components reached through other components, until none is new.
        let mut emitted = BTreeSet::new();
        let mut components = Vec::new();
        while let Some(name) = wanted.iter().find(|n| !emitted.contains(*n)).cloned() {
            emitted.insert(name.clone());
            let schema = self.schemas.get(&name).ok_or_else(|| format!("`{REF_PREFIX}{name}` does not resolve"))?;
            references(schema, &mut wanted);
            components.push((name, schema));
        }
        components.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, schema) in components {
            if row_types.contains(&name) {
                // A row's own schema: the row type stands for it.
                continue;
            }
            names.claim(&name, &format!("the schema `{name}`"))?;
            out.push('\n');
            named_type(out, &name, schema);
        }

        let mut argument_types = BTreeMap::new();
        for (mutator_name, mutator) in self.mutators {
            let alias = format!("{}Args", mutator_name.to_upper_camel_case());
            let target = ts_type(&mutator.args);
            argument_types.insert(mutator_name.as_str(), alias.clone());
            if target == alias {
                continue;
            }
            names.claim(&alias, &format!("the argument type of mutator `{mutator_name}`"))?;
            out.push('\n');
            doc(out, "", &format!("The arguments of `{mutator_name}`."));
            writeln!(out, "export type {alias} = {target};").ok();
        }
        out.push('\n');
        doc(out, "", "Every mutator's argument type, by the mutator's name.");
        out.push_str("export interface Mutators {\n");
        for (mutator_name, alias) in &argument_types {
            writeln!(out, "  {}: {alias};", property(mutator_name)).ok();
        }
        out.push_str("}\n");
        Ok(())
    }

    /// `mutators(client)`: a typed call per mutator.
    fn calls(&self, out: &mut String) -> std::result::Result<(), String> {
        let mut calls = Names::default();
        out.push('\n');
        doc(
            out,
            "",
            "A typed call per mutator over a client's `mutate(name, args)`:\n\
             `mutators(client).addNote(args)` is `client.mutate(\"add_note\", args)`.",
        );
        out.push_str("export function mutators<R>(client: Mutate<Mutators, R>) {\n  return {\n");
        for (mutator_name, mutator) in self.mutators {
            let call = mutator_name.to_lower_camel_case();
            calls.claim(&call, &format!("the call of mutator `{mutator_name}`"))?;
            doc(out, "    ", &mutator.description);
            let alias = format!("{}Args", mutator_name.to_upper_camel_case());
            writeln!(
                out,
                "    {}: (args: {alias}): R => client.mutate({}, args),",
                property(&call),
                string(mutator_name)
            )
            .ok();
        }
        out.push_str("  };\n}\n");
        Ok(())
    }

    /// `BucketParams` and `buckets`: the parameters of each rule and its bucket keys.
    fn rules(&self, out: &mut String) -> std::result::Result<(), String> {
        out.push('\n');
        doc(out, "", "The parameters of each sync rule's buckets, by the rule's name.");
        out.push_str("export interface BucketParams {\n");
        for rule in &self.rules {
            let mut fields = Vec::new();
            for parameter in rule.parameters {
                let ts = param_type(parameter.sql_type).ok_or_else(|| {
                    format!(
                        "parameter `{}` of sync rule `{}` has the type `{}`, which no bucket key holds",
                        parameter.name,
                        rule.name,
                        parameter.sql_type.name()
                    )
                })?;
                fields.push(format!("{}: {ts}", property(parameter.name)));
            }
            let fields = if fields.is_empty() { "{}".to_owned() } else { format!("{{ {} }}", fields.join("; ")) };
            writeln!(out, "  {}: {fields};", property(rule.name)).ok();
        }
        out.push_str("}\n\n");
        doc(
            out,
            "",
            "The key of a bucket of each sync rule, from its parameters: `buckets.shared({ list_id })`.\n\
             Parameters come from the actor on the server; these keys name buckets the client holds.",
        );
        out.push_str("export const buckets = {\n");
        for rule in &self.rules {
            let sources: Vec<String> =
                rule.parameters.iter().map(|p| format!("`{}` from `{}`", p.name, source(p.source))).collect();
            let about =
                if sources.is_empty() { String::new() } else { format!(" Parameters: {}.", sources.join(", ")) };
            doc(out, "  ", &format!("{}{about}", sentence(rule.description)));
            let values: Vec<String> = rule
                .parameters
                .iter()
                .map(|p| {
                    let value = format!("params.{}", access(p.name));
                    // The canonical text of a UUID is lowercase.
                    if p.sql_type == SqlType::Uuid { format!("{value}.toLowerCase()") } else { value }
                })
                .collect();
            writeln!(
                out,
                "  {}: (params: BucketParams[{}]): string => bucketKey({}, [{}]),",
                property(rule.name),
                string(rule.name),
                string(rule.name),
                values.join(", ")
            )
            .ok();
        }
        out.push_str("};\n");
        Ok(())
    }

    /// `schema`: what the client needs of the contract, typed by `Tables` and `Mutators`.
    fn schema(&self, out: &mut String) {
        let tables: Map<String, Value> = self
            .tables
            .iter()
            .map(|t| {
                let columns: Vec<Value> = t
                    .columns
                    .iter()
                    .map(|c| json!({"name": c.name, "type": c.sql_type.name(), "nullable": c.nullable}))
                    .collect();
                let crdt: Vec<&str> = t.crdt_columns().map(|c| c.name).collect();
                let table = json!({
                    "columns": columns,
                    "primaryKey": t.primary_key,
                    "merge": t.merge.name(),
                    "crdt": crdt,
                    "owner": t.owner,
                    "softDelete": t.soft_delete,
                    "synced": self.app.is_synced(t.name),
                });
                (t.name.to_owned(), table)
            })
            .collect();
        let rules: Map<String, Value> = self
            .rules
            .iter()
            .map(|r| {
                let parameters: Vec<Value> = r
                    .parameters
                    .iter()
                    .map(|p| json!({"name": p.name, "type": p.sql_type.name(), "source": source(p.source)}))
                    .collect();
                (r.name.to_owned(), json!({"parameters": parameters, "tables": r.tables()}))
            })
            .collect();
        let mutators: Vec<&String> = self.mutators.keys().collect();
        let schema = json!({
            "version": PROTOCOL_VERSION,
            "tables": tables,
            "syncRules": rules,
            "mutators": mutators,
        });
        out.push('\n');
        doc(
            out,
            "",
            "The app as the client needs it: tables with their keys and merge policies, sync rules,\n\
             mutator names. `createEngineClient({ schema, … })`.",
        );
        writeln!(out, "export const schema = defineSchema<Tables, Mutators>({});", literal(&schema, "")).ok();
    }
}

const HEADER: &str = "\
// Generated by `engine gen` from an app's contract. Do not edit: generate it again when the
// contract changes (`engine gen <contract file or server URL> --out <this file>`).

";

/// Names declared once in the module.
#[derive(Default)]
struct Names(BTreeMap<String, String>);

impl Names {
    fn claim(&mut self, name: &str, what: &str) -> std::result::Result<(), String> {
        match self.0.insert(name.to_owned(), what.to_owned()) {
            Some(before) => Err(format!("{before} and {what} would both be named `{name}`")),
            None => Ok(()),
        }
    }
}

// `SqlType` is `#[non_exhaustive]`, so `column_type`, `column_doc` and `param_type` end their
// matches in a `_` arm, after naming every type. This assertion fails the build when a type is
// added, until they name it too and the count here follows.
const _: () =
    assert!(SqlType::ALL.len() == 13, "a new `SqlType`: name it in `column_type`, `column_doc` and `param_type`");

/// The TypeScript type of a column's values, as rows carry them (`docs/protocol.md#row-values`).
fn column_type(column: &ColumnMeta) -> Option<String> {
    let base = match column.sql_type {
        SqlType::Text | SqlType::Uuid | SqlType::Timestamp | SqlType::Bytes | SqlType::CrdtText | SqlType::CrdtMap => {
            "string"
        }
        SqlType::SmallInt | SqlType::Integer | SqlType::BigInt => "number",
        // A value that is not finite travels as null.
        SqlType::Real | SqlType::Double => "number | null",
        SqlType::Boolean => "boolean",
        SqlType::Json => "unknown",
        _ => return None,
    };
    Some(if column.nullable && !base.ends_with("| null") { format!("{base} | null") } else { base.to_owned() })
}

/// What a column's doc says: its description, and how its values travel when that is not plain.
fn column_doc(column: &ColumnMeta) -> String {
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
        _ => "",
    };
    [sentence(column.description), form.to_owned()].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The TypeScript type of a bucket parameter.
fn param_type(sql_type: SqlType) -> Option<&'static str> {
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
        _ => None,
    }
}

/// Where a parameter's value comes from, as the contract writes it.
fn source(source: ParamSource) -> String {
    match source {
        ParamSource::Claim(claim) => claim.describe(),
        ParamSource::Membership { column } => format!("membership.{column}"),
    }
}

/// `text` ending with a full stop, unless empty.
fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() || text.ends_with(['.', '!', '?', ':']) { text.to_owned() } else { format!("{text}.") }
}

/// Every component `schema` refers to, added to `into`.
fn references(schema: &Value, into: &mut BTreeSet<String>) {
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
fn named_type(out: &mut String, name: &str, schema: &Value) {
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
fn ts_type(schema: &Value) -> String {
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

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// `name` as a property key: bare when it is an identifier, quoted otherwise.
fn property(name: &str) -> String {
    if is_identifier(name) { name.to_owned() } else { string(name) }
}

/// `name` as a member access after a dot, or in brackets.
fn access(name: &str) -> String {
    if is_identifier(name) { name.to_owned() } else { format!("[{}]", string(name)) }
}

/// A string literal (JSON's escapes are JavaScript's).
fn string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// Widest line a doc comment is wrapped to.
const DOC_WIDTH: usize = 100;

/// A doc comment of `text` at `indent`, its lines wrapped; nothing for empty text.
fn doc(out: &mut String, indent: &str, text: &str) {
    let text = text.trim().replace("*/", "*\\/");
    if text.is_empty() {
        return;
    }
    if !text.contains('\n') && indent.len() + text.len() + 7 <= DOC_WIDTH {
        writeln!(out, "{indent}/** {text} */").ok();
        return;
    }
    writeln!(out, "{indent}/**").ok();
    let room = DOC_WIDTH.saturating_sub(indent.len() + 3).max(40);
    for line in text.lines() {
        let mut current = String::new();
        for word in line.split_whitespace() {
            if !current.is_empty() && current.len() + 1 + word.len() > room {
                writeln!(out, "{indent} * {current}").ok();
                current.clear();
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        if current.is_empty() {
            writeln!(out, "{indent} *").ok();
        } else {
            writeln!(out, "{indent} * {current}").ok();
        }
    }
    writeln!(out, "{indent} */").ok();
}

/// Widest line a literal is kept on before it is spread over several lines.
const LINE_WIDTH: usize = 110;

/// `value` as a TypeScript literal at `indent`: keys bare where they can be, on one line when
/// it fits.
fn literal(value: &Value, indent: &str) -> String {
    let inline = inline_literal(value);
    if indent.len() + inline.len() <= LINE_WIDTH || !matches!(value, Value::Object(_) | Value::Array(_)) {
        return inline;
    }
    let inner = format!("{indent}  ");
    let items: Vec<String> = match value {
        Value::Object(map) => {
            map.iter().map(|(k, v)| format!("{inner}{}: {},", property(k), literal(v, &inner))).collect()
        }
        Value::Array(items) => items.iter().map(|v| format!("{inner}{},", literal(v, &inner))).collect(),
        _ => unreachable!("scalars return inline above"),
    };
    let (open, close) = if value.is_object() { ('{', '}') } else { ('[', ']') };
    format!("{open}\n{}\n{indent}{close}", items.join("\n"))
}

fn inline_literal(value: &Value) -> String {
    match value {
        Value::Object(map) if map.is_empty() => "{}".to_owned(),
        Value::Object(map) => {
            let items: Vec<String> =
                map.iter().map(|(k, v)| format!("{}: {}", property(k), inline_literal(v))).collect();
            format!("{{ {} }}", items.join(", "))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(inline_literal).collect::<Vec<_>>().join(", ")),
        scalar => scalar.to_string(),
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn names_and_comments_are_written_safely() {
        assert_eq!(property("list_id"), "list_id");
        assert_eq!(property("2nd"), "\"2nd\"");
        assert_eq!(access("a-b"), "[\"a-b\"]");
        let mut out = String::new();
        doc(&mut out, "  ", "ends a comment */ here");
        assert_eq!(out, "  /** ends a comment *\\/ here */\n");
        let mut out = String::new();
        doc(&mut out, "", &"word ".repeat(30));
        assert_eq!(out, format!("/**\n * {}\n * {}\n */\n", ["word"; 19].join(" "), ["word"; 11].join(" ")));
    }

    #[test]
    fn literals_stay_on_one_line_until_they_are_too_wide() {
        assert_eq!(literal(&json!({"a": [1, 2], "b c": null}), ""), "{ a: [1, 2], \"b c\": null }");
        let wide = json!({"columns": vec!["a_rather_long_column_name"; 6]});
        let written = literal(&wide, "");
        assert!(written.starts_with("{\n  columns: [\n    \"a_rather_long_column_name\",\n"), "{written}");
    }

    fn contract(engine: Value, schemas: Value) -> Contract {
        let mut doc = engine_kernel::contract(&engine_kernel::App::builder().build().expect("an empty app"));
        doc["x-engine"] = engine;
        doc["components"]["schemas"] = schemas;
        Contract { origin: "test".into(), doc }
    }

    #[test]
    fn two_things_named_alike_are_refused() {
        let doc = contract(
            json!({"version": "1", "mutators": {
                "add_note": {"args": {"type": "object"}, "description": ""},
                "addNote": {"args": {"type": "object"}, "description": ""},
            }}),
            json!({}),
        );
        let err = typescript(&doc).unwrap_err().to_string();
        assert!(err.contains("would both be named `AddNoteArgs`"), "{err}");

        let doc = contract(
            json!({"version": "1", "mutators": {"m": {"args": {"$ref": "#/components/schemas/Tables"}}}}),
            json!({"Tables": {"type": "object"}}),
        );
        let err = typescript(&doc).unwrap_err().to_string();
        assert!(err.contains("the schema `Tables`"), "{err}");
    }

    #[test]
    fn a_dangling_reference_is_refused() {
        let doc = contract(
            json!({"version": "1", "mutators": {"m": {"args": {"$ref": "#/components/schemas/Gone"}}}}),
            json!({}),
        );
        let err = typescript(&doc).unwrap_err().to_string();
        assert!(err.contains("`#/components/schemas/Gone` does not resolve"), "{err}");
    }
}
