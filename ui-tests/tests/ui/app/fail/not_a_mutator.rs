use ui_tests::List;

pub async fn archive() {}

fn main() {
    let _app = engine::app! {
        tables: [List],
        mutators: [archive],
    };
}
