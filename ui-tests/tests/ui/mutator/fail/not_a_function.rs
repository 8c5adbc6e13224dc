#[engine::mutator]
pub struct AddNote {
    pub id: String,
}

fn main() {}
