//! The `engine` command. `engine migrate`, `engine gen` and `engine introspect` arrive with the
//! storage work; until then the command only checks a contract file.
#![forbid(unsafe_code)]

use std::process::ExitCode;

const USAGE: &str = "usage: engine check <contract.json>

  check   read an engine contract (the JSON of GET /engine/contract) and list its tables,
          sync rules and mutators

migrate, gen and introspect are not available in this version.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [command, path] if command == "check" => match check(path) {
            Ok(summary) => {
                print!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("engine check: {e}");
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// A summary of the contract at `path`, or why it is not one.
fn check(path: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{path} is not JSON: {e}"))?;
    let engine =
        doc.get("x-engine").ok_or_else(|| format!("{path} has no `x-engine` section: not an engine contract"))?;
    let version = engine.get("version").and_then(|v| v.as_str()).unwrap_or("?");
    if version != engine_kernel::wire::PROTOCOL_VERSION {
        return Err(format!(
            "{path} speaks protocol version {version}; this engine speaks {}",
            engine_kernel::wire::PROTOCOL_VERSION
        ));
    }
    let names = |section: &str| -> Vec<String> {
        engine.get(section).and_then(|v| v.as_object()).map(|o| o.keys().cloned().collect()).unwrap_or_default()
    };
    Ok(format!(
        "protocol {version}\ntables: {}\nsync rules: {}\nmutators: {}\n",
        names("tables").join(", "),
        names("syncRules").join(", "),
        names("mutators").join(", ")
    ))
}
