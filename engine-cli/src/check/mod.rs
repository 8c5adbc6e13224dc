//! `engine check`: read a contract and summarize it; with `--against`, report how its sync rules
//! change who may read or write rows next to an older contract's, and refuse a widening unless
//! it is allowed.

mod widening;

use crate::error::{Error, Result};
use crate::source::Contract;

use widening::Effect;

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

/// The summary of `contract`, then every change of its sync rules next to `old`'s, widenings
/// first, and a count of each.
///
/// # Errors
/// [`Error::Contract`] when either contract does not describe an app; [`Error::Widening`],
/// carrying the report, when a change widens and `allow_widening` is false.
pub(crate) fn against(contract: &Contract, old: &Contract, allow_widening: bool) -> Result<String> {
    let mut report = check(contract)?;
    let changes = widening::compare(old.app()?.sync_rules(), contract.app()?.sync_rules());
    if changes.is_empty() {
        report += &format!("against {}: no change to who may read or write rows\n", old.origin);
        return Ok(report);
    }
    report += &format!("against {}:\n", old.origin);
    for change in &changes {
        report += &format!("  {change}\n");
    }
    let widenings = changes.iter().filter(|c| c.effect == Effect::Widens).count();
    let narrowings = changes.len() - widenings;
    report += &format!("{}, {}\n", count(widenings, "widening"), count(narrowings, "narrowing"));
    if widenings > 0 && !allow_widening {
        return Err(Error::Widening { against: old.origin.clone(), widenings, report });
    }
    Ok(report)
}

/// `1 widening`, `2 widenings`.
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}
