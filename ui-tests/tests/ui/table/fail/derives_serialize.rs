#[engine::table]
#[derive(Debug, serde::Serialize)]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
}

fn main() {}
