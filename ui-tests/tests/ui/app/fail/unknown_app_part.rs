fn main() {
    let _app = engine::app! {
        tables: [ui_tests::List],
        rules: rules,
    };
}
