#[engine::table]
pub struct Tag {
    #[engine(primary)]
    pub id: String,
}

fn main() {}
