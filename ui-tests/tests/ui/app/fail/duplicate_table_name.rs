use ui_tests::List;

#[engine::table(name = "lists")]
pub struct OtherList {
    #[engine(primary_key)]
    pub id: String,
}

fn main() {
    let _app = engine::app! {
        tables: [List, OtherList],
    };
}
