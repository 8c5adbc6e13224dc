#[engine::table]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
    #[engine(soft_delete)]
    pub deleted: bool,
}

fn main() {}
