#[engine::table(merge = "crdt")]
pub struct Doc {
    #[engine(primary_key)]
    pub id: String,
    pub body: engine::CrdtText,
    pub title: String,
}

fn main() {}
