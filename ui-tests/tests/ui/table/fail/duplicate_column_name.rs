#[engine::table]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
    pub label: String,
    #[engine(rename = "label")]
    pub caption: String,
}

fn main() {}
