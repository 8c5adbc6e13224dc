//! `engine check`: read a contract and summarize it.

use crate::error::Result;
use crate::source::Contract;

/// A summary of the contract's app: protocol version, tables, sync rules and mutators.
pub(crate) fn check(contract: &Contract) -> Result<String> {
    let app = contract.app()?;
    let tables: Vec<&str> = app.tables().iter().map(|t| t.meta().name).collect();
    let rules: Vec<&str> = app.sync_rules().rules.iter().map(|r| r.name).collect();
    // Mutators are not part of an app read from a contract; the contract lists their names.
    let mutators: Vec<&str> = contract.doc["x-engine"]["mutators"]
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    Ok(format!(
        "protocol {}\ntables: {}\nsync rules: {}\nmutators: {}\n",
        engine_kernel::wire::PROTOCOL_VERSION,
        tables.join(", "),
        rules.join(", "),
        mutators.join(", ")
    ))
}
