//! The declarations of the generated module, section by section (`Module::render`): the row
//! types and `Tables`, the argument types and `Mutators`, the typed mutator calls, the sync rules'
//! parameters and bucket keys, and the schema. [`Names`] refuses two declarations of one name.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use heck::{ToLowerCamelCase, ToUpperCamelCase};
use serde_json::{Map, Value, json};

use engine_kernel::rules::RuleMeta;
use engine_kernel::wire::PROTOCOL_VERSION;
use engine_kernel::{App, SqlType, TableMeta};

use super::Mutator;
use super::columns::{column_doc, column_type, param_type, source};
use super::json_schema::{REF_PREFIX, named_type, referenced_name, references, ts_type};
use super::syntax::{access, doc, literal, property, sentence, string};

/// Names the module declares besides the contract's types.
const OWN_NAMES: [&str; 9] =
    ["Tables", "Mutators", "BucketParams", "protocolVersion", "mutators", "buckets", "schema", "bucketKey", "Mutate"];

/// What the generated module is written from.
pub(super) struct Module<'a> {
    pub(super) app: &'a App,
    /// In name order, as the rules below.
    pub(super) tables: Vec<&'static TableMeta>,
    pub(super) rules: Vec<&'a RuleMeta>,
    pub(super) mutators: &'a BTreeMap<String, Mutator>,
    pub(super) schemas: &'a Map<String, Value>,
    /// `x-engine.tables`, for the component each row's schema names.
    pub(super) contract_tables: &'a Value,
}

impl Module<'_> {
    /// The whole module, or why it cannot be written.
    pub(super) fn render(&self) -> std::result::Result<String, String> {
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
                    .map(|c| {
                        let mut column = json!({"name": c.name, "type": c.sql_type.name(), "nullable": c.nullable});
                        // Only where true, so that an app without blobs reads as before.
                        if c.blob {
                            column["blob"] = Value::Bool(true);
                        }
                        column
                    })
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
        let rules: Map<String, Value> = self.rules.iter().map(|r| (r.name.to_owned(), rule_schema(r))).collect();
        let mutators: Vec<&String> = self.mutators.keys().collect();
        let schema = json!({
            "version": PROTOCOL_VERSION,
            "tables": tables,
            "syncRules": rules,
            "serverOnly": self.app.sync_rules().server_only,
            "mutators": mutators,
        });
        out.push('\n');
        doc(
            out,
            "",
            "The app as the client needs it: tables with their keys and merge policies, sync rules\n\
             (what they let the actor write, for the client to refuse offline what the server would),\n\
             the tables only server code writes, mutator names. `createEngineClient({ schema, … })`.",
        );
        writeln!(out, "export const schema = defineSchema<Tables, Mutators>({});", literal(&schema, "")).ok();
    }
}

/// A sync rule as the client's offline evaluation of the write rules reads it
/// (`clients/typescript/packages/client/src/authorize.ts`): the contract's description of it,
/// without the prose.
fn rule_schema(rule: &RuleMeta) -> Value {
    let mut described = engine_kernel::contract::rule_json(rule);
    if let Some(fields) = described.as_object_mut() {
        fields.remove("description");
    }
    described
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
