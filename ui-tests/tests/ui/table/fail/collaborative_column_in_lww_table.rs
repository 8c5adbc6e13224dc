#[engine::table]
pub struct Doc {
    #[engine(primary_key)]
    pub id: String,
    pub body: engine::CrdtText,
}

fn main() {}
