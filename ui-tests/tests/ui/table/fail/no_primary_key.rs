#[engine::table]
pub struct Tag {
    pub name: String,
}

fn main() {}
