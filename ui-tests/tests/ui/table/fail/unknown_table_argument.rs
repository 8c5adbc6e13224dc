#[engine::table(schema = "app")]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
}

fn main() {}
