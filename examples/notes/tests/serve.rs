//! The quickstart binary refuses to serve beyond this machine with the development secret,
//! which anyone can read and sign tokens with (issue 37, finding 12).

use std::process::Command;

#[test]
fn the_development_secret_serves_loopback_only() {
    let output = Command::new(env!("CARGO_BIN_EXE_example-notes"))
        .env("HOST", "0.0.0.0")
        .env("PORT", "0")
        .env_remove("ENGINE_SECRET")
        .env("DATABASE_URL", "postgres://postgres@127.0.0.1:1/never_reached")
        .output()
        .expect("the binary runs");
    assert!(!output.status.success(), "it does not serve: {output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ENGINE_SECRET") && stderr.contains("0.0.0.0"), "it says why: {stderr}");
}
