#[engine::table]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
    #[engine(owner)]
    pub owner_id: i64,
}

fn main() {}
