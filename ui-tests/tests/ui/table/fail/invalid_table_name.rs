#[engine::table(name = "My Tags")]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
}

fn main() {}
