#[engine::table(merge = "last_write_wins")]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
}

fn main() {}
