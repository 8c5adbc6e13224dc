#[engine::args]
#[derive(Debug, serde::Serialize)]
pub struct Args {
    pub id: String,
}

fn main() {}
