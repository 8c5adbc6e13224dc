#[engine::table]
pub struct Tag {
    #[engine(primary_key)]
    pub id: Option<String>,
}

fn main() {}
