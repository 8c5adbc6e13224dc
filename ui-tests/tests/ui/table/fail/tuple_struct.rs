#[engine::table]
pub struct Tag(String, String);

fn main() {}
