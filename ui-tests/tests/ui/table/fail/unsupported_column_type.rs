use std::collections::HashMap;

#[engine::table]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
    pub labels: HashMap<String, String>,
}

fn main() {}
