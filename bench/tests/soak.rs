//! A short soak, so that the soak keeps working: the `engine-bench soak` binary for 20 seconds,
//! with a higher fault rate than its default. It exits non-zero when anything is lost, doubled,
//! stuck or diverged.

#[test]
fn a_short_soak_loses_doubles_and_strands_nothing() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_engine-bench"))
        .args(["soak", "--minutes", "0.34", "--users", "4", "--fault-rate", "0.1", "--seed", "7"])
        .env("RUST_LOG", "off")
        .output()
        .expect("run engine-bench soak");
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{report}\n{}", String::from_utf8_lossy(&output.stderr));
    for line in ["| lost | 0 |", "| doubled | 0 |", "| outboxes stuck | 0 |", "| replicas unlike a fresh pull | 0 |"] {
        assert!(report.contains(line), "{line} in\n{report}");
    }
    let kills = report.lines().find_map(|l| l.strip_prefix("| instances SIGKILLed and restarted | "));
    assert!(kills.is_some_and(|k| k.trim_end_matches(" |") != "0"), "an instance was killed:\n{report}");
}
