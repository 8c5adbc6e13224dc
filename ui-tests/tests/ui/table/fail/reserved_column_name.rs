#[engine::table]
pub struct Tag {
    #[engine(primary_key)]
    pub id: String,
    #[engine(rename = "_engine_xid")]
    pub xid: i64,
}

fn main() {}
