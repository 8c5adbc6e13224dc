#[engine::table(merge = "field")]
pub struct Doc {
    #[engine(primary_key)]
    pub id: String,
    pub body: Option<engine::CrdtText>,
}

fn main() {}
