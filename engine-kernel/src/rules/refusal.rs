//! The words of a write refused by the sync rules (`docs/design.md` §4): the server's refusals,
//! and the clients' offline ones, which must be the same text for the same write. A refusal
//! names the table and the rule, never a bucket key, which may hold values the actor did not
//! send: whoever refuses logs the bucket on its side.

use std::collections::BTreeSet;

use super::SyncRules;
use crate::{BucketKey, Error};

/// Why a write into one bucket is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It puts a row into a bucket the actor does not hold.
    Puts,
    /// It grants a bucket, or a permission in one, the actor may not grant.
    Grants,
    /// It accepts an invitation of another member.
    Accepts,
}

/// The refusal of a write to `table` that puts a row into, or grants, a bucket of rule `rule`.
pub fn forbidden(table: &str, rule: &str, refusal: Refusal) -> Error {
    Error::forbidden(match refusal {
        Refusal::Puts => format!(
            "the mutation puts a row of `{table}` into a bucket of rule `{rule}` that the actor may not write `{table}` in, and no `accept(...)` of rule `{rule}` admits it"
        ),
        Refusal::Grants => format!(
            "the mutation's write to `{table}` grants a bucket of rule `{rule}` (or a permission in it) that the actor may not grant"
        ),
        Refusal::Accepts => format!(
            "the mutation's write to `{table}` accepts another member's invitation to a bucket of rule `{rule}`: an invitation is accepted by its member only (`invite(...)`)"
        ),
    })
}

/// The refusal of a change to a row of `table` lying in `buckets` (none where the actor may
/// write it): it names each of their rules and what the rule says of `table` (`write(...)`, or
/// nothing).
pub fn forbidden_change(rules: &SyncRules, table: &str, buckets: &BTreeSet<BucketKey>) -> Error {
    if buckets.is_empty() {
        return Error::forbidden(format!(
            "this row of `{table}` lies in no bucket: a client mutation writes only rows of a bucket whose rule lets the actor write them"
        ));
    }
    let mut names: Vec<&str> = buckets.iter().map(BucketKey::rule).collect();
    names.dedup();
    let said: Vec<String> = names
        .iter()
        .map(|name| match rules.rule(name).and_then(|rule| rule.write_rule(table)) {
            Some(write) if write.is_unconditional() => format!(
                "rule `{name}` lets its holders write it, and the actor holds none of its buckets this row lies in"
            ),
            Some(write) if write.reads_rows() => format!(
                "rule `{name}` lets only the memberships its `write({table}: …)` names write it, and only rows it names"
            ),
            Some(_) => format!("rule `{name}` lets only the memberships its `write({table}: …)` names write it"),
            None => format!("rule `{name}` has no `write({table})`"),
        })
        .collect();
    Error::forbidden(format!("the actor may not write this row of `{table}`: {}", said.join("; ")))
}

/// The refusal of a client write to `table`, which only server code writes (`server_only(...)`).
pub fn forbidden_server_only(table: &str) -> Error {
    Error::forbidden(format!(
        "`{table}` is written by server code only (`server_only`): a client mutation may not write it"
    ))
}

/// The refusal of a client write to `table`, which the raw membership query of rule `rule`
/// reads: only server code writes it.
pub fn forbidden_raw_reader(table: &str, rule: &str) -> Error {
    Error::forbidden(format!(
        "`{table}` is written by server code only: the raw membership query of rule `{rule}` reads it, and whom a change to it grants cannot be checked"
    ))
}
