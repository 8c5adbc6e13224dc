//! `engine gen`: one TypeScript module for the app a contract describes, for the TypeScript
//! client (`@engine/client`, in `clients/typescript/`). It holds a row type per table, an
//! argument type per mutator, typed mutator calls, the sync rules with their parameters and a
//! bucket key helper per rule, the schema the client is built with, and the protocol version.
//!
//! The module is a function of the contract alone: tables, rules, mutators and schemas are
//! written in name order whatever order the document has, so the same contract always gives the
//! same bytes and a changed contract gives a reviewable diff.
//!
//! [`module`] writes the declarations, section by section. [`columns`] gives the types of columns
//! and bucket parameters, [`json_schema`] the types of the contract's JSON Schemas, and [`syntax`]
//! writes TypeScript's names, strings, comments and literals.

mod columns;
mod json_schema;
mod module;
mod syntax;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use engine_kernel::TableMeta;
use engine_kernel::rules::RuleMeta;

use self::module::Module;
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
pub(super) struct Mutator {
    pub(super) args: Value,
    #[serde(default)]
    pub(super) description: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
