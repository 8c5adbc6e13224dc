#[engine::table]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
    #[engine(owner)]
    pub owner_id: String,
    #[engine(owner)]
    pub creator_id: String,
}

fn main() {}
