//! Every diagnostic of the macros, one mistake per file under `tests/ui/<macro>/fail/`, each
//! with the exact compiler output it must produce; and the inputs that must compile, under
//! `tests/ui/<macro>/pass/`. Refresh the `.stderr` files with `TRYBUILD=overwrite` and read the
//! diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/*/pass/*.rs");
    cases.compile_fail("tests/ui/*/fail/*.rs");
}
