pub struct Folder;

fn main() {
    let _app = engine::app! {
        tables: [Folder],
    };
}
