//! `engine check --against` as a CI step runs it: the `engine` binary on two contract files
//! written from the notes app's, its report on stdout and its exit code.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::{Value, json};

/// The notes app's contract, as committed.
fn notes() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/notes/contract.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("the notes contract")).expect("JSON")
}

/// `doc` written to a file of this test's own, named `name`.
fn write(name: &str, doc: &Value) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("check-against");
    std::fs::create_dir_all(&dir).expect("the test's directory");
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(doc).expect("JSON")).expect("write the contract");
    path.to_str().expect("a UTF-8 path").to_owned()
}

/// `engine check <new> --against <old>`, with `extra` arguments after.
fn check_against(new: &str, old: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_engine"))
        .args(["check", new, "--against", old])
        .args(extra)
        .output()
        .expect("the engine binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

#[test]
fn a_widening_fails_the_check_unless_allowed() {
    let old = write("widening-old", &notes());
    let mut viewers_write = notes();
    viewers_write["x-engine"]["syncRules"]["shared"]["write"]["notes"]
        .as_array_mut()
        .expect("the notes write of `shared`")
        .push(json!({"member": [{"column": "role", "value": "viewer"}], "row": []}));
    let new = write("widening-new", &viewers_write);
    let widens = "  widens write of `notes` in rule `shared`: alternative added: `role == \"viewer\"`\n";

    let refused = check_against(&new, &old, &[]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let stdout = text(&refused.stdout);
    assert!(stdout.contains(&format!("against {old}:\n{widens}1 widening, 0 narrowings\n")), "{stdout}");
    let stderr = text(&refused.stderr);
    assert!(stderr.contains("(1 widening against ") && stderr.contains("pass --allow-widening"), "{stderr}");

    let allowed = check_against(&new, &old, &["--allow-widening"]);
    assert_eq!(allowed.status.code(), Some(0), "{allowed:?}");
    assert_eq!(text(&allowed.stdout), stdout, "the same report, allowed");
    assert_eq!(text(&allowed.stderr), "");
}

#[test]
fn a_narrowing_passes_the_check_and_is_reported() {
    let old = write("narrowing-old", &notes());
    let mut read_only = notes();
    read_only["x-engine"]["syncRules"]["own"]["write"] = json!({});
    let new = write("narrowing-new", &read_only);

    let output = check_against(&new, &old, &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = text(&output.stdout);
    assert!(
        stdout.ends_with(&format!(
            "against {old}:\n  narrows write of `lists` in rule `own`: write removed\n0 widenings, 1 narrowing\n"
        )),
        "{stdout}"
    );
}

#[test]
fn the_same_rules_pass_the_check() {
    let old = write("same", &notes());
    let output = check_against(&old, &old, &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(text(&output.stdout).ends_with("no change to who may read or write rows\n"), "{output:?}");
}

/// A contract written before write conditions could look at rows (each alternative a list of
/// membership equalities) still reads, as the same rules.
#[test]
fn a_contract_from_before_row_conditions_reads_as_the_same_rules() {
    let mut before = notes();
    for rule in before["x-engine"]["syncRules"].as_object_mut().unwrap().values_mut() {
        rule.as_object_mut().unwrap().remove("while");
        for alternatives in rule["write"].as_object_mut().unwrap().values_mut() {
            for alternative in alternatives.as_array_mut().unwrap() {
                assert_eq!(alternative["row"], json!([]), "the notes app has no row conditions");
                *alternative = alternative["member"].clone();
            }
        }
    }
    let output = check_against(&write("current", &notes()), &write("before-row-conditions", &before), &[]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(text(&output.stdout).ends_with("no change to who may read or write rows\n"), "{output:?}");
}

#[test]
fn allow_widening_needs_a_contract_to_compare_with() {
    let contract = write("alone", &notes());
    let output = Command::new(env!("CARGO_BIN_EXE_engine"))
        .args(["check", &contract, "--allow-widening"])
        .output()
        .expect("the engine binary runs");
    assert!(!output.status.success(), "{output:?}");
    assert!(text(&output.stderr).contains("--against"), "{output:?}");
}
